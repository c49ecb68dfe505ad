package partner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/zeebo/blake3"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/encode"
	"github.com/ftigo/ftigo/vfd"
)

// Parity describes the parity file a group member holds after L3 encoding.
type Parity struct {
	// Index is the member's group rank.
	Index int
	// Size and Hash are those of the whole file (payload and header).
	Size int64
	Hash encode.Hash
	// Header is the decoded header; its Unit is the stripe unit to pass to
	// [RebuildGroup] in [Shape] (0 in the full scheme).
	Header *encode.ParityHeader
	// Data is the hash of the member's data file as it was read: with
	// data.HashUnknown, the hash to record for it.
	Data encode.Hash
}

// Shape is what a group's parity was made with, as recorded at
// checkpoint time: the parity count M (see [ParityCount]) and, for the
// rotated scheme, the stripe unit. A zero Unit derives the unit from the
// options' block size as [EncodeGroup] does.
type Shape struct {
	M    int
	Unit int
}

// ParityCount returns m for a group of k members: m itself when 1 <= m <= k,
// else k (FTI's default).
func ParityCount(k, m int) int {
	if m <= 0 || m > k {
		return k
	}
	return m
}

// stripeUnit is the stripe unit EncodeGroup uses: the block size, but no
// more than a data segment needs, so small files get small parity.
func stripeUnit(k, m int, padded int64, bs int) int {
	if m >= k {
		return int(min(int64(bs), max(padded, 1)))
	}
	d := int64(k - m)
	return int(max(1, min(int64(bs), (padded+d-1)/d)))
}

// groupComm splits the world into the group communicators (ring order).
func groupComm(c comm.Comm, t *Topology) (comm.Comm, error) {
	me := c.Rank()
	gc, err := c.Split(t.GroupOf(me), t.GroupRank(me))
	if err != nil {
		return nil, fmt.Errorf("split group communicator: %w", err)
	}
	return gc, nil
}

// gatherInfo shares every member's data size and hash (and a flag byte)
// over the group.
func gatherInfo(gc comm.Comm, size int64, h encode.Hash, flag byte) ([]int64, []encode.Hash, []byte, error) {
	send := make([]byte, 41)
	binary.LittleEndian.PutUint64(send, uint64(size))
	copy(send[8:], h[:])
	send[40] = flag
	recv := make([]byte, 41*gc.Size())
	if err := gc.Allgather(send, recv); err != nil {
		return nil, nil, nil, fmt.Errorf("allgather group info: %w", err)
	}
	k := gc.Size()
	sizes, hashes, flags := make([]int64, k), make([]encode.Hash, k), make([]byte, k)
	for i := range k {
		e := recv[41*i:]
		sizes[i] = int64(binary.LittleEndian.Uint64(e))
		copy(hashes[i][:], e[8:40])
		flags[i] = e[40]
	}
	return sizes, hashes, flags, nil
}

// A shift is one step of the group's pairwise exchange: at shift s, member
// g sends to g+s and receives from g-s (mod k); shift 0 is the member's
// own units. Every unit of a row reaches its destinations in k shifts.
type shift struct {
	send []int      // units of my row (segments) sent to g+s, increasing
	recv []recvUnit // units received from g-s, in the sender's order
}

// recvUnit is one received data unit: its codeword position and the parity
// chunks of this member it is added into (with their parity shard index).
type recvUnit struct {
	pos    int
	chunks [][2]int // {chunk, parity shard}
}

