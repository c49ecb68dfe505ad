package fileformat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/vfd"
)

// Reader reads one FTI-FF file. [Open] has checked the header, the file
// block's own hash, the metadata hash, the structure and the file checksum
// over the chunk hashes; chunk data is verified as it is read. A Reader
// holds no mutable state after Open, so its methods may be called
// concurrently (the file must allow concurrent ReadAt, as vfd files do);
// opened [WithMoveOut] it remembers which chunks it handed over, and
// reads of one variable may then not run at once.
type Reader struct {
	f     vfd.File
	o     options
	path  string
	hb    [HeaderSize]byte
	fbb   [FBSize]byte
	hdr   header
	fb    fileBlock
	vars  []VarInfo
	byID  map[int32]int
	perV  [][]int // chunk indices of each variable, by dptr
	chunk []ChunkInfo
	// datasets and subsets come from the extension area (version 2).
	datasets []Dataset
	subsets  []Subset
	// extLen is the size of the extension area at the end of the metadata
	// block (0 in version 1), read from its trailer before anything else.
	extLen int64
	// moved marks the chunks handed over by ReadVar ([WithMoveOut]); nil
	// when bytes are never moved.
	moved []atomic.Bool
	// dbsize is each data block's size as its BMD states it.
	dbsize []int64
	// stSize is each variable's size as stored (a lossy variable's
	// reduced values), the bytes its chunks tile.
	stSize []int64
	// soff holds, for each compressed chunk, the offset of each block's
	// stored form from the chunk's Fptr (one more entry: StoredSize).
	soff [][]int64
}

// Open reads and checks the metadata of the FTI-FF file f. It reads only
// the header, the file block and the metadata block, never the data;
// sizes and counts read from the file are checked against each other, the
// file's size and [MaxMetaSize] before anything is allocated, and the
// metadata is streamed (memory grows with the records read). Errors about the content are *[CorruptionError]s
// wrapping [ErrNotFTIFF], [ErrVersion], [ErrTruncated], [ErrHashMismatch]
// or [ErrCorrupt]. Open uses [WithHashWorkers], [WithVerifiedData] and [WithLogger]; the other
// options are ignored. The Reader does not own f: the caller closes it.
func Open(f vfd.File, opts ...Option) (*Reader, error) {
	o := buildOptions(opts)
	r := &Reader{f: f, o: o, path: f.Name()}
	if err := r.open(); err != nil {
		return nil, err
	}
	if _, lends := f.(lender); lends && o.moveOut && o.verified {
		r.moved = make([]atomic.Bool, len(r.chunk))
	}
	return r, nil
}

func (r *Reader) corrupt(varID int32, chunk int, off int64, err error) error {
	rank := -1
	if r.hdr.headerSize != 0 {
		rank = int(r.hdr.rank)
	}
	return &CorruptionError{Path: r.path, Rank: rank, VarID: varID, Chunk: chunk, Offset: off, Err: err}
}

// fileErr is a corruption of the file as a whole at offset off.
func (r *Reader) fileErr(off int64, err error, format string, args ...any) error {
	return r.corrupt(-1, -1, off, fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...)))
}

// lender is a file that can hand out its bytes in place, without a copy
// (vfd.Loaded, an image being read into memory): Verify hashes them where
// they lie.
type lender interface {
	Range(off, end int64) ([]byte, error)
}

// lend returns bytes [off, off+n) of the file in place when it is a
// lender (nil, nil otherwise); a range past the end is ErrTruncated.
func (r *Reader) lend(off, n int64) ([]byte, error) {
	l, ok := r.f.(lender)
	if !ok {
		return nil, nil
	}
	if size, err := r.f.Size(); err == nil && off+n > size {
		return nil, r.fileErr(size, ErrTruncated, "file ends inside a %d-byte read at %d", n, off)
	}
	b, err := l.Range(off, off+n)
	if err != nil {
		return nil, vfd.WrapPathAt(err, "read", r.path, off)
	}
	return b, nil
}

// readAt reads exactly len(p) bytes at off; a short file is ErrTruncated.
func (r *Reader) readAt(t vfd.MemType, p []byte, off int64) error {
	n, err := vfd.ReadAtType(r.f, t, p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return r.fileErr(off+int64(n), ErrTruncated, "file ends inside a %d-byte read at %d", len(p), off)
	}
	return vfd.WrapPathAt(err, "read", r.path, off)
}

func (r *Reader) open() error {
	size, err := r.f.Size()
	if err != nil {
		return vfd.WrapPath(err, "size of", r.path)
	}
	if err := r.openHeader(size); err != nil {
		return err
	}
	if err := r.openFileBlock(size); err != nil {
		return err
	}
	fb, fbOff := &r.fb, size-FBSize
	if err := r.readExtTrailer(); err != nil {
		return err
	}
	if err := r.checkCounts(fbOff); err != nil {
		return err
	}
	// Metadata block: hashed, then parsed, both streamed, so memory grows
	// only with what the file holds and its hash vouches for.
	h, whole, err := r.hashMeta()
	if err != nil {
		return err
	}
	if h != fb.metaHash {
		return r.fileErr(fb.metaOff, ErrHashMismatch, "metadata hash")
	}
	if err := r.parseMeta(whole); err != nil {
		return err
	}
	if fb.flags&flagUnhashed == 0 {
		if sum := fileChecksum(r.chunk); sum != fb.checksum {
			return r.fileErr(fbOff+128, ErrHashMismatch, "file checksum over the chunk hashes")
		}
	}
	r.o.logger.Debug("opened FTI-FF file", zap.String("path", r.path), zap.Int64("ckpt-id", r.hdr.ckptID),
		zap.Int32("rank", r.hdr.rank), zap.Int("vars", len(r.vars)), zap.Int("chunks", len(r.chunk)))
	return nil
}

