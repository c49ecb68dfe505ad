package partner

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// L3Recovery says what [RebuildGroup] did on one rank.
type L3Recovery struct {
	DataRebuilt, ParityRebuilt bool
	// DataImage holds the rebuilt data file's bytes, checked against the
	// recorded hash, when Options.ImageLimit allowed it and the rebuild
	// wrote the file in order.
	DataImage []byte
	// Lost lists the group ranks whose data (d) or parity (p) file was lost,
	// e.g. "d0 p0 d1 p1".
	Lost []string
}

const (
	lostData   = 1
	lostParity = 2
)

// checkParity reports why this member's parity file cannot be used, or nil.
func checkParity(parity FileInfo, rank, bs, k, m, g int, unit int) error {
	if !parity.Valid() {
		return fmt.Errorf("%w: no parity file listed", ErrBadArgument)
	}
	if err := parity.check(rank, bs); err != nil {
		return err
	}
	f, err := parity.Driver.Open(parity.Path, vfd.ReadOnly)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr, err := encode.ReadParityHeader(f, parity.Size, parity.Path)
	if err != nil {
		return err
	}
	if hdr.K != k || hdr.M != m || hdr.Index != g || (m < k && unit > 0 && hdr.Unit != unit) {
		return &CorruptionError{Path: parity.Path, Rank: rank, Err: fmt.Errorf("%w: parity header k=%d m=%d member=%d unit=%d does not fit group k=%d m=%d member=%d unit=%d",
			ErrHashMismatch, hdr.K, hdr.M, hdr.Index, hdr.Unit, k, m, g, unit)}
	}
	return nil
}

// rebuildPlan is what one member sends and receives at each shift of a
// rebuild, and the stripes it rebuilds.
type rebuildPlan struct {
	need   []int      // stripes where this member lost a shard
	chosen [][]int    // per stripe: the DataShards() surviving positions used
	send   [][][2]int // per shift: {stripe, position} of my shards sent to g+s
	recv   [][][2]int // per shift: {stripe, position} received from g-s
	used   []bool     // per shift: whether anyone exchanges
	most   int        // the most stripes any member needs
}

func planRebuild(l encode.Layout, dmg encode.Damage, g int) rebuildPlan {
	k, d := l.K, l.DataShards()
	p := rebuildPlan{chosen: make([][]int, l.Stripes()), send: make([][][2]int, k), recv: make([][][2]int, k), used: make([]bool, k)}
	need := make([][]int, k) // per member
	for t := range l.Stripes() {
		for pos, lost := range l.Lost(dmg, t) {
			if !lost && len(p.chosen[t]) < d {
				p.chosen[t] = append(p.chosen[t], pos)
			}
			if m := l.Holder(t, pos).Member; lost && !slices.Contains(need[m], t) {
				need[m] = append(need[m], t)
			}
		}
	}
	p.need = need[g]
	for _, n := range need {
		p.most = max(p.most, len(n))
	}
	// sent(x, y): what member x sends member y
	sent := func(x, y int) [][2]int {
		var out [][2]int
		for _, t := range need[y] {
			for _, pos := range p.chosen[t] {
				if l.Holder(t, pos).Member == x {
					out = append(out, [2]int{t, pos})
				}
			}
		}
		return out
	}
	for s := range k {
		p.send[s] = sent(g, (g+s)%k)
		p.recv[s] = sent((g-s+k)%k, g)
		for x := range k {
			if len(sent(x, (x+s)%k)) > 0 {
				p.used[s] = true
			}
		}
	}
	return p
}