// encodePlan lists, for member g of layout l, what it sends and receives
// at each shift, and which shifts nobody uses (skipped by every member).
// What a member sends at a shift is always a run of consecutive segments
// (in the full scheme its one segment; in the rotated scheme the segments
// whose stripes the receiver holds parity of are consecutive), so it goes
// out of the row buffer without copying.
func encodePlan(l encode.Layout, g int) (shifts []shift, used []bool) {
	k, d := l.K, l.DataShards()
	holders := func(member, s int) []int { // parity holders of member's segment s
		t, _ := l.Segment(member, s)
		out := make([]int, l.M)
		for j := range l.M {
			out[j] = l.Holder(t, d+j).Member
		}
		return out
	}
	shifts = make([]shift, k)
	used = make([]bool, k)
	for s := range k {
		to, from := (g+s)%k, (g-s+k)%k
		for seg := range l.Segments() {
			if slices.Contains(holders(g, seg), to) {
				shifts[s].send = append(shifts[s].send, seg)
			}
			t, pos := l.Segment(from, seg)
			ru := recvUnit{pos: pos}
			for j := range l.M {
				if h := l.Holder(t, d+j); h.Member == g {
					ru.chunks = append(ru.chunks, [2]int{h.Unit, j})
				}
			}
			if len(ru.chunks) > 0 {
				ru.chunks = slices.Clip(ru.chunks)
				shifts[s].recv = append(shifts[s].recv, ru)
			}
		}
		for x := range k { // anyone sends at this shift?
			for seg := range l.Segments() {
				if slices.Contains(holders(x, seg), (x+s)%k) {
					used[s] = true
				}
			}
		}
	}
	return shifts, used
}