// openHeader reads and checks the header and finds the file block's
// magic at the end of the file. A file that is not FTI-FF at all gets
// ErrNotFTIFF; one that looks like FTI-FF but is damaged, a
// *CorruptionError. It sets r.hdr.
func (r *Reader) openHeader(size int64) error {
	hn := min(size, HeaderSize)
	if err := r.readAt(vfd.MemSuper, r.hb[:hn], 0); err != nil {
		return err
	}
	if hn < HeaderSize {
		if bytes.HasPrefix(headerMagic[:], r.hb[:min(hn, 8)]) {
			return r.fileErr(hn, ErrTruncated, "%d bytes, shorter than the header", size)
		}
		return fmt.Errorf("%s: %w", r.path, ErrNotFTIFF)
	}
	trailerOK := false
	if size >= HeaderSize+FBSize {
		var m [8]byte
		if err := r.readAt(vfd.MemSuper, m[:], size-FBSize); err != nil {
			return err
		}
		trailerOK = m == fbMagic
	}
	if !bytes.Equal(r.hb[:8], headerMagic[:]) {
		if trailerOK {
			return r.fileErr(0, ErrCorrupt, "bad header magic %x but an FTI-FF file block", r.hb[:8])
		}
		return fmt.Errorf("%s: %w", r.path, ErrNotFTIFF)
	}
	hdr := decodeHeader(r.hb[:])
	if hdr.version != Version && hdr.version != VersionExt && hdr.version != VersionCodec {
		if trailerOK {
			var v [2]byte
			if err := r.readAt(vfd.MemSuper, v[:], size-FBSize+8); err != nil {
				return err
			}
			if le.Uint16(v[:]) == hdr.version {
				return r.corrupt(-1, -1, 8, fmt.Errorf("%w: version %d (this reader knows %d to %d)", ErrVersion, hdr.version, Version, VersionCodec))
			}
		}
		return r.fileErr(8, ErrCorrupt, "header version %d does not match the file block", hdr.version)
	}
	if hdr.headerSize != HeaderSize || hdr.fbSize != FBSize {
		return r.fileErr(10, ErrCorrupt, "header size %d / file block size %d", hdr.headerSize, hdr.fbSize)
	}
	r.hdr = hdr
	if size < HeaderSize+FBSize || !trailerOK {
		return r.fileErr(max(size-FBSize, HeaderSize), ErrTruncated, "no file block at the end of the %d-byte file", size)
	}
	return nil
}

// openFileBlock reads the file block at the end of the file, checks its
// hash and its fields against the header and the file size, and sets r.fb.
func (r *Reader) openFileBlock(size int64) error {
	hdr := &r.hdr
	fbOff := size - FBSize
	if err := r.readAt(vfd.MemSuper, r.fbb[:], fbOff); err != nil {
		return err
	}
	if h := fbHash(r.hb[:], r.fbb[:]); !bytes.Equal(h[:], r.fbb[fbHashOff:]) {
		return r.fileErr(fbOff+fbHashOff, ErrHashMismatch, "file block hash")
	}
	fb := decodeFB(r.fbb[:])
	r.fb = fb
	switch {
	case hdr.rank < 0:
		return r.fileErr(24, ErrCorrupt, "negative rank %d", hdr.rank)
	case fb.version != hdr.version || fb.fbSize != FBSize:
		return r.fileErr(fbOff+8, ErrCorrupt, "file block version %d size %d", fb.version, fb.fbSize)
	case fb.fs > size:
		return r.fileErr(size, ErrTruncated, "file is %d bytes, file block says %d", size, fb.fs)
	case fb.fs != size:
		return r.fileErr(fbOff+40, ErrCorrupt, "file is %d bytes, file block says %d", size, fb.fs)
	case fb.flags&^r.knownFlags() != 0:
		return r.fileErr(fbOff+12, ErrCorrupt, "unknown flags %#x", fb.flags)
	case fb.blockSize < MinBlockSize || fb.blockSize > MaxBlockSize:
		return r.fileErr(fbOff+16, ErrCorrupt, "block size %d", fb.blockSize)
	case fb.metaOff < HeaderSize || fb.metaSize < 0 || fb.metaOff > fbOff || fb.metaSize != fbOff-fb.metaOff:
		return r.fileErr(fbOff+72, ErrCorrupt, "metadata at %d size %d", fb.metaOff, fb.metaSize)
	case fb.ckptSize < 0 || (fb.ckptSize > fb.metaOff-HeaderSize && hdr.version != VersionCodec):
		return r.fileErr(fbOff+32, ErrCorrupt, "data size %d", fb.ckptSize)
	}
	return nil
}