// RebuildGroup is L3's recovery. Collective over the world c. data is
// this rank's data file and parity its parity file. Each comes with the
// size and hash of the whole file recorded at checkpoint time. shape is
// as recorded for the checkpoint. Every member checks its files, and the
// erasure flags are gathered over the group.
//
// A stripe of the group's [encode.Layout] may lose as many shards as it
// has parity. When no stripe lost more, each member that lost a file
// rebuilds its units. It receives, row by row, just the surviving units
// its lost stripes need. That is one shard per surviving holder, no more
// than the code needs. The files are written under tmp names and synced.
// They are checked against the recorded hashes: hashed as they are
// written, or read back when the rebuild did not write them in order.
// Then they are renamed into place. Otherwise every member returns an
// error wrapping [ErrUnrecoverable]. It names the lost files and the
// ranks whose data is gone. Nothing is written.
func RebuildGroup(c comm.Comm, t *Topology, o Options, shape Shape, data, parity FileInfo) (L3Recovery, error) {
	gc, err := groupComm(c, t)
	if err != nil {
		return L3Recovery{}, err
	}
	defer gc.Close()
	k, g := gc.Size(), gc.Rank()
	m := ParityCount(k, shape.M)
	bs := o.block()
	var flag byte
	if !data.Valid() {
		flag |= lostData
	} else if err := data.check(c.Rank(), bs); err != nil {
		flag |= lostData
		o.log().Info("L3: data file lost", zap.Error(err))
	}
	if err := checkParity(parity, c.Rank(), bs, k, m, g, shape.Unit); err != nil {
		flag |= lostParity
		o.log().Info("L3: parity file lost", zap.Error(err))
	}
	sizes, hashes, flags, err := gatherInfo(gc, data.Size, data.Hash, flag)
	if err != nil {
		return L3Recovery{}, err
	}
	padded := encode.PaddedSize(sizes)
	unit := shape.Unit
	if unit <= 0 || m == k {
		unit = stripeUnit(k, m, padded, bs)
	}
	lay, err := encode.NewLayout(k, m, padded, unit)
	if err != nil {
		return L3Recovery{}, err
	}
	var res L3Recovery
	dmg := encode.Damage{Data: make([]bool, k), Parity: make([]bool, k)}
	var lostRanks []int
	for i, f := range flags {
		if f&lostData != 0 {
			dmg.Data[i] = true
			res.Lost = append(res.Lost, fmt.Sprintf("d%d", i))
			lostRanks = append(lostRanks, t.Member(c.Rank(), i))
		}
		if f&lostParity != 0 {
			dmg.Parity[i] = true
			res.Lost = append(res.Lost, fmt.Sprintf("p%d", i))
		}
	}
	if len(res.Lost) == 0 {
		return res, nil
	}
	if stripe, err := lay.Check(dmg); err != nil {
		return res, unrecoverable(lay, t.GroupOf(c.Rank()), res.Lost, lostRanks, stripe, err)
	}
	return res, rebuildMember(gc, c.Rank(), o, lay, dmg, data, parity, sizes, hashes, &res)
}

// unrecoverable is the error of a group with too many losses.
func unrecoverable(l encode.Layout, group int, lost []string, ranks []int, stripe int, err error) error {
	var ee *encode.ErasureError
	if !errors.As(err, &ee) {
		return err
	}
	if !l.Rotated() {
		return fmt.Errorf("%w: group %d lost %d of its %d files (%v), at most %d may be lost; data of ranks %v is gone",
			ErrUnrecoverable, group, len(lost), 2*l.K, strings.Join(lost, " "), l.M, ranks)
	}
	return fmt.Errorf("%w: group %d lost %d of its %d files (%v); stripe %d lost %d of its %d shards, at most %d may be lost (any %d of the %d members); data of ranks %v is gone",
		ErrUnrecoverable, group, len(lost), 2*l.K, strings.Join(lost, " "), stripe, len(ee.Lost), l.DataShards()+l.M, l.M, l.M, l.K, ranks)
}

