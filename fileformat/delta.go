package fileformat

import (
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/vfd"
)

// Delta file constants (docs/format/dcp.md). Wire format: never change.
const (
	// DeltaVersion is the version of the delta files this package writes and reads.
	DeltaVersion = 1
	// DeltaHeaderSize is the size of a delta file's fixed header.
	DeltaHeaderSize = 64
	// DeltaTrailerSize is the size of a delta file's trailer (its last bytes).
	DeltaTrailerSize = 128
	// RunSize is the size of one run record.
	RunSize = 16
	// FormatDelta names the delta format (what levels records for a
	// differential checkpoint's data file).
	FormatDelta = "ftiff-delta"

	dtHashOff = 96
)

var (
	// deltaMagic opens every delta file.
	deltaMagic = [8]byte{0x89, 'F', 'T', 'I', '-', 'D', 'L', '\n'}
	// dtMagic opens the trailer at EOF-DeltaTrailerSize.
	dtMagic = [8]byte{'F', 'T', 'I', 'F', 'F', '-', 'D', 'T'}
)

// deltaHeader is the 64-byte header of a delta file.
//
//	0  [8]  magic
//	8  u16  version
//	10 u16  header size (64)
//	12 u16  trailer size (128)
//	14 u16  reserved
//	16 i64  checkpoint id
//	24 i32  rank
//	28 u8   level
//	29 [3]  reserved
//	32 [32] parent image checksum
type deltaHeader struct {
	version     uint16
	headerSize  uint16
	trailerSize uint16
	ckptID      int64
	rank        int32
	level       uint8
	parent      [HashSize]byte
}

func (h *deltaHeader) encode() [DeltaHeaderSize]byte {
	var b [DeltaHeaderSize]byte
	copy(b[0:8], deltaMagic[:])
	le.PutUint16(b[8:], h.version)
	le.PutUint16(b[10:], h.headerSize)
	le.PutUint16(b[12:], h.trailerSize)
	le.PutUint64(b[16:], uint64(h.ckptID))
	le.PutUint32(b[24:], uint32(h.rank))
	b[28] = h.level
	copy(b[32:64], h.parent[:])
	return b
}

func decodeDeltaHeader(b []byte) (deltaHeader, bool) {
	h := deltaHeader{
		version:     le.Uint16(b[8:]),
		headerSize:  le.Uint16(b[10:]),
		trailerSize: le.Uint16(b[12:]),
		ckptID:      int64(le.Uint64(b[16:])),
		rank:        int32(le.Uint32(b[24:])),
		level:       b[28],
	}
	copy(h.parent[:], b[32:64])
	return h, le.Uint16(b[14:]) == 0 && allZero(b[29:32])
}

// deltaTrailer is the 128-byte trailer of a delta file.
//
//	0  [8]  magic
//	8  u16  version
//	10 u16  trailer size (128)
//	12 u32  flags (0)
//	16 u64  number of runs
//	24 i64  dmOff: offset of the delta metadata
//	32 i64  size of the image's metadata block
//	40 i64  file size
//	48 [16] reserved
//	64 [32] dmHash: BLAKE3 of the delta metadata
//	96 [32] hash: BLAKE3 of header[0:64] || trailer[0:96]
type deltaTrailer struct {
	version     uint16
	trailerSize uint16
	flags       uint32
	nruns       uint64
	dmOff       int64
	imgMetaSize int64
	fs          int64
	dmHash      [HashSize]byte
	hash        [HashSize]byte
}

func (t *deltaTrailer) encode() [DeltaTrailerSize]byte {
	var b [DeltaTrailerSize]byte
	copy(b[0:8], dtMagic[:])
	le.PutUint16(b[8:], t.version)
	le.PutUint16(b[10:], t.trailerSize)
	le.PutUint32(b[12:], t.flags)
	le.PutUint64(b[16:], t.nruns)
	le.PutUint64(b[24:], uint64(t.dmOff))
	le.PutUint64(b[32:], uint64(t.imgMetaSize))
	le.PutUint64(b[40:], uint64(t.fs))
	copy(b[64:96], t.dmHash[:])
	copy(b[96:128], t.hash[:])
	return b
}