// knownFlags are the file block flags the file's version may set.
func (r *Reader) knownFlags() uint32 {
	if r.hdr.version == VersionCodec {
		return knownFlags | flagExt
	}
	return knownFlags
}

// hasExt reports whether the metadata block ends with an extension area.
func (r *Reader) hasExt() bool {
	switch r.hdr.version {
	case VersionExt:
		return true
	case VersionCodec:
		return r.fb.flags&flagExt != 0
	}
	return false
}

// checkCounts checks the file block's counts against each other, against
// the data region and against MaxMetaSize, before any metadata is read:
// the metadata block must be exactly as large as its variable records,
// block and chunk records and block hashes, and there cannot be more
// chunks than data bytes nor more block hashes than the chunks' data
// needs. So nothing a file merely claims is allocated or read.
func (r *Reader) checkCounts(fbOff int64) error {
	fb := &r.fb
	bad := func(field int64, format string, args ...any) error {
		return r.fileErr(fbOff+field, ErrCorrupt, format, args...)
	}
	data := fb.metaOff - HeaderSize // container bytes
	bs := int64(fb.blockSize)
	minBH, maxBH := uint64(numBlocks(fb.ckptSize, fb.blockSize)), uint64(fb.ckptSize/bs)+uint64(fb.numChunks)
	switch {
	case fb.metaSize > MaxMetaSize:
		return bad(80, "metadata block of %d bytes, more than the %d bytes a writer produces", fb.metaSize, int64(MaxMetaSize))
	case int64(fb.numChunks) > data && r.hdr.version != VersionCodec:
		return bad(28, "%d chunks in %d bytes of data", fb.numChunks, data)
	case fb.numBlocks > fb.numChunks:
		return bad(24, "%d blocks holding %d chunks", fb.numBlocks, fb.numChunks)
	case fb.numBHashes < minBH || fb.numBHashes > maxBH:
		return bad(88, "%d block hashes for %d bytes in %d chunks of %d-byte blocks (want %d..%d)",
			fb.numBHashes, fb.ckptSize, fb.numChunks, bs, minBH, maxBH)
	}
	fixed := int64(fb.numBlocks)*BMDSize + int64(fb.numChunks)*VMDSize + int64(fb.numBHashes)*HashSize
	if r.hdr.version == VersionCodec {
		fixed += codecTablesSize(fb.numBHashes, int(fb.numVars))
	}
	recs := fb.metaSize - r.extLen - fixed
	if recs < int64(fb.numVars)*VarRecordSize || recs > int64(fb.numVars)*varRecordLen(0xffff) || recs%8 != 0 {
		return bad(80, "metadata block of %d bytes does not fit %d variables, %d blocks, %d chunks and %d block hashes",
			fb.metaSize, fb.numVars, fb.numBlocks, fb.numChunks, fb.numBHashes)
	}
	return nil
}

// metaBuf is the read granularity of the metadata block.
const metaBuf = 1 << 20

// hashMeta streams the metadata block through BLAKE3. When the block fits
// in one buffer it returns that buffer too, so it is read only once.
func (r *Reader) hashMeta() (sum [HashSize]byte, whole []byte, err error) {
	mh := b3.New()
	buf := make([]byte, min(r.fb.metaSize, metaBuf))
	for off := int64(0); off < r.fb.metaSize; off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), r.fb.metaSize-off)]
		if err := r.readAt(vfd.MemOHdr, p, r.fb.metaOff+off); err != nil {
			return sum, nil, err
		}
		_, _ = mh.Write(p)
	}
	mh.Sum(sum[:0])
	if int64(len(buf)) == r.fb.metaSize {
		whole = buf
	}
	return sum, whole, nil
}

// metaStream reads the metadata block in order through a bounded buffer.
type metaStream struct {
	r      *Reader
	buf    []byte
	lo, hi int   // unread bytes are buf[lo:hi]
	next   int64 // offset in the block of buf[hi]
}

// maxRecord is the largest single record: a variable with a 65535-byte name.
const maxRecord = VarRecordSize + 65536

// newMetaStream starts at the block's first byte; whole, when not nil,
// is the whole block already read.
func (r *Reader) newMetaStream(whole []byte) *metaStream {
	if whole != nil {
		return &metaStream{r: r, buf: whole, hi: len(whole), next: int64(len(whole))}
	}
	return &metaStream{r: r, buf: make([]byte, min(r.fb.metaSize, metaBuf))}
}

// take returns the next n bytes, valid until the next call. The buffer
// grows only for a record larger than it (at most the metadata block,
// whose size checkCounts bounded).
func (m *metaStream) take(n int) ([]byte, error) {
	if m.hi-m.lo < n {
		m.hi = copy(m.buf, m.buf[m.lo:m.hi])
		m.lo = 0
		if len(m.buf) < n {
			m.buf = append(m.buf[:m.hi], make([]byte, max(n, maxRecord)-m.hi)...)
			m.buf = m.buf[:cap(m.buf)]
		}
		k := min(int64(len(m.buf)-m.hi), m.r.fb.metaSize-m.next)
		if int64(m.hi)+k < int64(n) {
			return nil, m.r.fileErr(m.r.fb.metaOff+m.next, ErrCorrupt, "record past the end of the metadata")
		}
		if err := m.r.readAt(vfd.MemOHdr, m.buf[m.hi:int64(m.hi)+k], m.r.fb.metaOff+m.next); err != nil {
			return nil, err
		}
		m.hi += int(k)
		m.next += k
	}
	b := m.buf[m.lo : m.lo+n]
	m.lo += n
	return b, nil
}