// rebuildMember runs the rebuild exchange on member gc.Rank() and writes
// its lost files.
func rebuildMember(gc comm.Comm, rank int, o Options, lay encode.Layout, dmg encode.Damage, data, parity FileInfo,
	sizes []int64, hashes []encode.Hash, res *L3Recovery) error {
	code, err := lay.Code(encode.Options{})
	if err != nil {
		return err
	}
	m := &memberRebuild{gc: gc, rank: rank, o: o, lay: lay, code: code, plan: planRebuild(lay, dmg, gc.Rank()), data: data, parity: parity}
	m.dsrc, m.dout = m.open(data, dmg.Data[m.g()], "data")
	m.psrc, m.pout = m.open(parity, dmg.Parity[m.g()], "parity")
	// A rebuilt file is hashed (the data file also kept in memory, when
	// wanted) as it is written, when the rebuild writes it in order
	// (always with m = k), instead of being read back.
	if m.pout != nil {
		m.pseq = &seqWriter{File: m.pout, h: b3.New(), inOrder: true, piece: o.piece()}
		m.pout = m.pseq
	}
	if m.dout != nil {
		m.dseq = &seqWriter{File: m.dout, inOrder: true, piece: o.piece()}
		if data.Format == nil { // else checked by its format in finish
			m.dseq.h = b3.New()
		}
		if o.ImageLimit > 0 && data.Size <= o.ImageLimit {
			// Placed so that the FTI-FF data after the header starts a
			// page: the restart hands the pages over to its variables.
			m.dseq.img = vfd.AlignedBytes(data.Size, imageAlign)
			m.dseq.copied = o.imageCopied
		}
		m.dout = m.dseq
	}
	m.layOut()
	defer o.Buffers.put(m.sendBuf)
	defer o.Buffers.put(m.recvBuf)
	defer o.Buffers.put(m.scratch)
	for r := range lay.Rows() {
		n := lay.UnitLen(r)
		for a := 0; a < n; a += m.piece {
			pl := min(m.piece, n-a)
			if err := m.exchange(r, n, a, pl); err != nil {
				m.closeAll()
				removeTmps(data, parity, m.dout, m.pout)
				return errors.Join(append(m.errs, fmt.Errorf("L3 rebuild exchange at row %d: %w", r, err))...)
			}
			m.reconstruct(r, n, a, pl)
		}
	}
	for _, f := range []vfd.File{m.dsrc, m.psrc} {
		if f != nil {
			m.fail(f.Close())
		}
	}
	m.dsrc, m.psrc = nil, nil
	// Finish: the header of a rebuilt parity file, sync, compare with the
	// recorded hashes (files written in order were hashed as they were
	// written, others are read back), rename into place.
	var parityWhole *b3.Hasher
	if m.pout != nil && len(m.errs) == 0 {
		parityWhole = m.parityHeader(sizes, hashes)
	}
	// Both rebuilt files are synced at once: each one's writeback was
	// started as it was written (seqWriter), the syncs wait for the rest.
	dsync, psync := syncBoth(m.dout, m.pout)
	if m.dout != nil {
		var h *b3.Hasher
		inOrder := m.dseq.inOrder && m.dseq.next == data.Size
		f := data
		f.Image = nil
		if inOrder {
			h, f.Image = m.dseq.h, m.dseq.img // a format checks the image
		}
		res.DataRebuilt = m.finish(f, m.dout, "data", h, dsync)
		if res.DataRebuilt && inOrder {
			res.DataImage = m.dseq.img
		}
	}
	if m.pout != nil {
		res.ParityRebuilt = m.finish(parity, m.pout, "parity", parityWhole, psync)
	}
	return errors.Join(m.errs...)
}

// syncBoth syncs a and b (either may be nil), the two at once, and
// returns their errors.
func syncBoth(a, b vfd.File) (aerr, berr error) {
	if a == nil || b == nil {
		for _, f := range []struct {
			f   vfd.File
			err *error
		}{{a, &aerr}, {b, &berr}} {
			if f.f != nil {
				*f.err = f.f.Sync()
			}
		}
		return aerr, berr
	}
	done := make(chan error, 1)
	go func() { done <- b.Sync() }()
	aerr = a.Sync()
	return aerr, <-done
}

// memberRebuild is the state of one member's part of an L3 rebuild: its
// surviving files to read (dsrc, psrc), its lost files to write under tmp
// names (dout, pout), the exchange plan and buffers, and the errors so far.
type memberRebuild struct {
	gc                     comm.Comm
	rank                   int // world rank, for errors
	o                      Options
	lay                    encode.Layout
	code                   *encode.Code
	plan                   rebuildPlan
	data, parity           FileInfo
	dsrc, psrc, dout, pout vfd.File
	dseq, pseq             *seqWriter // dout and pout, hashing in-order writes
	errs                   []error

	// A row is processed in pieces of piece bytes per unit. Received
	// shards of my stripes land in recvBuf, shift after shift; base[s] is
	// where shift s's units start (in units) and where maps {stripe,
	// position} to a unit index in recvBuf.
	piece                     int
	base                      []int
	where                     map[[2]int]int
	sendBuf, recvBuf, scratch []byte
	shards                    [][]byte
	mask, want                []bool
}