func decodeDeltaTrailer(b []byte) (deltaTrailer, bool) {
	t := deltaTrailer{
		version:     le.Uint16(b[8:]),
		trailerSize: le.Uint16(b[10:]),
		flags:       le.Uint32(b[12:]),
		nruns:       le.Uint64(b[16:]),
		dmOff:       int64(le.Uint64(b[24:])),
		imgMetaSize: int64(le.Uint64(b[32:])),
		fs:          int64(le.Uint64(b[40:])),
	}
	copy(t.dmHash[:], b[64:96])
	copy(t.hash[:], b[96:128])
	return t, allZero(b[48:64])
}

// deltaHash is the trailer's own hash: BLAKE3 over the header and the
// trailer up to the hash field.
func deltaHash(hdr, tr []byte) [HashSize]byte {
	h := b3.New()
	_, _ = h.Write(hdr[:DeltaHeaderSize])
	_, _ = h.Write(tr[:dtHashOff])
	var out [HashSize]byte
	h.Sum(out[:0])
	return out
}

// Run is a run of consecutive dCP blocks of one image chunk stored in a
// delta file.
type Run struct {
	// Chunk is the chunk's index in the image (file order).
	Chunk int
	// First is the first block of the run; Count the number of blocks.
	First, Count int
}

func (r Run) encode(b []byte) {
	le.PutUint32(b[0:], uint32(r.Chunk))
	le.PutUint32(b[4:], uint32(r.First))
	le.PutUint32(b[8:], uint32(r.Count))
	le.PutUint32(b[12:], 0)
}

// Parent is the image a differential checkpoint is written against: the
// layout and summary of the parent's FTI-FF image, as [Write] or
// [WriteDelta] returned them, or a [Reader] of the image gives them
// ([Reader.Layout], [Reader.Summary]).
type Parent struct {
	Layout  *Layout
	Summary Summary
}

// DeltaStats describes a written delta file.
type DeltaStats struct {
	// Written is the number of variable bytes stored (the dirty blocks).
	Written int64
	// Stored is the number of bytes those blocks take in the delta file
	// (compressed blocks at their compressed size; Written otherwise).
	Stored int64
	// Blocks and Runs count the dirty blocks and the runs they form.
	Blocks, Runs int
	// FileSize is the delta file's size.
	FileSize int64
	// Digest is the BLAKE3-256 of every byte of the delta file, computed
	// while writing.
	Digest [HashSize]byte
}

// deltaSegment is the hashing granularity of WriteDelta: dirty blocks of
// a segment are written while the next segments are hashed.
const deltaSegment = 8 << 20

// WriteDelta writes a delta file (docs/format/dcp.md) holding the state
// vars against the parent image: every dCP block of the image Write would
// produce for vars after parent.Layout is hashed, and only the blocks the
// parent does not hold with the same hash (same variable, same offset,
// same length) are written, with the image's header, metadata block and
// file block. It returns the image's layout and summary (to pass as the
// next parent, or to [Write]) and what it wrote. Blocks are written while
// later ones are still being hashed.
//
// The block size ([WithBlockSize]) must be the parent's. f is truncated
// first and written strictly sequentially, the trailer last, so a cut
// write fails [OpenDelta]; WriteDelta does not Sync or Close f unless
// [WithSync] is given. The variables' memory must not change while it
// runs.
func WriteDelta(f vfd.File, meta Meta, vars []Var, parent Parent, opts ...Option) (*Layout, Summary, DeltaStats, error) {
	w, err := newDeltaWriter(meta, vars, parent, opts)
	if err != nil {
		return nil, Summary{}, DeltaStats{}, err
	}
	st, err := w.write(f, true)
	if err != nil {
		return nil, Summary{}, DeltaStats{}, vfd.WrapPath(err, "write delta", f.Name())
	}
	lay, sum := w.image()
	return lay, sum, st, nil
}

// DeltaPlan is a delta hashed and sized but not yet written: what a level
// needs to reserve the delta's exact size before writing it (the chunk of
// an L4 container task). Nothing may change the variables' memory between
// [PlanDelta] and [DeltaPlan.Write].
type DeltaPlan struct {
	w *deltaWriter
}

// PlanDelta hashes every block of vars against parent as [WriteDelta]
// does and returns the plan, without writing anything.
func PlanDelta(meta Meta, vars []Var, parent Parent, opts ...Option) (*DeltaPlan, error) {
	w, err := newDeltaWriter(meta, vars, parent, opts)
	if err != nil {
		return nil, err
	}
	if err := w.hashAll(); err != nil {
		return nil, err
	}
	return &DeltaPlan{w: w}, nil
}