// parseMeta decodes and checks the metadata block, reading it in order
// (whole, when not nil, is the block already read). Slices grow with the
// records actually read, never by a count alone.
func (r *Reader) parseMeta(whole []byte) error {
	fb := &r.fb
	ms := r.newMetaStream(whole)
	n := fb.metaSize - r.extLen // the version-1 part (and version 3's tables); the extension area follows
	if r.hdr.version == VersionCodec {
		n -= codecTablesSize(fb.numBHashes, int(fb.numVars))
	}
	if int64(fb.numVars)*VarRecordSize > n {
		return r.badMeta(0, "%d variables do not fit in %d metadata bytes", fb.numVars, n)
	}
	p, err := r.parseVarRecords(ms, n)
	if err != nil {
		return err
	}
	if err := r.parseBlocks(ms, n, p); err != nil {
		return err
	}
	if err := r.readBlockHashes(ms); err != nil {
		return err
	}
	if err := r.readCodecTables(ms); err != nil {
		return err
	}
	if err := r.checkPlacement(); err != nil {
		return err
	}
	if err := r.tileVariables(); err != nil {
		return err
	}
	if r.extLen == 0 {
		return nil
	}
	ext, err := ms.take(int(r.extLen))
	if err != nil {
		return err
	}
	return r.parseExt(ext, fb.metaOff+fb.metaSize-r.extLen)
}

// maxCompressedContainer bounds the container size of a compressed
// chunk, whose container takes no room of its own in the file (1 TiB; an
// implementation limit that keeps the sums of container sizes far from
// overflowing).
const maxCompressedContainer = 1 << 40

// readCodecTables reads a version-3 file's stored-size table (checking
// each block's stored size against its length: equal for a block of an
// uncompressed variable, between 1 and its length for a compressed one)
// and the error-bound table (zero for an exact variable; otherwise not
// negative and not NaN).
func (r *Reader) readCodecTables(ms *metaStream) error {
	fb := &r.fb
	if r.hdr.version != VersionCodec {
		return nil
	}
	bs := fb.blockSize
	p := fb.metaSize - r.extLen - codecTablesSize(fb.numBHashes, int(fb.numVars))
	start := p
	for ci := range r.chunk {
		c := &r.chunk[ci]
		nb := len(c.BlockHashes)
		if c.Compressed {
			c.Stored = make([]uint32, nb)
		}
		var soff []int64
		if c.Compressed {
			soff = make([]int64, nb+1)
		}
		var sum int64
		for j := 0; j < nb; j++ {
			b, err := ms.take(4)
			if err != nil {
				return err
			}
			n, want := int64(le.Uint32(b)), blockLen(c.Size, bs, j)
			if n > want || n < 1 || (!c.Compressed && n != want) || (n < want && n*MaxZstdRatio < want) {
				return r.corrupt(c.VarID, ci, fb.metaOff+p, fmt.Errorf("%w: block %d of chunk: %d bytes stored for %d", ErrCorrupt, j, n, want))
			}
			if c.Compressed {
				c.Stored[j] = uint32(n)
				soff[j] = sum
			}
			sum += n
			p += 4
		}
		if c.Compressed {
			soff[nb] = sum
			c.StoredSize = sum
		}
		if r.soff == nil {
			r.soff = make([][]int64, len(r.chunk))
		}
		r.soff[ci] = soff
	}
	if pad := pad8(p-start) - (p - start); pad > 0 {
		b, err := ms.take(int(pad))
		if err != nil {
			return err
		}
		if !allZero(b) {
			return r.badMeta(p, "non-zero padding after the stored sizes")
		}
		p += pad
	}
	for vi := range r.vars {
		b, err := ms.take(16)
		if err != nil {
			return err
		}
		v := &r.vars[vi]
		v.Bound = ErrorBound{Abs: math.Float64frombits(le.Uint64(b)), Rel: math.Float64frombits(le.Uint64(b[8:]))}
		exact := v.Lossy.Mode == Exact
		if (exact && (v.Bound != ErrorBound{})) || !(v.Bound.Abs >= 0) || !(v.Bound.Rel >= 0) {
			return r.badMeta(p, "variable %d: error bound %g / %g for lossy mode %v", v.ID, v.Bound.Abs, v.Bound.Rel, v.Lossy)
		}
		p += 16
	}
	return nil
}