func (m *memberRebuild) g() int { return m.gc.Rank() }

func (m *memberRebuild) fail(err error) {
	if err != nil {
		m.errs = append(m.errs, err)
	}
}

// open opens a surviving file f to read, or creates the tmp file a lost
// one is rebuilt into.
func (m *memberRebuild) open(f FileInfo, lost bool, what string) (src, dst vfd.File) {
	var err error
	switch {
	case !lost:
		src, err = f.open()
	case !f.Valid():
		err = fmt.Errorf("%w: rank %d: no %s file to rebuild into", ErrBadArgument, m.rank, what)
	default:
		if err = vfd.MkdirDurable(f.Driver, path.Dir(f.Path)); err == nil {
			dst, err = vfd.CreateTrunc(f.Driver, f.Path+TmpSuffix)
		}
	}
	m.fail(err)
	return src, dst
}

func (m *memberRebuild) closeAll() {
	for _, f := range []vfd.File{m.dsrc, m.psrc, m.dout, m.pout} {
		if f != nil {
			f.Close()
		}
	}
}

// layOut sizes the pieces so that a member holds about k units of
// others' shards at once, however many stripes it rebuilds, and takes
// the buffers (the caller puts them back).
func (m *memberRebuild) layOut() {
	k, d, lay, plan := m.lay.K, m.lay.DataShards(), m.lay, m.plan
	pieces := max(1, (plan.most*d+max(k, 4)-1)/max(k, 4))
	m.piece = (lay.Unit + pieces - 1) / pieces
	m.base = make([]int, k+1)
	for s := range k {
		m.base[s+1] = m.base[s] + len(plan.recv[s])
	}
	m.where = map[[2]int]int{}
	for s := range k {
		for i, tp := range plan.recv[s] {
			m.where[tp] = m.base[s] + i
		}
	}
	most := 0
	for s := range k {
		most = max(most, len(plan.send[s]))
	}
	m.sendBuf = m.o.Buffers.get(max(most, 1) * m.piece)
	m.recvBuf = m.o.Buffers.get(max(m.base[k], 1) * m.piece)
	m.scratch = m.o.Buffers.get(lay.M * m.piece)
	m.shards = make([][]byte, d+lay.M)
	m.mask = make([]bool, d+lay.M)
	m.want = make([]bool, d+lay.M)
}

// unitAt is the file to read, the file to write, the offset of piece a of
// a unit of row r held as h, and the file's size.
func (m *memberRebuild) unitAt(r int64, n, a int, h encode.Shard) (vfd.File, vfd.File, int64, int64) {
	if h.Parity {
		return m.psrc, m.pout, m.lay.ParityOffset(r) + int64(h.Unit*n+a), m.lay.ParitySize()
	}
	return m.dsrc, m.dout, m.lay.DataOffset(r) + int64(h.Unit*n+a), m.data.Size
}