// EncodeGroup is L3's distributed encoding. Collective over the world c.
// Each rank passes its data file with the size and hash recorded for it
// (or data.HashUnknown: the hash is computed while encoding, returned in
// Parity.Data and put in the header), and every member of the group
// writes its parity payload to
// parityTo (a tmp name; payload, then the header trailer, synced). Where
// parity goes is the group's [encode.Layout]: with m = k (FTI's default,
// see [ParityCount]) member j holds parity shard j of the whole files; with
// m < k the parity is rotated over stripes, and the stripe unit is the
// block size (at most a data segment's length). Files of different sizes
// are padded with zeros in memory only.
//
// The encoding is pipelined by rows of units. For each row, every member
// reads its data units (hashing the file as it goes), and in k shifts of a
// pairwise exchange (member g sends to g+s and receives from g-s) every
// data unit reaches the members holding parity of its stripe, which
// multiply it into their parity units ([encode.Row]). A member holds its
// own row, one row in transit and its parity row, whatever the group size.
// A member that fails keeps exchanging (zeros) and returns its error at
// the end.
func EncodeGroup(c comm.Comm, t *Topology, o Options, m int, data FileInfo, parityTo Ref) (Parity, error) {
	gc, err := groupComm(c, t)
	if err != nil {
		return Parity{}, err
	}
	defer gc.Close()
	k, g := gc.Size(), gc.Rank()
	m = ParityCount(k, m)
	var unknown byte
	if data.HashUnknown {
		unknown = 1
	}
	sizes, hashes, flags, err := gatherInfo(gc, data.Size, data.Hash, unknown)
	if err != nil {
		return Parity{}, err
	}
	padded := encode.PaddedSize(sizes)
	lay, err := encode.NewLayout(k, m, padded, stripeUnit(k, m, padded, o.block()))
	if err != nil {
		return Parity{}, err
	}
	code, err := lay.Code(encode.Options{})
	if err != nil {
		return Parity{}, err
	}
	rows := make([]*encode.Row, lay.Chunks())
	for ch := range rows {
		_, j := lay.Chunk(g, ch)
		if rows[ch], err = code.Row(j); err != nil {
			return Parity{}, err
		}
	}
	shifts, used := encodePlan(lay, g)
	log := o.log()
	log.Debug("L3 encode", zap.Int("rank", c.Rank()), zap.Int("group-rank", g), zap.Int("k", k), zap.Int("m", m),
		zap.Int64("padded", padded), zap.Int("unit", lay.Unit), zap.Bool("rotated", lay.Rotated()))

	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	unit := lay.Unit
	dataRow, parRow := lay.Segments()*unit, lay.Chunks()*unit
	pool := o.Buffers
	// read-ahead hashing the data, write-behind hashing the parity
	src, err := openSource(data, dataRow, true, pool)
	if err != nil {
		fail(fmt.Errorf("open data %s: %w", data.Path, err))
		src = nil
	}
	var piece int64
	if !o.KeepCache {
		piece = o.piece()
	}
	out, err := createSink(parityTo, parRow, lay.ParitySize(), pool, piece)
	if err != nil {
		fail(fmt.Errorf("create parity %s: %w", parityTo.Path, err))
		out = nil
	}
	abort := func(err error) (Parity, error) {
		if src != nil {
			src.close()
		}
		if out != nil {
			out.abandon(parityTo.Driver)
		}
		return Parity{}, errors.Join(append(errs, err)...)
	}
	maxUnits := 1
	for _, s := range shifts {
		maxUnits = max(maxUnits, len(s.send), len(s.recv))
	}
	own := pool.get(dataRow)
	defer pool.put(own)
	var acc []byte // parity row when there is no write-behind block to fill
	if out == nil {
		acc = make([]byte, parRow)
	}
	transit := pool.get(maxUnits * unit)
	defer pool.put(transit)
	for r := range lay.Rows() {
		n := lay.UnitLen(r)
		row := own[:lay.Segments()*n]
		var got []byte
		if src != nil && lay.DataOffset(r) < data.Size {
			got = src.next()
		}
		if len(got) == len(row) {
			row = got // a whole row read: use the read-ahead block itself
		} else {
			copy(row, got)
			clear(row[len(got):])
		}
		// accumulate straight into the write-behind block
		a := acc
		if out != nil {
			a = out.buffer()
		}
		a = a[:lay.Chunks()*n]
		clear(a)
		for s, sh := range shifts {
			if !used[s] {
				continue
			}
			send := unitsOf(row, sh.send, n)
			rb := send
			if s > 0 {
				to, from := (g+s)%k, (g-s+k)%k
				rb = transit[:len(sh.recv)*n]
				nr, err := gc.Sendrecv(send, to, tagEncode, rb, from, tagEncode)
				if err == nil && nr != len(rb) {
					err = fmt.Errorf("%w: L3 encode: %d bytes from group rank %d, want %d", ErrBadArgument, nr, from, len(rb))
				}
				if err != nil {
					if out != nil {
						out.put(a[:0])
					}
					return abort(fmt.Errorf("L3 encode exchange at row %d: %w", r, err))
				}
			}
			for i, ru := range sh.recv {
				blk := rb[i*n : (i+1)*n]
				for _, cj := range ru.chunks {
					fail(rows[cj[0]].Add(blk, ru.pos, a[cj[0]*n:(cj[0]+1)*n]))
				}
			}
		}
		if got != nil {
			src.release(got)
		}
		if out != nil {
			out.put(a)
		}
	}
	var read encode.Hash
	if src != nil {
		h, _, err := src.close()
		src = nil
		fail(err)
		read = h
		if err == nil && !data.HashUnknown && h != data.Hash {
			fail(&CorruptionError{Path: data.Path, Rank: c.Rank(), Err: fmt.Errorf("%w: data changed before encoding", ErrHashMismatch)})
		}
	}
	if slices.Contains(flags, 1) {
		// hashes learnt while encoding, for the header
		_, hashes, _, err = gatherInfo(gc, data.Size, read, 0)
		if err != nil {
			return abort(err)
		}
	}
	hdr := &encode.ParityHeader{K: k, M: m, Index: g, Padded: padded, Sizes: sizes, Hashes: hashes}
	if lay.Rotated() {
		hdr.Unit = unit
	}
	res := Parity{Index: g, Header: hdr, Data: read}
	if out != nil {
		_, whole, size, err := out.finishWith(func(body encode.Hash) ([]byte, error) {
			hdr.Payload = body
			return hdr.Marshal()
		})
		if err != nil {
			fail(fmt.Errorf("finish parity %s: %w", parityTo.Path, err))
			_ = parityTo.Driver.Remove(parityTo.Path)
		}
		res.Size, res.Hash = size, whole
	}
	return res, errors.Join(errs...)
}