// checkPlacement checks that the containers follow each other from the
// header to the metadata block, each taking its extent (a compressed
// chunk its stored size), and that every data block's size is the sum of
// its containers' extents.
func (r *Reader) checkPlacement() error {
	fb := &r.fb
	fptr := int64(HeaderSize)
	var sum int64
	for ci := range r.chunk {
		c := &r.chunk[ci]
		if c.Fptr != fptr || fptr+c.extent() > fb.metaOff {
			return r.badMeta(int64(r.vmdOff(ci))+24, "chunk %d: fptr %d, want %d", ci, c.Fptr, fptr)
		}
		fptr += c.extent()
		sum += c.extent()
		if ci+1 == len(r.chunk) || r.chunk[ci+1].Block != c.Block {
			if sum != r.dbsize[c.Block] {
				return r.badMeta(int64(r.vmdOff(ci))+VMDSize, "block %d: size %d, containers sum to %d", c.Block, r.dbsize[c.Block], sum)
			}
			sum = 0
		}
	}
	if fptr != fb.metaOff {
		return r.badMeta(int64(r.vmdOff(len(r.chunk))), "data ends at %d, metadata starts at %d", fptr, fb.metaOff)
	}
	return nil
}

// badMeta is a corruption error at offset p of the metadata block.
func (r *Reader) badMeta(p int64, format string, args ...any) error {
	return r.fileErr(r.fb.metaOff+p, ErrCorrupt, format, args...)
}

// parseVarRecords decodes the variable records of the n-byte version-1
// metadata and returns the offset after them.
func (r *Reader) parseVarRecords(ms *metaStream, n int64) (int64, error) {
	fb := &r.fb
	r.vars = make([]VarInfo, 0, min(fb.numVars, 1024))
	r.stSize = make([]int64, 0, min(fb.numVars, 1024))
	r.byID = make(map[int32]int, min(fb.numVars, 1024))
	p := int64(0)
	for i := 0; i < int(fb.numVars); i++ {
		if p+VarRecordSize > n {
			return 0, r.badMeta(p, "variable record %d past the metadata end", i)
		}
		b, err := ms.take(VarRecordSize)
		if err != nil {
			return 0, err
		}
		id := int32(le.Uint32(b[0:]))
		t := ElemType(b[4])
		nl := int(le.Uint16(b[6:]))
		es := le.Uint32(b[8:])
		sz := int64(le.Uint64(b[16:]))
		resv := b[5] != 0 || le.Uint32(b[12:]) != 0
		codec, lossy := Codec(b[5]), Lossy{Mode: LossyMode(b[12]), Bits: b[13]}
		if r.hdr.version == VersionCodec {
			resv = le.Uint16(b[14:]) != 0
		}
		rl := varRecordLen(nl)
		if p+rl > n {
			return 0, r.badMeta(p, "variable record %d past the metadata end", i)
		}
		if id < 0 {
			return 0, r.badMeta(p, "variable id %d", id)
		}
		if _, dup := r.byID[id]; dup {
			return 0, r.badMeta(p, "duplicate variable id %d", id)
		}
		name, err := ms.take(int(rl - VarRecordSize))
		if err != nil {
			return 0, err
		}
		if resv || !allZero(name[nl:]) {
			return 0, r.badMeta(p, "variable %d: non-zero reserved bytes", id)
		}
		if res, ok := elemSize(t, es); !ok || res != es {
			return 0, r.badMeta(p+4, "variable %d: element type %d size %d", id, t, es)
		}
		if codec >= numCodecs {
			return 0, r.badMeta(p+5, "variable %d: codec %d", id, codec)
		}
		ses, ok := lossy.storedElem(t)
		if !ok {
			return 0, r.badMeta(p+12, "variable %d: lossy mode %d with %d bits for %v", id, lossy.Mode, lossy.Bits, t)
		}
		st := sz
		if sz >= 0 && ses != 0 && sz%int64(es) == 0 {
			st = sz / int64(es) * int64(ses)
		}
		if sz < 0 || st > fb.ckptSize || sz%int64(es) != 0 {
			return 0, r.badMeta(p+16, "variable %d: size %d", id, sz)
		}
		r.byID[id] = i
		r.vars = append(r.vars, VarInfo{ID: id, Name: string(name[:nl]), Type: t, ElemSize: es,
			Count: sz / int64(es), Size: sz, Codec: codec, Lossy: lossy})
		r.stSize = append(r.stSize, st)
		p += rl
	}
	return p, nil
}