// exchange moves piece a (pl bytes per unit) of row r's units, shift by
// shift: my shards that others' stripes need go to g+s, the shards my
// stripes need come from g-s. An unreadable unit is sent as zeros and
// recorded (the rebuilt file then fails its hash). Shards sent to two
// members one after the other (with m = k, every member that lost files
// gets the same chosen shards) are read once. A failed exchange is
// returned: the members can no longer agree on what follows.
func (m *memberRebuild) exchange(r int64, n, a, pl int) error {
	k, g, plan := m.lay.K, m.g(), m.plan
	var held [][2]int // the shards sendBuf holds for this piece
	for s := range k {
		if !plan.used[s] {
			continue
		}
		send := m.sendBuf[:len(plan.send[s])*pl]
		into := m.recvBuf[m.base[s]*pl : m.base[s+1]*pl]
		read := plan.send[s]
		switch {
		case s == 0:
			send = into // my own shards for my own stripes
		case held != nil && slices.Equal(held, read):
			// The same shards as at a shift before (the members that
			// lost files of the same stripes get the same chosen
			// shards): sent again without reading them again.
			read = nil
		case len(read) > 0:
			held = read
		}
		for i, tp := range read {
			src, _, off, size := m.unitAt(r, n, a, m.lay.Holder(tp[0], tp[1]))
			b := send[i*pl : (i+1)*pl]
			if src == nil {
				clear(b)
			} else if err := encode.ReadBlock(src, size, b, off); err != nil {
				m.fail(vfd.WrapPath(err, "read", src.Name()))
				clear(b)
			}
		}
		if s == 0 {
			continue
		}
		to, from := (g+s)%k, (g-s+k)%k
		nr, err := m.gc.Sendrecv(send, to, tagRebuild, into, from, tagRebuild)
		if err == nil && nr != len(into) {
			err = fmt.Errorf("%w: L3 rebuild: %d bytes from group rank %d, want %d", ErrBadArgument, nr, from, len(into))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// reconstruct decodes, for every stripe where I lost a shard, piece a of
// row r of my lost units from the received shards (those only: not the
// units other members lost) and writes them.
func (m *memberRebuild) reconstruct(r int64, n, a, pl int) {
	shards, mask, want := m.shards, m.mask, m.want
	for _, t := range m.plan.need {
		free := m.scratch
		for p := range shards {
			h := m.lay.Holder(t, p)
			_, dst, off, size := m.unitAt(r, n, a, h)
			// only the units of my lost files are decoded (written below)
			want[p] = h.Member == m.g() && dst != nil && off < size
			if i, ok := m.where[[2]int{t, p}]; ok {
				shards[p], mask[p], want[p] = m.recvBuf[i*pl:(i+1)*pl], false, false
			} else if b := m.inImage(r, n, a, pl, h); b != nil {
				shards[p], mask[p] = b, true
			} else {
				shards[p], mask[p], free = free[:pl], true, free[pl:]
			}
		}
		if err := m.code.ReconstructSome(shards, mask, want); err != nil {
			m.fail(err)
			continue
		}
		for p := range shards {
			h := m.lay.Holder(t, p)
			_, dst, off, size := m.unitAt(r, n, a, h)
			if h.Member != m.g() || dst == nil || off >= size {
				continue
			}
			if _, err := dst.WriteAt(shards[p][:min(int64(pl), size-off)], off); err != nil {
				m.fail(vfd.WrapPathAt(err, "write", dst.Name(), off))
			}
		}
	}
}

// inImage returns where piece a (pl bytes) of the unit of row r held as
// h goes in the image of the data file being rebuilt. That needs h to be
// a unit of that file, the piece to lie within the file, and the file to
// be still written in order; else it returns nil. The decoder then
// writes the piece there, and the image takes no copy of it
// ([seqWriter.WriteAt] sees the bytes already in place). That saves 64
// MiB of memmove per rebuilt rank of 64 MiB.
func (m *memberRebuild) inImage(r int64, n, a, pl int, h encode.Shard) []byte {
	w := m.dseq
	if h.Parity || h.Member != m.g() || w == nil || w.img == nil || !w.inOrder {
		return nil
	}
	off := m.lay.DataOffset(r) + int64(h.Unit*n+a)
	if off < w.next || off+int64(pl) > int64(len(w.img)) {
		return nil
	}
	return w.img[off : off+int64(pl) : off+int64(pl)]
}

// parityHeader writes the header of a rebuilt parity file after its
// payload. The payload's hash (taken as it was written in order, else
// read back once) goes into the header, and with the header appended it
// is the whole file's hash, returned.
func (m *memberRebuild) parityHeader(sizes []int64, hashes []encode.Hash) *b3.Hasher {
	lay := m.lay
	hdr := &encode.ParityHeader{K: lay.K, M: lay.M, Index: m.g(), Padded: lay.Padded, Sizes: sizes, Hashes: hashes}
	if lay.Rotated() {
		hdr.Unit = lay.Unit
	}
	var body, whole *b3.Hasher
	if m.pseq.inOrder && m.pseq.next == lay.ParitySize() {
		body, whole = m.pseq.h.Clone(), m.pseq.h // hashed as it was written
	} else {
		body, whole = b3.New(), b3.New()
		m.fail(hashBack(m.pout, lay.ParitySize(), m.o.block(), body, whole))
	}
	copy(hdr.Payload[:], body.Sum(nil))
	b, err := hdr.Marshal()
	if err == nil {
		_, err = m.pseq.File.WriteAt(b, lay.ParitySize()) // not through pseq: whole takes the header below
	}
	m.fail(err)
	whole.Write(b)
	return whole
}

// finish checks a rebuilt file against f's recorded size and hash, and
// renames it into place. synced is the outcome of its sync. h is its
// hash when the bytes were hashed already; else they are read back. A
// file with a format is checked by it, from f.Image when the rebuild kept
// the bytes. On any error so far finish removes the tmp file instead.
func (m *memberRebuild) finish(f FileInfo, out vfd.File, what string, h *b3.Hasher, synced error) bool {
	err := synced
	if err == nil && len(m.errs) == 0 && f.Format != nil {
		w := f
		w.Path = f.Path + TmpSuffix
		_, err = f.Format.Check(w, m.rank, false)
	} else if err == nil && len(m.errs) == 0 {
		if h == nil {
			h = b3.New()
			err = hashBack(out, f.Size, m.o.block(), h)
		}
		if err == nil {
			if size, serr := out.Size(); serr != nil || size != f.Size || encode.Hash(h.Sum(nil)) != f.Hash {
				err = errors.Join(serr, &CorruptionError{Path: f.Path, Rank: m.rank, Offset: size,
					Err: fmt.Errorf("%w: rebuilt %s does not match the recorded size and hash", ErrHashMismatch, what)})
			}
		}
	}
	err = errors.Join(err, out.Close())
	if err == nil && len(m.errs) == 0 {
		if err = vfd.RenameDurable(f.Driver, f.Path+TmpSuffix, f.Path); err == nil {
			return true
		}
	}
	m.fail(err)
	_ = f.Driver.Remove(f.Path + TmpSuffix)
	return false
}

// removeTmps removes the tmp files of a failed rebuild (closed by the caller).
func removeTmps(data, parity FileInfo, dout, pout vfd.File) {
	if dout != nil {
		_ = data.Driver.Remove(data.Path + TmpSuffix)
	}
	if pout != nil {
		_ = parity.Driver.Remove(parity.Path + TmpSuffix)
	}
}

// seqWriter hashes what is written through it while the writes continue
// one another from offset 0. It copies it into img when img is not nil.
// Every piece bytes written in order (Options' drop piece, 16 MiB) it
// starts their writeback. That is a hint, as the checkpoint writers and
// the L2 sinks give. So the device writes the rebuilt file while the
// rebuild goes on, and the sync at the end waits for the last piece only.
type seqWriter struct {
	vfd.File
	h       *b3.Hasher
	img     []byte
	copied  *atomic.Int64 // counts the bytes copied into img (tests; may be nil)
	next    int64
	inOrder bool
	wb      int64 // writeback started up to here
	piece   int64
}

func (w *seqWriter) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.File.WriteAt(p, off)
	if off != w.next || err != nil || (w.img != nil && off+int64(n) > int64(len(w.img))) {
		w.inOrder, w.img = false, nil
	}
	if w.inOrder {
		if w.h != nil {
			w.h.Write(p[:n])
		}
		if w.img != nil && (n == 0 || &w.img[off] != &p[0]) { // else decoded in place (inImage)
			copy(w.img[off:], p[:n])
			if w.copied != nil {
				w.copied.Add(int64(n))
			}
		}
		w.next += int64(n)
		if w.piece > 0 && w.next-w.wb >= w.piece {
			// Only a hint: a failure shows again at the sync.
			_ = vfd.StartWriteback(w.File, w.wb, w.next-w.wb)
			w.wb = w.next
		}
	}
	return n, err
}

// hashBack feeds the first size bytes of f to every hasher, read in
// blocks of bs bytes.
func hashBack(f vfd.File, size int64, bs int, hs ...*b3.Hasher) error {
	buf := make([]byte, min(int64(max(bs, 1)), max(size, 1)))
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		if err := vfd.ReadFull(f, buf[:n], off); err != nil {
			return vfd.WrapPathAt(err, "read back", f.Name(), off)
		}
		for _, h := range hs {
			h.Write(buf[:n])
		}
		off += int64(n)
	}
	return nil
}