// unitsOf returns units idx (each n bytes) of row as one slice; idx is a
// run of consecutive segments (see encodePlan).
func unitsOf(row []byte, idx []int, n int) []byte {
	if len(idx) == 0 {
		return nil
	}
	return row[idx[0]*n : (idx[len(idx)-1]+1)*n]
}

// tagEncode and tagRebuild are the L3 message tags (group communicator).
const (
	tagEncode  = 0x6640
	tagRebuild = 0x6641
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
	if err := parity.Check(rank, bs); err != nil {
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

// RebuildGroup is L3's recovery. Collective over the world c. data is this
// rank's data file and parity its parity file, each with the size and hash
// of the whole file recorded at checkpoint time; shape as recorded for the
// checkpoint. Every member checks its files and the erasure flags are
// gathered over the group. When every stripe of the group's
// [encode.Layout] has lost no more shards than it has parity, each member
// that lost a file receives, row by row, just the surviving units its lost
// stripes need (one shard per surviving holder, no more than the code
// needs) and rebuilds its units; the files are written under tmp names,
// synced, checked against the recorded hashes (hashed as they are written,
// or read back when the rebuild did not write them in order), and renamed
// into place. Otherwise every member returns an error wrapping
// [ErrUnrecoverable] naming the lost files and the ranks whose data is
// gone, and nothing is written.
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
		o.log().Info("L3: data file lost", zap.Int("rank", c.Rank()), zap.Error(err))
	}
	if err := checkParity(parity, c.Rank(), bs, k, m, g, shape.Unit); err != nil {
		flag |= lostParity
		o.log().Info("L3: parity file lost", zap.Int("rank", c.Rank()), zap.Error(err))
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
	k, g, d := lay.K, gc.Rank(), lay.DataShards()
	code, err := lay.Code(encode.Options{})
	if err != nil {
		return err
	}
	plan := planRebuild(lay, dmg, g)
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// my surviving files to read, my lost files to write
	open := func(f FileInfo, lost bool, what string) (src, dst vfd.File) {
		var err error
		switch {
		case !lost:
			src, err = f.open()
		case !f.Valid():
			err = fmt.Errorf("%w: rank %d: no %s file to rebuild into", ErrBadArgument, rank, what)
		default:
			if err = mkdirDurable(f.Driver, path.Dir(f.Path)); err == nil {
				dst, err = vfd.CreateTrunc(f.Driver, f.Path+TmpSuffix)
			}
		}
		fail(err)
		return src, dst
	}
	dsrc, dout := open(data, dmg.Data[g], "data")
	psrc, pout := open(parity, dmg.Parity[g], "parity")
	// A rebuilt data file is hashed (and kept in memory, when wanted) as
	// it is written, when the rebuild writes it in order (always with
	// m = k), instead of being read back.
	var dseq, pseq *seqWriter
	if pout != nil {
		pseq = &seqWriter{File: pout, h: blake3.New(), inOrder: true}
		pout = pseq
	}
	if dout != nil {
		dseq = &seqWriter{File: dout, h: blake3.New(), inOrder: true}
		if o.ImageLimit > 0 && data.Size <= o.ImageLimit {
			dseq.img = make([]byte, data.Size)
		}
		dout = dseq
	}
	closeAll := func() {
		for _, f := range []vfd.File{dsrc, psrc, dout, pout} {
			if f != nil {
				f.Close()
			}
		}
	}
	// A row is processed in pieces small enough that a member holds about
	// k units of others' shards at once, however many stripes it rebuilds.
	unit := lay.Unit
	pieces := max(1, (plan.most*d+max(k, 4)-1)/max(k, 4))
	piece := (unit + pieces - 1) / pieces
	// Received shards of my stripes land in recv, shift after shift; base[s]
	// is where shift s's units start (in units).
	base := make([]int, k+1)
	for s := range k {
		base[s+1] = base[s] + len(plan.recv[s])
	}
	where := map[[2]int]int{} // {stripe, position} -> unit index in recv
	for s := range k {
		for i, tp := range plan.recv[s] {
			where[tp] = base[s] + i
		}
	}
	most := 0
	for s := range k {
		most = max(most, len(plan.send[s]))
	}
	sendBuf := o.Buffers.get(max(most, 1) * piece)
	defer o.Buffers.put(sendBuf)
	recvBuf := o.Buffers.get(max(base[k], 1) * piece)
	defer o.Buffers.put(recvBuf)
	scratch := o.Buffers.get(lay.M * piece)
	defer o.Buffers.put(scratch)
	paritySize := lay.ParitySize()
	// unitAt is the file, its size and the offset of piece a of a unit of row r.
	unitAt := func(r int64, n, a int, h encode.Shard) (vfd.File, vfd.File, int64, int64) {
		if h.Parity {
			return psrc, pout, lay.ParityOffset(r) + int64(h.Unit*n+a), paritySize
		}
		return dsrc, dout, lay.DataOffset(r) + int64(h.Unit*n+a), data.Size
	}
	shards := make([][]byte, d+lay.M)
	mask := make([]bool, d+lay.M)
	for r := range lay.Rows() {
		n := lay.UnitLen(r)
		for a := 0; a < n; a += piece {
			pl := min(piece, n-a)
			for s := range k {
				if !plan.used[s] {
					continue
				}
				send := sendBuf[:len(plan.send[s])*pl]
				into := recvBuf[base[s]*pl : base[s+1]*pl]
				if s == 0 {
					send = into // my own shards for my own stripes
				}
				for i, tp := range plan.send[s] {
					src, _, off, size := unitAt(r, n, a, lay.Holder(tp[0], tp[1]))
					b := send[i*pl : (i+1)*pl]
					if src == nil {
						clear(b)
					} else if err := encode.ReadBlock(src, size, b, off); err != nil {
						fail(fmt.Errorf("read %s: %w", src.Name(), err))
						clear(b)
					}
				}
				if s == 0 {
					continue
				}
				to, from := (g+s)%k, (g-s+k)%k
				nr, err := gc.Sendrecv(send, to, tagRebuild, into, from, tagRebuild)
				if err == nil && nr != len(into) {
					err = fmt.Errorf("%w: L3 rebuild: %d bytes from group rank %d, want %d", ErrBadArgument, nr, from, len(into))
				}
				if err != nil {
					closeAll()
					removeTmps(data, parity, dout, pout)
					return errors.Join(append(errs, fmt.Errorf("L3 rebuild exchange at row %d: %w", r, err))...)
				}
			}
			for _, t := range plan.need {
				free := scratch
				for p := range shards {
					if i, ok := where[[2]int{t, p}]; ok {
						shards[p], mask[p] = recvBuf[i*pl:(i+1)*pl], false
					} else {
						shards[p], mask[p], free = free[:pl], true, free[pl:]
					}
				}
				if err := code.Reconstruct(shards, mask); err != nil {
					fail(err)
					continue
				}
				for p := range shards {
					h := lay.Holder(t, p)
					_, dst, off, size := unitAt(r, n, a, h)
					if h.Member != g || dst == nil || off >= size {
						continue
					}
					if _, err := dst.WriteAt(shards[p][:min(int64(pl), size-off)], off); err != nil {
						fail(fmt.Errorf("write %s at %d: %w", dst.Name(), off, err))
					}
				}
			}
		}
	}
	for _, f := range []vfd.File{dsrc, psrc} {
		if f != nil {
			fail(f.Close())
		}
	}
	dsrc, psrc = nil, nil
	// Finish: the header of a rebuilt parity file, sync, compare with the
	// recorded hashes, rename into place. Files written in order were
	// hashed as they were written; others are read back (a parity payload
	// once: its hash goes into the header, and with the header appended
	// it is the whole file's hash).
	var parityWhole *blake3.Hasher
	if pout != nil && len(errs) == 0 {
		hdr := &encode.ParityHeader{K: k, M: lay.M, Index: g, Padded: lay.Padded, Sizes: sizes, Hashes: hashes}
		if lay.Rotated() {
			hdr.Unit = unit
		}
		var body, whole *blake3.Hasher
		if pseq.inOrder && pseq.next == paritySize {
			body, whole = pseq.h.Clone(), pseq.h // hashed as it was written
		} else {
			body, whole = blake3.New(), blake3.New()
			fail(hashBack(pout, paritySize, o.block(), body, whole))
		}
		copy(hdr.Payload[:], body.Sum(nil))
		b, err := hdr.Marshal()
		if err == nil {
			_, err = pseq.File.WriteAt(b, paritySize) // not through pseq: whole takes the header below
		}
		fail(err)
		whole.Write(b)
		parityWhole = whole
	}
	// finish checks out against f's recorded size and hash: h when the
	// bytes were hashed already, else read back.
	finish := func(f FileInfo, out vfd.File, what string, h *blake3.Hasher) bool {
		err := out.Sync()
		if err == nil && len(errs) == 0 {
			if h == nil {
				h = blake3.New()
				err = hashBack(out, f.Size, o.block(), h)
			}
			if err == nil {
				if size, serr := out.Size(); serr != nil || size != f.Size || encode.Hash(h.Sum(nil)) != f.Hash {
					err = errors.Join(serr, &CorruptionError{Path: f.Path, Rank: rank, Offset: size,
						Err: fmt.Errorf("%w: rebuilt %s does not match the recorded size and hash", ErrHashMismatch, what)})
				}
			}
		}
		err = errors.Join(err, out.Close())
		if err == nil && len(errs) == 0 {
			if err = publish(f.Driver, f.Path+TmpSuffix, f.Path); err == nil {
				return true
			}
		}
		fail(err)
		_ = f.Driver.Remove(f.Path + TmpSuffix)
		return false
	}
	if dout != nil {
		var h *blake3.Hasher
		if dseq.inOrder && dseq.next == data.Size {
			h = dseq.h
		}
		res.DataRebuilt = finish(data, dout, "data", h)
		if res.DataRebuilt && h != nil {
			res.DataImage = dseq.img
		}
	}
	if pout != nil {
		res.ParityRebuilt = finish(parity, pout, "parity", parityWhole)
	}
	return errors.Join(errs...)
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
// one another from offset 0, copying it into img when img is not nil.
type seqWriter struct {
	vfd.File
	h       *blake3.Hasher
	img     []byte
	next    int64
	inOrder bool
}

func (w *seqWriter) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.File.WriteAt(p, off)
	if off != w.next || err != nil || (w.img != nil && off+int64(n) > int64(len(w.img))) {
		w.inOrder, w.img = false, nil
	}
	if w.inOrder {
		w.h.Write(p[:n])
		if w.img != nil {
			copy(w.img[off:], p[:n])
		}
		w.next += int64(n)
	}
	return n, err
}

// hashBack feeds the first size bytes of f to every hasher, read in
// blocks of bs bytes.
func hashBack(f vfd.File, size int64, bs int, hs ...*blake3.Hasher) error {
	buf := make([]byte, min(int64(max(bs, 1)), max(size, 1)))
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		if err := vfd.ReadFull(f, buf[:n], off); err != nil {
			return fmt.Errorf("read back %s at %d: %w", f.Name(), off, err)
		}
		for _, h := range hs {
			h.Write(buf[:n])
		}
		off += int64(n)
	}
	return nil
}