// parseBlocks decodes the block and chunk records (BMD, VMD) that follow
// the variables at p and checks that they tile the data area; the block
// hashes follow.
func (r *Reader) parseBlocks(ms *metaStream, n, p int64) error {
	fb := &r.fb
	if int64(fb.numBlocks)*BMDSize > n-p || int64(fb.numChunks)*VMDSize > n-p {
		return r.badMeta(p, "%d blocks, %d chunks do not fit in the metadata", fb.numBlocks, fb.numChunks)
	}
	r.chunk = make([]ChunkInfo, 0, min(fb.numChunks, 4096))
	bs := fb.blockSize
	fptr := int64(HeaderSize) // the raw containers' end, a lower bound of the data's
	var bh uint64
	var dataSize int64
	r.dbsize = make([]int64, 0, min(fb.numBlocks, 4096))
	for bi := 0; bi < int(fb.numBlocks); bi++ {
		if p+BMDSize > n {
			return r.badMeta(p, "block %d past the metadata end", bi)
		}
		b, err := ms.take(BMDSize)
		if err != nil {
			return err
		}
		nc := int64(le.Uint32(b))
		dbsize := int64(le.Uint64(b[8:]))
		if le.Uint32(b[4:]) != 0 || nc == 0 {
			return r.badMeta(p, "block %d: %d chunks, reserved %d", bi, nc, le.Uint32(b[4:]))
		}
		if nc*VMDSize > n-p-BMDSize || int64(len(r.chunk))+nc > int64(fb.numChunks) {
			return r.badMeta(p, "block %d: %d chunks past the metadata end", bi, nc)
		}
		p += BMDSize
		for j := int64(0); j < nc; j++ {
			b, err := ms.take(VMDSize)
			if err != nil {
				return err
			}
			v, resOK := decodeVMD(b)
			ci := len(r.chunk)
			compressed := v.idx < fb.numVars && r.vars[v.idx].Codec != CodecNone
			maxCont := fb.metaOff
			if compressed {
				maxCont = maxCompressedContainer
			}
			switch {
			case !resOK:
				return r.badMeta(p+13, "chunk %d: non-zero reserved bytes", ci)
			case v.idx >= fb.numVars || r.vars[v.idx].ID != v.id:
				return r.badMeta(p, "chunk %d: variable %d at index %d", ci, v.id, v.idx)
			case v.contSize <= 0 || v.contSize > maxCont || v.chunkSize < 0 || v.chunkSize > v.contSize:
				return r.badMeta(p+32, "chunk %d: chunk size %d container size %d", ci, v.chunkSize, v.contSize)
			case (v.hasContent == 1) != (v.chunkSize > 0) || v.hasContent > 1:
				return r.badMeta(p+12, "chunk %d: hascontent %d with %d bytes", ci, v.hasContent, v.chunkSize)
			case v.fptr < HeaderSize || v.fptr > fb.metaOff:
				return r.badMeta(p+24, "chunk %d: fptr %d, want %d", ci, v.fptr, fptr)
			case v.firstBHash != bh:
				return r.badMeta(p+48, "chunk %d: first block hash %d, want %d", ci, v.firstBHash, bh)
			}
			if !compressed {
				fptr += v.contSize
			}
			dataSize += v.chunkSize
			bh += uint64(numBlocks(v.chunkSize, bs))
			r.chunk = append(r.chunk, ChunkInfo{VarID: v.id, Block: bi, Container: v.container, Dptr: v.dptr,
				Fptr: v.fptr, Size: v.chunkSize, ContainerSize: v.contSize, Hash: v.hash, Compressed: compressed})
			if dataSize < 0 {
				return r.badMeta(p+32, "chunk %d: the chunks' sizes overflow", ci)
			}
			p += VMDSize
		}
		r.dbsize = append(r.dbsize, dbsize)
	}
	switch {
	case len(r.chunk) != int(fb.numChunks):
		return r.badMeta(p, "%d chunks, file block says %d", len(r.chunk), fb.numChunks)
	case fptr > fb.metaOff:
		return r.badMeta(p, "data ends at %d, metadata starts at %d", fptr, fb.metaOff)
	case dataSize != fb.ckptSize:
		return r.badMeta(p, "chunks hold %d bytes, file block says %d", dataSize, fb.ckptSize)
	case bh != fb.numBHashes || uint64(n-p) != bh*HashSize || bh > uint64(n):
		return r.badMeta(p, "%d block hashes in %d bytes, file block says %d", bh, n-p, fb.numBHashes)
	}
	return nil
}

// readBlockHashes reads every chunk's block hashes and checks each
// chunk's hash over them.
func (r *Reader) readBlockHashes(ms *metaStream) error {
	fb := &r.fb
	bs, moff := fb.blockSize, fb.metaOff
	unhashed := fb.flags&flagUnhashed != 0
	for i := range r.chunk {
		c := &r.chunk[i]
		k := numBlocks(c.Size, bs)
		c.BlockHashes = make([][HashSize]byte, k)
		for j := range c.BlockHashes {
			b, err := ms.take(HashSize)
			if err != nil {
				return err
			}
			copy(c.BlockHashes[j][:], b)
		}
		if !unhashed && chunkHash(c.Size, bs, c.BlockHashes) != c.Hash {
			return r.corrupt(c.VarID, i, moff+int64(r.vmdOff(i))+56, fmt.Errorf("%w: chunk hash over its block hashes", ErrHashMismatch))
		}
	}
	return nil
}

// tileVariables checks that every variable's containers tile [0,
// capacity) in dptr order and that its chunks hold exactly its bytes.
func (r *Reader) tileVariables() error {
	moff := r.fb.metaOff
	r.perV = make([][]int, len(r.vars))
	for i := range r.chunk {
		vi := r.byID[r.chunk[i].VarID]
		r.perV[vi] = append(r.perV[vi], i)
	}
	for vi, cs := range r.perV {
		sortByDptr(cs, r.chunk)
		v := &r.vars[vi]
		size := r.stSize[vi]
		var next int64
		for k, ci := range cs {
			c := &r.chunk[ci]
			want := min(max(size-c.Dptr, 0), c.ContainerSize)
			if c.Dptr != next || c.Container != uint32(k) || c.Size != want {
				return r.corrupt(v.ID, ci, moff+int64(r.vmdOff(ci)), fmt.Errorf("%w: container %d at dptr %d holding %d bytes does not fit variable of %d bytes",
					ErrCorrupt, c.Container, c.Dptr, c.Size, size))
			}
			next += c.ContainerSize
			if next < 0 {
				return r.corrupt(v.ID, ci, moff+int64(r.vmdOff(ci))+40, fmt.Errorf("%w: container sizes overflow", ErrCorrupt))
			}
			if c.Compressed {
				v.Stored += c.StoredSize
			} else {
				v.Stored += c.Size
			}
		}
		if next < size {
			return r.badMeta(0, "variable %d: %d bytes but containers hold %d", v.ID, size, next)
		}
		v.Chunks = len(cs)
	}
	return nil
}