// Size returns the size of the delta file the plan writes.
func (p *DeltaPlan) Size() int64 {
	w := p.w
	return DeltaHeaderSize + w.st.Stored + HeaderSize + w.im.metaSize + FBSize + RunSize*int64(len(w.runs)) + DeltaTrailerSize
}

// Stats returns what the plan writes (Digest is known after Write).
func (p *DeltaPlan) Stats() DeltaStats {
	st := p.w.st
	st.Runs, st.FileSize = len(p.w.runs), p.Size()
	return st
}

// Image returns the layout and summary of the image the delta describes.
func (p *DeltaPlan) Image() (*Layout, Summary) { return p.w.image() }

// Write writes the planned delta to f (truncated first), strictly
// sequentially, the trailer last. It may be called once.
func (p *DeltaPlan) Write(f vfd.File) (DeltaStats, error) {
	st, err := p.w.write(f, false)
	if err != nil {
		return DeltaStats{}, vfd.WrapPath(err, "write delta", f.Name())
	}
	return st, nil
}

// newDeltaWriter checks the arguments and places the image.
func newDeltaWriter(meta Meta, vars []Var, parent Parent, opts []Option) (*deltaWriter, error) {
	o := buildOptions(opts)
	switch {
	case o.blockSize < MinBlockSize || o.blockSize > MaxBlockSize:
		return nil, fmt.Errorf("%w: block size %d outside [%d, %d]", ErrInvalid, o.blockSize, MinBlockSize, MaxBlockSize)
	case o.noHash:
		return nil, fmt.Errorf("%w: a delta needs block hashes (WithoutHash)", ErrInvalid)
	case parent.Summary.BlockSize != o.blockSize:
		return nil, fmt.Errorf("%w: block size %d, the parent's is %d", ErrInvalid, o.blockSize, parent.Summary.BlockSize)
	case meta.Rank < 0:
		return nil, fmt.Errorf("%w: rank %d", ErrInvalid, meta.Rank)
	}
	idx, err := checkVars(vars)
	if err != nil {
		return nil, err
	}
	ext, err := buildExt(&o, vars, idx)
	if err != nil {
		return nil, err
	}
	vars, extra := storeVars(vars)
	lay, err := plan(vars, parent.Layout)
	if err != nil {
		return nil, err
	}
	im, err := placeImage(lay, vars, idx, o.blockSize, ext)
	if err != nil {
		return nil, err
	}
	im.extra = extra
	if meta.Timestamp == 0 {
		meta.Timestamp = o.clock().UnixNano()
	}
	w := &deltaWriter{o: o, meta: meta, vars: vars, idx: idx, lay: lay, im: im, parentSum: parent.Summary.Checksum, open: -1}
	w.indexParent(parent.Summary)
	w.segs = w.segments()
	return w, nil
}

// chunkKey names a chunk across images: the variable and the chunk's
// offset in it (layout chaining keeps containers at their dptr).
type chunkKey struct {
	id   int32
	dptr int64
}

type deltaWriter struct {
	o         options
	meta      Meta
	vars      []Var
	idx       map[int32]int
	lay       *Layout
	im        *image
	parentSum [HashSize]byte
	parent    map[chunkKey]*ChunkInfo
	segs      []segment
	segOf     []int // index in segs of each chunk's first segment
	runs      []Run
	open      int // index in runs of the run still growing, -1 for none
	st        DeltaStats

	// While writing:
	f   vfd.File
	h   *b3.Hasher
	off int64 // file offset of the end of what is written (buffered data excluded)
	buf []byte
}

// image returns the layout and summary of the image (after hashing).
func (w *deltaWriter) image() (*Layout, Summary) {
	return w.lay, w.im.summary(w.vars, fileChecksum(w.im.chunks))
}

func (w *deltaWriter) indexParent(s Summary) {
	w.parent = make(map[chunkKey]*ChunkInfo, len(s.Chunks))
	for i := range s.Chunks {
		c := &s.Chunks[i]
		if c.Size > 0 {
			w.parent[chunkKey{c.VarID, c.Dptr}] = c
		}
	}
}

// blockLen is the length of block j of a chunk of n bytes.
func blockLen(n int64, bs uint32, j int) int64 {
	return min(int64(bs), n-int64(j)*int64(bs))
}

