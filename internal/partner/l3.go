package partner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/encode"
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

// parityPiece is the piece in which the parity sink starts the
// writeback of what it wrote. It is a quarter of the drop piece (4 MiB),
// not the 16 MiB of the other sinks. The parity is written last, after
// the data file and in step with the encoding. So the final sync waits
// for whatever writeback is not done yet. With 16 MiB pieces that is up
// to the last two pieces of every member's file. For four members of 64
// MiB it is 128 MiB, about 30 ms of an L3 checkpoint of 0.4 s on the
// bench machine. With 4 MiB pieces it is about 8 ms. The sink drops a
// piece once parityWindow pieces follow it. That is as far behind the
// write as the other sinks (32 MiB). So the wait for a piece's writeback
// before its drop has as much room as theirs.
func (o Options) parityPiece() int64 { return max(o.piece()/4, 1) }

const parityWindow = 4 * dropWindow

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
	seg    int // the sender's segment
	pos    int
	chunks [][2]int // {chunk, parity shard}
}

// encodePlan lists, for member g of layout l, what it sends and receives
// at each shift. It lists the shifts nobody uses, which every member
// skips. What a member sends at a shift is a run of consecutive segments.
// In the full scheme it is its one segment. In the rotated scheme the
// segments whose stripes the receiver holds parity of are consecutive.
// So it goes out of the row buffer without copying.
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
			ru := recvUnit{seg: seg, pos: pos}
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
// Each rank passes its data file with the size and hash recorded for it.
// With data.HashUnknown the hash is computed while encoding. It is
// returned in Parity.Data and put in the header. A data file with a
// Format is not hashed: its format's digest goes into the header. Every
// member of the group writes its parity to parityTo, the name the caller
// chose: payload, then the header trailer, synced. Where parity goes is
// the group's [encode.Layout]. With m = k (FTI's default, see
// [ParityCount]) member j holds parity shard j of the whole files. With
// m < k the parity is rotated over stripes. The stripe unit is then the
// block size, at most a data segment's length. Files of different sizes
// are padded with zeros in memory only. A unit wholly in that padding
// is neither sent nor multiplied in: the exchange and the parity
// arithmetic follow the members' data sizes.
//
// The encoding is pipelined by rows of units. For each row, every member
// reads its data units, hashing the file as it goes. A pairwise exchange
// of k shifts follows: at shift s, member g sends to g+s and receives
// from g-s. Every data unit so reaches the members holding parity of its
// stripe. They multiply it into their parity units ([encode.Row]). All
// the units of a parity unit go in one pass, once the row's exchange is
// done ([encode.Row.Combine]). A member holds its own row and its parity
// row. It also holds the units it receives for one row (k-1 units in the
// full scheme). A member that fails keeps exchanging (zeros) and returns
// its error at the end.
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
	log.Debug("L3 encode", zap.Int("group-rank", g), zap.Int("k", k), zap.Int("m", m),
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
	// read-ahead hashing the data (unless its format checks it:
	// [FileInfo.Format]), write-behind hashing the parity
	src, err := openSource(data, dataRow, data.Format == nil, pool, o.hashed)
	if err != nil {
		fail(vfd.WrapPath(err, "open data", data.Path))
		src = nil
	}
	var piece int64
	if !o.KeepCache {
		piece = o.parityPiece()
	}
	out, err := createSink(parityTo, parRow, lay.ParitySize(), pool, piece)
	if err != nil {
		fail(vfd.WrapPath(err, "create parity", parityTo.Path))
		out = nil
	} else {
		out.hashed = o.hashed
		out.window = parityWindow
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
	recvUnits := 0 // every unit received in a row's shifts (shift 0 uses the row itself), kept until it is combined
	for i, s := range shifts {
		if i > 0 && used[i] {
			recvUnits += len(s.recv)
		}
	}
	own := pool.get(dataRow)
	defer pool.put(own)
	var acc []byte // parity row when there is no write-behind block to fill
	if out == nil {
		acc = make([]byte, parRow)
	}
	transit := pool.get(recvUnits * unit)
	defer pool.put(transit)
	rs := rowEncoder{gc: gc, lay: lay, shifts: shifts, used: used, rows: rows, src: src, out: out,
		sizes: sizes, dataSize: data.Size, own: own, acc: acc, transit: transit, fail: fail,
		units: make([][][]byte, len(rows)), pos: make([][]int, len(rows))}
	for r := range lay.Rows() {
		if err := rs.encode(r); err != nil {
			return abort(err)
		}
	}
	var read encode.Hash
	if src != nil {
		h, hashed, err := src.close()
		src = nil
		fail(err)
		read = h
		if !hashed {
			// Not hashed (checked by its format): the header records
			// its recorded digest, as the members that learnt theirs
			// while encoding record what they computed.
			read = data.Hash
		}
		if err == nil && hashed && !data.HashUnknown && h != data.Hash {
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
			fail(vfd.WrapPath(err, "finish parity", parityTo.Path))
			_ = parityTo.Driver.Remove(parityTo.Path)
		}
		res.Size, res.Hash = size, whole
	}
	return res, errors.Join(errs...)
}

// rowEncoder adds, row by row, what each member's data contributes to
// this member's parity chunks: the units the plan's shifts exchange are
// sent and received with Sendrecv and multiplied into the parity rows.
type rowEncoder struct {
	gc       comm.Comm
	lay      encode.Layout
	shifts   []shift
	used     []bool
	rows     []*encode.Row // per parity chunk of this member
	src      *source       // read-ahead of the data file; nil when it failed to open
	out      *sink         // write-behind of the parity file; nil when it failed to create
	sizes    []int64       // every member's data size, by group rank
	dataSize int64
	own      []byte // my data row when the read-ahead block is short
	acc      []byte // the parity row when there is no write-behind block
	transit  []byte // received units of the row, every shift's
	fail     func(error)
	// units and pos list, per parity chunk, the data units of the row
	// that go into it and their codeword positions.
	units [][][]byte
	pos   [][]int
}

// encode computes parity row r. A failed exchange is returned: the
// members can no longer agree on what follows.
func (e *rowEncoder) encode(r int64) error {
	lay, k, g := e.lay, e.gc.Size(), e.gc.Rank()
	n := lay.UnitLen(r)
	row := e.own[:lay.Segments()*n]
	var got []byte
	if e.src != nil && lay.DataOffset(r) < e.dataSize {
		got = e.src.next()
	}
	if len(got) == len(row) {
		row = got // a whole row read: use the read-ahead block itself
	} else {
		copy(row, got)
		clear(row[len(got):])
	}
	// accumulate straight into the write-behind block
	a := e.acc
	if e.out != nil {
		a = e.out.buffer()
	}
	a = a[:lay.Chunks()*n]
	for c := range e.units {
		e.units[c], e.pos[c] = e.units[c][:0], e.pos[c][:0]
	}
	used := 0 // of transit
	for s, sh := range e.shifts {
		if !e.used[s] {
			continue
		}
		to, from := (g+s)%k, (g-s+k)%k
		// Units wholly beyond a member's data are zeros: they are neither
		// sent nor multiplied in (shards not listed count as zero). So the
		// work and the bytes sent follow the group's data sizes, not k
		// times its largest file.
		mine, theirs := e.dataSegs(g, r, n), e.dataSegs(from, r, n)
		send := unitsOf(row, sh.send[:sort.SearchInts(sh.send, mine)], n)
		recv := sh.recv[:sort.Search(len(sh.recv), func(i int) bool { return sh.recv[i].seg >= theirs })]
		rb := send
		if s > 0 {
			rb = e.transit[used : used+len(recv)*n]
			used += len(rb)
			nr, err := e.gc.Sendrecv(send, to, tagEncode, rb, from, tagEncode)
			if err == nil && nr != len(rb) {
				err = fmt.Errorf("%w: L3 encode: %d bytes from group rank %d, want %d", ErrBadArgument, nr, from, len(rb))
			}
			if err != nil {
				if e.out != nil {
					e.out.put(a[:0])
				}
				return fmt.Errorf("L3 encode exchange at row %d: %w", r, err)
			}
		}
		for i, ru := range recv {
			blk := rb[i*n : (i+1)*n]
			for _, cj := range ru.chunks {
				e.units[cj[0]] = append(e.units[cj[0]], blk)
				e.pos[cj[0]] = append(e.pos[cj[0]], ru.pos)
			}
		}
	}
	for c, row := range e.rows {
		e.fail(row.Combine(e.units[c], e.pos[c], a[c*n:(c+1)*n]))
	}
	if got != nil {
		e.src.release(got)
	}
	if e.out != nil {
		e.out.put(a)
	}
	return nil
}

// dataSegs is how many leading segments of member x's row r (units of
// n bytes) hold some of its data: the others lie wholly beyond its size.
// A shift's segments are increasing, so those it moves are a prefix.
func (e *rowEncoder) dataSegs(x int, r int64, n int) int {
	left := e.sizes[x] - e.lay.DataOffset(r)
	if left <= 0 {
		return 0
	}
	return int(min((left+int64(n)-1)/int64(n), int64(e.lay.Segments())))
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