// soffOf returns the stored offsets of chunk ci's blocks (nil for a
// chunk that is not compressed).
func (r *Reader) soffOf(ci int) []int64 {
	if r.soff == nil {
		return nil
	}
	return r.soff[ci]
}

// vmdOff returns the offset of chunk i's VMD record inside the metadata block.
func (r *Reader) vmdOff(i int) int {
	p := 0
	for _, v := range r.vars {
		p += int(varRecordLen(len(v.Name)))
	}
	if i < len(r.chunk) {
		p += (r.chunk[i].Block+1)*BMDSize + i*VMDSize
	}
	return p
}

func sortByDptr(cs []int, chunks []ChunkInfo) {
	// insertion sort: a variable has few fragments, mostly already in order.
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && chunks[cs[j]].Dptr < chunks[cs[j-1]].Dptr; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// Meta returns the file's metadata.
func (r *Reader) Meta() Meta {
	return Meta{CkptID: r.hdr.ckptID, Rank: r.hdr.rank, Level: r.hdr.level, Timestamp: r.fb.timestamp,
		MaxFs: r.fb.maxFs, PtFs: r.fb.ptFs}
}

// Vars lists the stored variables in the order they were written.
func (r *Reader) Vars() []VarInfo { return append([]VarInfo(nil), r.vars...) }

// Var describes the variable id, or returns an error wrapping [ErrNoVar].
func (r *Reader) Var(id int32) (VarInfo, error) {
	i, ok := r.byID[id]
	if !ok {
		return VarInfo{}, fmt.Errorf("%s: variable %d: %w", r.path, id, ErrNoVar)
	}
	return r.vars[i], nil
}

// StoredSize returns the stored size in bytes of variable id (FTI's
// GetStoredSize), or an error wrapping [ErrNoVar].
func (r *Reader) StoredSize(id int32) (int64, error) {
	v, err := r.Var(id)
	return v.Size, err
}

// Hashed reports whether the file carries chunk hashes (false for files
// written with [WithoutHash]).
func (r *Reader) Hashed() bool { return r.fb.flags&flagUnhashed == 0 }

// Summary describes the file as [Write] described it when writing it.
func (r *Reader) Summary() Summary {
	s := Summary{FileSize: r.fb.fs, DataSize: r.fb.ckptSize, Checksum: r.fb.checksum, BlockSize: r.fb.blockSize,
		Chunks: make([]ChunkInfo, len(r.chunk))}
	for i, c := range r.chunk {
		c.BlockHashes = slices.Clone(c.BlockHashes)
		c.Stored = slices.Clone(c.Stored)
		s.Chunks[i] = c
	}
	for _, v := range r.vars {
		s.Logical += v.Size
		s.Stored += v.Stored
	}
	return s
}

// Layout rebuilds the file's layout, to pass to the next [Write] after a
// restart so the new file keeps this one's containers.
func (r *Reader) Layout() *Layout {
	l := &Layout{Blocks: make([]Block, r.fb.numBlocks)}
	for _, c := range r.chunk {
		l.Blocks[c.Block].Containers = append(l.Blocks[c.Block].Containers,
			Container{VarID: c.VarID, ID: c.Container, Dptr: c.Dptr, Size: c.ContainerSize})
	}
	return l
}

// ReadVar restores variable id into dst, whose length must be the stored
// size ([ErrSize] otherwise). Each fragment is read straight into
// dst[dptr:] and its blocks are verified against their hashes while the
// next part is read; only this variable's chunks are read. On any error
// dst is zeroed, so bad data is never left looking restored.
func (r *Reader) ReadVar(id int32, dst []byte) error {
	vi, ok := r.byID[id]
	if !ok {
		return fmt.Errorf("%s: variable %d: %w", r.path, id, ErrNoVar)
	}
	v := &r.vars[vi]
	if int64(len(dst)) != v.Size {
		return fmt.Errorf("%s: variable %d: %w (%d bytes, stored %d)", r.path, id, ErrSize, len(dst), v.Size)
	}
	st := dst
	if r.stSize[vi] != v.Size {
		// A lossy variable stored in a smaller type: its stored values
		// (no more bytes than the variable) are read, then widened.
		st = make([]byte, r.stSize[vi])
	}
	for _, ci := range r.perV[vi] {
		c := &r.chunk[ci]
		if c.Size == 0 {
			continue
		}
		if err := r.readChunk(ci, st[c.Dptr:c.Dptr+c.Size]); err != nil {
			clear(dst)
			return err
		}
	}
	if v.Lossy.Mode != Exact {
		lossyDecode(v.Lossy, v.Type, st, dst)
	}
	return nil
}

// Verify reads the whole file and checks everything: header and file
// block unchanged since Open, the metadata hash, every block of every
// chunk, zero padding in partly empty containers, and the file checksum.
// It streams the file, in order, through the same checker as
// [Reader.NewVerifier] (one checker of these things): a file that lends
// its bytes in place (vfd.Loaded, an image being read) is hashed where
// they lie, any other is read ahead in pieces of about 4 MiB while the
// piece before is checked. Memory use is bounded by a few pieces,
// whatever the file size.
func (r *Reader) Verify() error {
	if !r.Hashed() {
		return fmt.Errorf("%s: %w", r.path, ErrUnhashed)
	}
	size, err := r.f.Size()
	if err != nil {
		return vfd.WrapPath(err, "size of", r.path)
	}
	if size != r.fb.fs {
		if size < r.fb.fs {
			return r.fileErr(size, ErrTruncated, "file is %d bytes, file block says %d", size, r.fb.fs)
		}
		return r.fileErr(r.fb.fs, ErrCorrupt, "file is %d bytes, file block says %d", size, r.fb.fs)
	}
	v, err := r.NewVerifier()
	if err != nil {
		return err
	}
	if err := r.stream(v); err != nil {
		return err
	}
	return v.Close()
}

// fileSpan is a range of the file read with one memory type: the header, a
// piece of the data, of the metadata, the file block.
type fileSpan struct {
	off, end int64
	t        vfd.MemType
}

// spans cuts the file into the pieces Verify reads, in order: the header,
// the data area in segSize pieces (whole dCP blocks of containers that
// are multiples of the block size: a block straddles pieces only after a
// container that is not), the metadata in pieces of the same size, the
// file block.
func (r *Reader) spans() []fileSpan {
	seg := segSize(r.fb.blockSize)
	fbOff := r.fb.fs - FBSize
	out := []fileSpan{{0, HeaderSize, vfd.MemSuper}}
	for _, part := range []fileSpan{{HeaderSize, r.fb.metaOff, vfd.MemDraw}, {r.fb.metaOff, fbOff, vfd.MemOHdr}} {
		for off := part.off; off < part.end; off += seg {
			out = append(out, fileSpan{off, min(off+seg, part.end), part.t})
		}
	}
	return append(out, fileSpan{fbOff, r.fb.fs, vfd.MemSuper})
}

// stream shows v the whole file in order and returns the first error:
// the checker's, or a read's.
func (r *Reader) stream(v *Verifier) error {
	spans := r.spans()
	if _, lends := r.f.(lender); lends {
		for _, sp := range spans {
			b, err := r.lend(sp.off, sp.end-sp.off)
			if err != nil {
				return err
			}
			if _, err := v.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	// Read ahead: one goroutine reads the pieces in order into a few
	// buffers while this one checks the piece before.
	type piece struct {
		b   []byte
		err error
	}
	const nbuf = 3
	seg := segSize(r.fb.blockSize)
	largest := int64(0)
	for _, sp := range spans {
		largest = max(largest, sp.end-sp.off)
	}
	free := make(chan []byte, nbuf)
	for range nbuf {
		free <- make([]byte, min(seg, largest))
	}
	full := make(chan piece, nbuf)
	stop := make(chan struct{})
	go func() {
		defer close(full)
		for _, sp := range spans {
			var buf []byte
			select {
			case buf = <-free:
			case <-stop:
				return
			}
			p := buf[:sp.end-sp.off]
			if err := r.readAt(sp.t, p, sp.off); err != nil {
				full <- piece{err: err}
				return
			}
			full <- piece{b: p}
		}
	}()
	var err error
	for pc := range full {
		if err != nil {
			continue // draining after a failure
		}
		if pc.err != nil {
			err = pc.err
			continue
		}
		if _, werr := v.Write(pc.b); werr != nil {
			err = werr
			close(stop)
			continue
		}
		free <- pc.b[:cap(pc.b)]
	}
	return err
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// segSize is the read granularity of the verifying read pipeline: a
// multiple of the block size near 4 MiB.
func segSize(bs uint32) int64 {
	const target = 4 << 20
	if int64(bs) >= target {
		return int64(bs)
	}
	return target / int64(bs) * int64(bs)
}

// readChunk reads chunk ci into dst (len = chunk size) and checks every
// block hash (unless the data was verified already, [WithVerifiedData]).
// Reading and hashing overlap: segments are read in order while workers
// hash the ones before.
func (r *Reader) readChunk(ci int, dst []byte) error {
	if r.moved == nil || r.chunk[ci].Compressed {
		return r.blocks(ci).Read(0, dst)
	}
	// WithMoveOut: hand the verified bytes over, once.
	if !r.moved[ci].CompareAndSwap(false, true) {
		return r.movedErr(ci)
	}
	c := &r.chunk[ci]
	b, err := r.lend(c.Fptr, c.Size)
	if err != nil {
		return err
	}
	vfd.MovePages(dst, b)
	return nil
}

// movedErr is the error of a chunk already handed over ([WithMoveOut]).
func (r *Reader) movedErr(ci int) error {
	c := &r.chunk[ci]
	return fmt.Errorf("%s: variable %d, chunk %d: %w", r.path, c.VarID, ci, ErrMovedOut)
}