// clean reports whether block j of image chunk c is held by the parent
// with the same length and hash.
func (w *deltaWriter) clean(c *ChunkInfo, j int) bool {
	p := w.parent[chunkKey{c.VarID, c.Dptr}]
	if p == nil || j >= len(p.BlockHashes) {
		return false
	}
	bs := w.im.bs
	if !c.Compressed && p.storedLen(j, bs) != blockLen(p.Size, bs, j) {
		return false // a compressed block in a variable now stored raw
	}
	return blockLen(p.Size, bs, j) == blockLen(c.Size, bs, j) && p.BlockHashes[j] == c.BlockHashes[j]
}

// deltaBuffer gathers small runs into one write.
const deltaBuffer = 4 << 20

// emit appends b to the file and to the whole-file hash. Variable data
// (vfd.MemDraw) smaller than the buffer is gathered and written in
// larger pieces; anything else flushes the buffer first.
func (w *deltaWriter) emit(t vfd.MemType, b []byte) error {
	if w.h != nil {
		_, _ = w.h.Write(b)
	}
	if t == vfd.MemDraw && len(b) < deltaBuffer {
		if len(w.buf)+len(b) > deltaBuffer {
			if err := w.flush(); err != nil {
				return err
			}
		}
		if w.buf == nil {
			w.buf = make([]byte, 0, deltaBuffer)
		}
		w.buf = append(w.buf, b...)
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	var err error
	if t == vfd.MemDraw {
		err = writeStarting(w.f, b, w.off)
	} else {
		_, err = vfd.WriteAtType(w.f, t, b, w.off)
	}
	if err != nil {
		return fmt.Errorf("at %d: %w", w.off, err)
	}
	w.off += int64(len(b))
	return nil
}

// flush writes the gathered data.
func (w *deltaWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := writeStarting(w.f, w.buf, w.off); err != nil {
		return err
	}
	w.off += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// segment is a range of blocks of one chunk hashed as one piece. For a
// compressed chunk, out holds the stored forms of its dirty blocks back
// to back, block lo+k's at out[soff[k]:soff[k+1]] (empty for a clean one).
type segment struct {
	chunk  int
	lo, hi int // blocks
	out    []byte
	soff   []int64
}

func (w *deltaWriter) segments() []segment {
	bs := int64(w.im.bs)
	per := max(1, int(deltaSegment/bs))
	var out []segment
	w.segOf = make([]int, len(w.im.chunks))
	for ci := range w.im.chunks {
		w.segOf[ci] = len(out)
		n := len(w.im.chunks[ci].BlockHashes)
		for lo := 0; lo < n; lo += per {
			out = append(out, segment{chunk: ci, lo: lo, hi: min(lo+per, n)})
		}
	}
	return out
}

func (w *deltaWriter) data(c *ChunkInfo, lo, hi int) []byte {
	bs := int64(w.im.bs)
	v := w.vars[w.idx[c.VarID]].Data[c.Dptr : c.Dptr+c.Size]
	return v[int64(lo)*bs : min(int64(hi)*bs, c.Size)]
}

// hashSegment hashes the blocks of segment i; in a compressed chunk it
// then compresses the dirty ones (on the hash workers) and takes the
// stored size of each clean one from the parent.
func (w *deltaWriter) hashSegment(i int) error {
	s := &w.segs[i]
	c := &w.im.chunks[s.chunk]
	hashBlocks(w.data(c, s.lo, s.hi), w.im.bs, c.BlockHashes[s.lo:s.hi], w.o.workers)
	if !c.Compressed {
		return nil
	}
	bs := w.im.bs
	data := w.vars[w.idx[c.VarID]].Data[c.Dptr : c.Dptr+c.Size]
	// Compress the dirty blocks in up to workers contiguous ranges, each
	// into a buffer of its own, then put the buffers end to end.
	n := s.hi - s.lo
	nw := max(1, min(w.o.workers, n))
	per := (n + nw - 1) / nw
	outs := make([][]byte, nw)
	var wg sync.WaitGroup
	for k := 0; k < nw; k++ {
		lo, hi := s.lo+k*per, min(s.lo+(k+1)*per, s.hi)
		if lo >= hi {
			break
		}
		enc, err := getEncoder()
		if err != nil {
			wg.Wait()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer putEncoder(enc)
			var out []byte
			for j := lo; j < hi; j++ {
				if p := w.parent[chunkKey{c.VarID, c.Dptr}]; w.clean(c, j) {
					c.Stored[j] = uint32(p.storedLen(j, bs))
					continue
				}
				var sz uint32
				out, sz = compressBlock(enc, out, blockOf(data, j, bs))
				c.Stored[j] = sz
			}
			outs[k] = out
		}()
	}
	wg.Wait()
	s.soff = make([]int64, n+1)
	for k := 0; k < n; k++ {
		j := s.lo + k
		s.soff[k+1] = s.soff[k]
		if !w.clean(c, j) {
			s.soff[k+1] += int64(c.Stored[j])
		}
	}
	s.out = make([]byte, 0, s.soff[n])
	for _, o := range outs {
		s.out = append(s.out, o...)
	}
	return nil
}

// span is a range of dirty blocks [lo, hi) of one chunk to write.
type span struct{ chunk, lo, hi int }

// dirty appends to the run table the dirty blocks of hashed segment i
// (merging with the run before when they follow it) and returns them as
// spans to write, in order.
func (w *deltaWriter) dirty(i int) []span {
	s := &w.segs[i]
	c := &w.im.chunks[s.chunk]
	var out []span
	for j := s.lo; j < s.hi; {
		if w.clean(c, j) {
			w.open = -1
			j++
			continue
		}
		k := j + 1
		for k < s.hi && !w.clean(c, k) {
			k++
		}
		out = append(out, span{s.chunk, j, k})
		w.st.Blocks += k - j
		w.st.Written += min(int64(k)*int64(w.im.bs), c.Size) - int64(j)*int64(w.im.bs)
		if c.Compressed {
			w.st.Stored += s.soff[k-s.lo] - s.soff[j-s.lo]
		} else {
			w.st.Stored += min(int64(k)*int64(w.im.bs), c.Size) - int64(j)*int64(w.im.bs)
		}
		if o := w.open; o >= 0 && w.runs[o].Chunk == s.chunk && w.runs[o].First+w.runs[o].Count == j {
			w.runs[o].Count += k - j
		} else {
			w.runs = append(w.runs, Run{Chunk: s.chunk, First: j, Count: k - j})
			w.open = len(w.runs) - 1
		}
		if k < s.hi {
			w.open = -1
		}
		j = k
	}
	if s.hi == len(c.BlockHashes) {
		w.open = -1
	}
	return out
}

// hashAll hashes every block and builds the run table (PlanDelta).
func (w *deltaWriter) hashAll() error {
	for i := range w.segs {
		if err := w.hashSegment(i); err != nil {
			return err
		}
		w.dirty(i)
	}
	w.chunkHashes()
	return nil
}

// chunkHashes computes the chunk hashes and places the image's
// containers at their extents, once every block is hashed (and stored).
func (w *deltaWriter) chunkHashes() {
	for i := range w.im.chunks {
		c := &w.im.chunks[i]
		c.Hash = chunkHash(c.Size, w.im.bs, c.BlockHashes)
		if c.Compressed {
			c.StoredSize = 0
			for _, n := range c.Stored {
				c.StoredSize += int64(n)
			}
		}
	}
	w.im.relocate()
}

// emitSpan writes the bytes of a span: the variable's bytes, or for a
// compressed chunk the stored forms its segments hold.
func (w *deltaWriter) emitSpan(sp span) error {
	c := &w.im.chunks[sp.chunk]
	fail := func(err error) error {
		return fmt.Errorf("write var %d chunk %d blocks %d-%d: %w", c.VarID, sp.chunk, sp.lo, sp.hi-1, err)
	}
	if !c.Compressed {
		if err := w.emit(vfd.MemDraw, w.data(c, sp.lo, sp.hi)); err != nil {
			return fail(err)
		}
		return nil
	}
	for j := sp.lo; j < sp.hi; {
		s := &w.segs[w.segOf[sp.chunk]+j/max(1, int(deltaSegment/int64(w.im.bs)))]
		k := min(sp.hi, s.hi)
		if err := w.emit(vfd.MemDraw, s.out[s.soff[j-s.lo]:s.soff[k-s.lo]]); err != nil {
			return fail(err)
		}
		j = k
	}
	return nil
}

// write writes the delta to f. With hash, the blocks are hashed on a
// goroutine, segment after segment (each on the hash workers), while the
// dirty blocks of the segments already hashed are written; otherwise the
// plan (hashAll) is written.
func (w *deltaWriter) write(f vfd.File, hash bool) (DeltaStats, error) {
	w.f, w.h, w.off = f, nil, 0
	if !w.o.noDigest {
		w.h = b3.New()
	}
	if err := w.f.Truncate(0); err != nil {
		return DeltaStats{}, fmt.Errorf("truncate: %w", err)
	}
	meta := w.meta
	dh := deltaHeader{version: DeltaVersion, headerSize: DeltaHeaderSize, trailerSize: DeltaTrailerSize,
		ckptID: meta.CkptID, rank: meta.Rank, level: meta.Level, parent: w.parentSum}
	dhb := dh.encode()
	if err := w.emit(vfd.MemSuper, dhb[:]); err != nil {
		return DeltaStats{}, fmt.Errorf("write header: %w", err)
	}

	var werr error
	if hash {
		hashed := make(chan int, 4)
		stop := make(chan struct{})
		var herr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(hashed)
			for i := range w.segs {
				if herr = w.hashSegment(i); herr != nil {
					return
				}
				select {
				case hashed <- i:
				case <-stop:
					return
				}
			}
		}()
		for i := range hashed {
			if werr != nil {
				continue
			}
			for _, sp := range w.dirty(i) {
				if werr = w.emitSpan(sp); werr != nil {
					close(stop)
					break
				}
			}
			w.segs[i].out = nil // written: its stored forms are not needed again
		}
		wg.Wait()
		if werr == nil {
			werr = herr
		}
		w.chunkHashes()
	} else {
		for _, r := range w.runs {
			if werr = w.emitSpan(span{r.Chunk, r.First, r.First + r.Count}); werr != nil {
				break
			}
		}
	}
	if werr == nil {
		werr = w.flush()
	}
	if werr != nil {
		return DeltaStats{}, werr
	}
	if w.o.sync {
		if err := w.f.Sync(); err != nil {
			return DeltaStats{}, fmt.Errorf("sync data: %w", err)
		}
	}

	// Delta metadata: the image's header, metadata block and file block,
	// then the run table.
	lay := w.lay
	dmOff := w.off
	w.buf = nil
	hb := w.im.header(meta)
	mb := w.im.encodeMeta(w.vars, w.idx, lay)
	fbb := w.im.encodeFB(meta, hb, mb, fileChecksum(w.im.chunks), 0, len(w.vars), len(lay.Blocks))
	rt := make([]byte, RunSize*len(w.runs))
	for i, r := range w.runs {
		r.encode(rt[RunSize*i:])
	}
	dmh := b3.New()
	for _, part := range [][]byte{hb[:], mb, fbb[:], rt} {
		_, _ = dmh.Write(part)
		if err := w.emit(vfd.MemOHdr, part); err != nil {
			return DeltaStats{}, fmt.Errorf("write delta metadata: %w", err)
		}
	}
	tr := deltaTrailer{version: DeltaVersion, trailerSize: DeltaTrailerSize, nruns: uint64(len(w.runs)),
		dmOff: dmOff, imgMetaSize: w.im.metaSize, fs: w.off + DeltaTrailerSize}
	dmh.Sum(tr.dmHash[:0])
	trb := tr.encode()
	tr.hash = deltaHash(dhb[:], trb[:])
	copy(trb[dtHashOff:], tr.hash[:])
	if err := w.emit(vfd.MemSuper, trb[:]); err != nil {
		return DeltaStats{}, fmt.Errorf("write trailer: %w", err)
	}
	if w.o.sync {
		if err := w.f.Sync(); err != nil {
			return DeltaStats{}, fmt.Errorf("sync: %w", err)
		}
	}
	w.st.Runs = len(w.runs)
	w.st.FileSize = w.off
	if w.h != nil {
		w.h.Sum(w.st.Digest[:0])
	}
	w.o.logger.Debug("wrote FTI-FF delta file",
		zap.String("path", f.Name()), zap.Int64("ckpt-id", meta.CkptID), zap.Int32("rank", meta.Rank),
		zap.Int64("written", w.st.Written), zap.Int64("protected", w.im.dataSize), zap.Int("runs", w.st.Runs),
		zap.Int64("file-size", w.st.FileSize))
	return w.st, nil
}
