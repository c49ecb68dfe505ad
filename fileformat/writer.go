package fileformat

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/vfd"
)

// Write writes one FTI-FF file holding vars to f, laid out after prev (nil
// for a fresh layout), and returns the layout it used, to pass to the next
// Write, and a summary for the level's manifest.
//
// f is truncated to zero first. The data goes straight from each
// Var.Data to f (memory type vfd.MemDraw), hashed in blocks alongside the
// write; the metadata block (vfd.MemOHdr) and the file block (vfd.MemSuper)
// follow, the file block last, so a write cut anywhere leaves a file that
// fails [Open]. Write does not Sync or Close f; on error f holds a partial
// file that Open or [Reader.Verify] rejects.
func Write(f vfd.File, meta Meta, vars []Var, prev *Layout, opts ...Option) (*Layout, Summary, error) {
	o := buildOptions(opts)
	if o.blockSize < MinBlockSize || o.blockSize > MaxBlockSize {
		return nil, Summary{}, fmt.Errorf("%w: block size %d outside [%d, %d]", ErrInvalid, o.blockSize, MinBlockSize, MaxBlockSize)
	}
	if meta.Rank < 0 {
		return nil, Summary{}, fmt.Errorf("%w: rank %d", ErrInvalid, meta.Rank)
	}
	idx, err := checkVars(vars)
	if err != nil {
		return nil, Summary{}, err
	}
	ext, err := buildExt(&o, vars, idx)
	if err != nil {
		return nil, Summary{}, err
	}
	vars, extra := storeVars(vars)
	lay, err := plan(vars, prev)
	if err != nil {
		return nil, Summary{}, err
	}
	if meta.Timestamp == 0 {
		meta.Timestamp = o.clock().UnixNano()
	}
	w := &writer{f: f, o: o, vars: vars, idx: idx, ext: ext, extra: extra}
	sum, err := w.write(meta, lay)
	if err != nil {
		return nil, Summary{}, vfd.WrapPath(err, "write", f.Name())
	}
	o.logger.Debug("wrote FTI-FF file",
		zap.String("path", f.Name()), zap.Int64("ckpt-id", meta.CkptID), zap.Int32("rank", meta.Rank),
		zap.Int("vars", len(vars)), zap.Int("blocks", len(lay.Blocks)), zap.Int("chunks", len(sum.Chunks)),
		zap.Int64("file-size", sum.FileSize))
	return lay, sum, nil
}

// checkVars validates the variables and returns their index by id.
func checkVars(vars []Var) (map[int32]int, error) {
	idx := make(map[int32]int, len(vars))
	for i := range vars {
		v := &vars[i]
		if v.ID < 0 {
			return nil, fmt.Errorf("%w: variable id %d is negative", ErrInvalid, v.ID)
		}
		if _, dup := idx[v.ID]; dup {
			return nil, fmt.Errorf("%w: duplicate variable id %d", ErrInvalid, v.ID)
		}
		idx[v.ID] = i
		es, ok := elemSize(v.Type, v.ElemSize)
		if !ok {
			return nil, fmt.Errorf("%w: variable %d: element type %v with element size %d", ErrInvalid, v.ID, v.Type, v.ElemSize)
		}
		if len(v.Data)%int(es) != 0 {
			return nil, fmt.Errorf("%w: variable %d: %d bytes is not a multiple of element size %d", ErrInvalid, v.ID, len(v.Data), es)
		}
		if len(v.Name) > 0xffff {
			return nil, fmt.Errorf("%w: variable %d: name of %d bytes (max 65535)", ErrInvalid, v.ID, len(v.Name))
		}
		if v.Codec >= numCodecs {
			return nil, fmt.Errorf("%w: variable %d: codec %d", ErrInvalid, v.ID, v.Codec)
		}
		if err := checkLossy(v.Lossy, v.Type); err != nil {
			return nil, fmt.Errorf("variable %d: %w", v.ID, err)
		}
	}
	return idx, nil
}

// varExtra is what the file records of a variable beyond its stored
// bytes: its size in the program's memory and, for a lossy one, its
// mode's error.
type varExtra struct {
	logical int64
	bound   ErrorBound
}

// storeVars returns the variables as they are stored: a lossy one's Data
// replaced by its reduced values. extra is nil when none is lossy.
func storeVars(vars []Var) ([]Var, []varExtra) {
	lossy := false
	for i := range vars {
		lossy = lossy || vars[i].Lossy.Mode != Exact
	}
	if !lossy {
		return vars, nil
	}
	out := make([]Var, len(vars))
	extra := make([]varExtra, len(vars))
	for i, v := range vars {
		extra[i].logical = int64(len(v.Data))
		if v.Lossy.Mode != Exact {
			v.Data, extra[i].bound = lossyEncode(v.Lossy, v.Type, v.Data)
		}
		out[i] = v
	}
	return out, extra
}

// codecVersion reports whether vars need format version 3.
func codecVersion(vars []Var) bool {
	for i := range vars {
		if vars[i].Codec != CodecNone || vars[i].Lossy.Mode != Exact {
			return true
		}
	}
	return false
}

type writer struct {
	f     vfd.File
	o     options
	vars  []Var // as stored (lossy ones reduced)
	idx   map[int32]int
	ext   []byte     // extension area (version 2), nil for none
	extra []varExtra // nil when no variable is lossy
}

func (w *writer) write(meta Meta, lay *Layout) (Summary, error) {
	bs := w.o.blockSize
	im, err := placeImage(lay, w.vars, w.idx, bs, w.ext)
	if err != nil {
		return Summary{}, err
	}
	im.extra = w.extra
	chunks := im.chunks

	if err := w.f.Truncate(0); err != nil {
		return Summary{}, fmt.Errorf("truncate: %w", err)
	}
	hb := im.header(meta)
	if _, err := vfd.WriteAtType(w.f, vfd.MemSuper, hb[:], 0); err != nil {
		return Summary{}, fmt.Errorf("write header: %w", err)
	}

	if err := w.writeData(chunks, bs); err != nil {
		return Summary{}, err
	}
	im.relocate()
	var checksum [HashSize]byte
	if !w.o.noHash {
		checksum = fileChecksum(chunks)
	}

	mb := im.encodeMeta(w.vars, w.idx, lay)
	if _, err := vfd.WriteAtType(w.f, vfd.MemOHdr, mb, im.metaOff); err != nil {
		return Summary{}, fmt.Errorf("write metadata at %d: %w", im.metaOff, err)
	}

	// File block, last.
	var flags uint32
	if w.o.noHash {
		flags |= flagUnhashed
	}
	fbb := im.encodeFB(meta, hb, mb, checksum, flags, len(w.vars), len(lay.Blocks))
	if _, err := vfd.WriteAtType(w.f, vfd.MemSuper, fbb[:], im.fs-FBSize); err != nil {
		return Summary{}, fmt.Errorf("write file block at %d: %w", im.fs-FBSize, err)
	}
	if w.o.sync {
		if err := w.f.Sync(); err != nil {
			return Summary{}, fmt.Errorf("sync: %w", err)
		}
	}
	return im.summary(w.vars, checksum), nil
}

// summary describes the written image.
func (im *image) summary(vars []Var, checksum [HashSize]byte) Summary {
	s := Summary{FileSize: im.fs, DataSize: im.dataSize, Checksum: checksum, BlockSize: im.bs, Chunks: im.chunks}
	for i := range vars {
		s.Logical += im.logical(vars, i)
	}
	for i := range im.chunks {
		c := &im.chunks[i]
		if c.Compressed {
			s.Stored += c.StoredSize
		} else {
			s.Stored += c.Size
		}
	}
	return s
}

// logical is variable i's size in the program's memory.
func (im *image) logical(vars []Var, i int) int64 {
	if im.extra != nil {
		return im.extra[i].logical
	}
	return int64(len(vars[i].Data))
}

// relocate places the containers back to back at their extents (a
// compressed chunk takes its stored size) once every stored size is
// known, and the metadata block and the file block after them.
func (im *image) relocate() {
	fptr := int64(HeaderSize)
	for i := range im.chunks {
		im.chunks[i].Fptr = fptr
		fptr += im.chunks[i].extent()
	}
	im.metaOff = fptr
	im.fs = im.metaOff + im.metaSize + FBSize
}

// image is the placement of an FTI-FF file's parts: every chunk with its
// file offset and size (block hashes to be filled), the metadata block's
// offset and size, and the file size. Write and WriteDelta share it, so a
// delta's image is byte for byte the file Write would have produced.
type image struct {
	bs       uint32
	version  uint16
	ext      []byte     // extension area (version 2), nil for none
	extra    []varExtra // logical sizes and bounds (nil: none lossy)
	codec    []Codec    // per variable
	chunks   []ChunkInfo
	metaOff  int64
	metaSize int64
	fs       int64
	dataSize int64
	nbh      uint64
}

// placeImage places every container of lay for vars (idx: index by id).
func placeImage(lay *Layout, vars []Var, idx map[int32]int, bs uint32, ext []byte) (*image, error) {
	im := &image{bs: bs, version: Version, ext: ext}
	if ext != nil {
		im.version = VersionExt
	}
	if codecVersion(vars) {
		im.version = VersionCodec
		im.codec = make([]Codec, len(vars))
		for i := range vars {
			im.codec[i] = vars[i].Codec
		}
	}
	fptr := int64(HeaderSize)
	for bi, b := range lay.Blocks {
		for _, c := range b.Containers {
			vi := idx[c.VarID]
			v := &vars[vi]
			n := min(max(int64(len(v.Data))-c.Dptr, 0), c.Size)
			ci := ChunkInfo{
				VarID: c.VarID, Block: bi, Container: c.ID, Dptr: c.Dptr, Fptr: fptr,
				Size: n, ContainerSize: c.Size,
				BlockHashes: make([][HashSize]byte, numBlocks(n, bs)),
			}
			if v.Codec != CodecNone {
				ci.Compressed = true
				ci.Stored = make([]uint32, numBlocks(n, bs))
			}
			im.chunks = append(im.chunks, ci)
			fptr += c.Size
			im.dataSize += n
			im.nbh += uint64(numBlocks(n, bs))
		}
	}
	im.metaOff = fptr
	for i := range vars {
		im.metaSize += varRecordLen(len(vars[i].Name))
	}
	im.metaSize += int64(len(lay.Blocks))*BMDSize + int64(len(im.chunks))*VMDSize + int64(im.nbh)*HashSize + int64(len(ext))
	if im.version == VersionCodec {
		im.metaSize += codecTablesSize(im.nbh, len(vars))
	}
	if err := checkMetaSize(im.metaSize, bs); err != nil {
		return nil, err
	}
	im.fs = im.metaOff + im.metaSize + FBSize
	return im, nil
}

// header encodes the fixed header of the image written for meta.
func (im *image) header(meta Meta) [HeaderSize]byte {
	hdr := header{version: im.version, headerSize: HeaderSize, fbSize: FBSize,
		ckptID: meta.CkptID, rank: meta.Rank, level: meta.Level}
	return hdr.encode()
}

// encodeMeta encodes the metadata block: the variable records, each
// block's BMD and VMDs, the block hash table (chunk hashes and block
// hashes must be filled in).
func (im *image) encodeMeta(vars []Var, idx map[int32]int, lay *Layout) []byte {
	mb := make([]byte, im.metaSize)
	p := 0
	for i := range vars {
		v := &vars[i]
		es, _ := elemSize(v.Type, v.ElemSize)
		le.PutUint32(mb[p:], uint32(v.ID))
		mb[p+4] = uint8(v.Type)
		le.PutUint16(mb[p+6:], uint16(len(v.Name)))
		le.PutUint32(mb[p+8:], es)
		le.PutUint64(mb[p+16:], uint64(im.logical(vars, i)))
		if im.version == VersionCodec {
			mb[p+5] = uint8(v.Codec)
			mb[p+12] = uint8(v.Lossy.Mode)
			mb[p+13] = v.Lossy.Bits
		}
		copy(mb[p+VarRecordSize:], v.Name)
		p += int(varRecordLen(len(v.Name)))
	}
	var bh uint64
	ci := 0
	for _, b := range lay.Blocks {
		le.PutUint32(mb[p:], uint32(len(b.Containers)))
		var dbsize int64
		for k := range b.Containers {
			dbsize += im.chunks[ci+k].extent()
		}
		le.PutUint64(mb[p+8:], uint64(dbsize))
		p += BMDSize
		for range b.Containers {
			c := &im.chunks[ci]
			r := vmd{id: c.VarID, idx: uint32(idx[c.VarID]), container: c.Container,
				dptr: c.Dptr, fptr: c.Fptr, chunkSize: c.Size, contSize: c.ContainerSize,
				firstBHash: bh, hash: c.Hash}
			if c.Size > 0 {
				r.hasContent = 1
			}
			r.put(mb[p:])
			p += VMDSize
			bh += uint64(len(c.BlockHashes))
			ci++
		}
	}
	for i := range im.chunks {
		for _, h := range im.chunks[i].BlockHashes {
			copy(mb[p:], h[:])
			p += HashSize
		}
	}
	if im.version == VersionCodec {
		p = im.encodeCodecTables(mb, p, vars)
	}
	copy(mb[p:], im.ext)
	return mb
}

// codecTablesSize is the size of a version-3 file's stored-size table
// (nbh u32, padded to 8 bytes) and error-bound table (16 bytes a variable).
func codecTablesSize(nbh uint64, nvars int) int64 {
	return pad8(4*int64(nbh)) + 16*int64(nvars)
}

// encodeCodecTables writes the stored size of every block (raw blocks at
// their length) and every variable's error bound at p; it returns the
// offset after them.
func (im *image) encodeCodecTables(mb []byte, p int, vars []Var) int {
	start := p
	for i := range im.chunks {
		c := &im.chunks[i]
		for j := range c.BlockHashes {
			le.PutUint32(mb[p:], uint32(c.storedLen(j, im.bs)))
			p += 4
		}
	}
	p = start + int(pad8(int64(p-start)))
	for i := range vars {
		var eb ErrorBound
		if im.extra != nil {
			eb = im.extra[i].bound
		}
		le.PutUint64(mb[p:], math.Float64bits(eb.Abs))
		le.PutUint64(mb[p+8:], math.Float64bits(eb.Rel))
		p += 16
	}
	return p
}

// encodeFB encodes the file block, its own hash included, for the header
// hb and metadata block mb.
func (im *image) encodeFB(meta Meta, hb [HeaderSize]byte, mb []byte, checksum [HashSize]byte, flags uint32, nvars, nblocks int) [FBSize]byte {
	if im.version == VersionCodec && im.ext != nil {
		flags |= flagExt
	}
	fb := fileBlock{
		version: im.version, fbSize: FBSize, flags: flags, blockSize: im.bs,
		numVars: uint32(nvars), numBlocks: uint32(nblocks), numChunks: uint32(len(im.chunks)),
		ckptSize: im.dataSize, fs: im.fs, maxFs: meta.MaxFs, ptFs: meta.PtFs, timestamp: meta.Timestamp,
		metaOff: im.metaOff, metaSize: im.metaSize, numBHashes: im.nbh,
		metaHash: b3.Sum256(mb), checksum: checksum,
	}
	fbb := fb.encode()
	h := fbHash(hb[:], fbb[:])
	copy(fbb[fbHashOff:], h[:])
	return fbb
}

func (w *writer) chunkData(c *ChunkInfo) []byte {
	if c.Size == 0 {
		return nil
	}
	return w.vars[w.idx[c.VarID]].Data[c.Dptr : c.Dptr+c.Size]
}

// writebackPiece is the piece of chunk data written before its writeback
// is started (vfd.StartWriteback), so that the device works while the
// rest is copied and hashed and the final fsync has less left to wait
// for. Measured with BenchmarkCheckpointPaired/L1 (4 × 64 MiB): 0.94-1.05×
// raw with it, 1.02-1.18× without; neutral at L2 and L3.
const writebackPiece = 16 << 20

// writeStarting writes b at off in writebackPiece pieces, starting the
// writeback of each (a hint; a driver without it ignores it).
func writeStarting(f vfd.File, b []byte, off int64) error {
	for o := 0; o < len(b); o += writebackPiece {
		e := min(o+writebackPiece, len(b))
		if _, err := vfd.WriteAtType(f, vfd.MemDraw, b[o:e], off+int64(o)); err != nil {
			return fmt.Errorf("at %d: %w", off+int64(o), err)
		}
		_ = vfd.StartWriteback(f, off+int64(o), int64(e-o))
	}
	return nil
}

// writeData writes every chunk from the variable's memory to the file
// while a goroutine hashes the chunks from the same memory (blocks of
// large chunks spread over the hash workers, which yield their processor
// every MiB so that the writer gets one as soon as a write returns). With WithSync it then syncs
// the data while the hashing finishes, so the device's flush time hides
// the hashing time; the caller writes the metadata and the file block
// afterwards, so they become durable only after the data. A compressed
// chunk is compressed and hashed by the workers in groups of blocks and
// written group after group at the end of what is written so far
// (writeCompressed); every chunk's Fptr is set here.
func (w *writer) writeData(chunks []ChunkInfo, bs uint32) error {
	var hashed chan struct{}
	if !w.o.noHash {
		hashed = make(chan struct{})
		go func() {
			defer close(hashed)
			for i := range chunks {
				c := &chunks[i]
				if c.Compressed {
					continue
				}
				hashBlocksYield(w.chunkData(c), bs, c.BlockHashes, w.o.workers, true)
				c.Hash = chunkHash(c.Size, bs, c.BlockHashes)
			}
		}()
	}
	var err error
	var compressed []func() // each waits for a compressed chunk's hashes
	off := int64(HeaderSize)
	for i := range chunks {
		c := &chunks[i]
		c.Fptr = off
		if c.Compressed {
			done, werr := w.writeCompressed(c, bs)
			if werr != nil {
				err = fmt.Errorf("write var %d chunk %d: %w", c.VarID, i, werr)
				break
			}
			compressed = append(compressed, done)
			off += c.StoredSize
			continue
		}
		off += c.ContainerSize
		if c.Size == 0 {
			continue
		}
		if werr := writeStarting(w.f, w.chunkData(c), c.Fptr); werr != nil {
			err = fmt.Errorf("write var %d chunk %d: %w", c.VarID, i, werr)
			break
		}
	}
	if err == nil && w.o.sync {
		if serr := w.f.Sync(); serr != nil {
			err = fmt.Errorf("sync data: %w", serr)
		}
	}
	if hashed != nil {
		<-hashed
	}
	for _, done := range compressed {
		done()
	}
	return err
}

// compressGroup is how many bytes of a chunk one worker compresses and
// hashes as one piece, and the writer writes as one piece.
// 1 MiB keeps the first write close to the start of the chunk.
const compressGroup = 1 << 20

// probeEvery is how often a block is tried again after one that did not
// shrink: the blocks in between are stored raw without an attempt, so
// incompressible data costs a compression of one block in probeEvery.
const probeEvery = 16

// group is a range of blocks of a compressed chunk, compressed and hashed
// on a worker; out holds their stored forms back to back (nil when all
// are raw: the writer writes them from the variable's memory).
type group struct {
	lo, hi int
	out    []byte
	err    error
	// ready is closed once the stored form is known (out and err set),
	// done once the blocks are hashed too. The writer writes a group at
	// ready: hashing does not hold the write back.
	ready, done chan struct{}
}

// writeCompressed compresses, hashes and writes the compressed chunk c
// at c.Fptr and sets its stored sizes and StoredSize. Groups are
// compressed by up to w.o.workers goroutines, at most twice that many in
// flight, and written in order as their stored forms are known; each
// group's blocks are hashed after that, beside the writes. hashed waits
// for the last hash and sets the chunk hash: the caller calls it once
// the data is written, and synced, so the sync overlaps the hashing as
// for a raw chunk.
func (w *writer) writeCompressed(c *ChunkInfo, bs uint32) (hashed func(), err error) {
	data := w.chunkData(c)
	groups := compressGroups(c, bs)
	sem := make(chan struct{}, 2*w.o.workers)
	stop := make(chan struct{})
	go func() {
		for i := range groups {
			select {
			case sem <- struct{}{}:
			case <-stop:
				return
			}
			go func(g *group) {
				defer func() { <-sem }()
				w.compressOne(c, data, bs, g)
			}(&groups[i])
		}
	}()
	defer close(stop)
	off := c.Fptr
	for i := range groups {
		g := &groups[i]
		<-g.ready
		if g.err != nil {
			return nil, g.err
		}
		b := g.out
		if b == nil {
			b = data[int64(g.lo)*int64(bs) : min(int64(g.hi)*int64(bs), c.Size)]
		}
		werr := writeStarting(w.f, b, off)
		putGroupBuf(g.out)
		if werr != nil {
			// Groups still being compressed or hashed finish on their
			// own; their buffers are left to the collector.
			return nil, werr
		}
		off += int64(len(b))
	}
	c.StoredSize = off - c.Fptr
	return func() {
		for i := range groups {
			<-groups[i].done
		}
		if !w.o.noHash {
			c.Hash = chunkHash(c.Size, bs, c.BlockHashes)
		}
	}, nil
}

// compressGroups cuts chunk c into groups of about compressGroup bytes.
func compressGroups(c *ChunkInfo, bs uint32) []group {
	per := max(1, compressGroup/int(bs))
	n := len(c.BlockHashes)
	out := make([]group, 0, (n+per-1)/per)
	for lo := 0; lo < n; lo += per {
		out = append(out, group{lo: lo, hi: min(lo+per, n), ready: make(chan struct{}), done: make(chan struct{})})
	}
	return out
}

// compressOne compresses the blocks of g with a pooled encoder, then
// hashes them.
func (w *writer) compressOne(c *ChunkInfo, data []byte, bs uint32, g *group) {
	defer close(g.done)
	enc, err := getEncoder()
	if err != nil {
		g.err = err
		close(g.ready)
		return
	}
	g.out = compressBlocks(enc, data, bs, g.lo, g.hi, c.Stored)
	putEncoder(enc)
	close(g.ready)
	if w.o.noHash {
		return
	}
	// The writer, woken by ready, runs next on this processor: it issues
	// the group's write while this goroutine waits to hash.
	runtime.Gosched()
	hashGroup(data, bs, g.lo, g.hi, c.BlockHashes)
}

// hashGroup sets the hashes of blocks [lo, hi) of data: an all-zero
// block's is known, the others are hashed.
func hashGroup(data []byte, bs uint32, lo, hi int, hashes [][HashSize]byte) {
	for j := lo; j < hi; j++ {
		b := blockOf(data, j, bs)
		if z := zeroOf(b); z != nil {
			hashes[j] = z.hash
		} else {
			hashes[j] = BlockHash(b)
		}
	}
}

var groupBufs sync.Pool

func getGroupBuf() []byte {
	if b, ok := groupBufs.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, compressGroup+compressGroup/8)
}

func putGroupBuf(b []byte) {
	if b != nil {
		groupBufs.Put(&b)
	}
}

// compressBlocks compresses blocks [lo, hi) of data into one buffer,
// setting their stored sizes; [hashGroup] hashes them. It returns nil
// when every block is stored raw, having copied none of them. A block of
// mostly zero words takes the word-sparse form (appendSparse). The first
// other block is probed on a sample (sampleShrinks) before it is compressed
// whole. After a block that did not shrink, the next probeEvery-1 are
// stored raw and the one after is probed again: incompressible data
// costs a compression of a few KiB in probeEvery blocks.
func compressBlocks(enc compressor, data []byte, bs uint32, lo, hi int, stored []uint32) []byte {
	out := getGroupBuf()
	skip := 0
	failing := true
	// pending: every block so far is raw and out holds none of them yet;
	// the first stored form that is not raw copies them into out first,
	// so a group of incompressible blocks is never copied.
	pending := true
	flush := func(j int) {
		if pending {
			out = append(out, data[int64(lo)*int64(bs):int64(j)*int64(bs)]...)
			pending = false
		}
	}
	// place puts the stored form of block j, appended at out[start:],
	// after the raw blocks still pending (once per group at most).
	place := func(j, start int) {
		if !pending {
			return
		}
		f := append([]byte(nil), out[start:]...)
		out = out[:start]
		flush(j)
		out = append(out, f...)
	}
	var scratch []byte
	for j := lo; j < hi; j++ {
		b := blockOf(data, j, bs)
		if z := zeroOf(b); z != nil {
			// Zeros: a known frame, no encoder.
			flush(j)
			out = append(out, z.frame...)
			stored[j] = uint32(len(z.frame))
			continue
		}
		start := len(out)
		if o, ok := appendSparse(out, b); ok {
			// Mostly zero words: stored word-sparse, no encoder.
			out, stored[j] = o, uint32(len(o)-start)
			place(j, start)
			continue
		}
		raw := skip > 0
		if raw {
			skip--
		} else if failing && len(b) > probeSample {
			var ok bool
			ok, scratch = sampleShrinks(enc, scratch, b)
			if !ok {
				raw, skip = true, probeEvery-1
			}
		}
		if raw {
			if !pending {
				out = append(out, b...)
			}
			stored[j] = uint32(len(b))
			continue
		}
		out, stored[j] = encodeBlock(enc, out, b) // zero and word-sparse tried above
		failing = stored[j] == uint32(len(b))
		if failing {
			skip = probeEvery - 1
			if pending {
				out = out[:start] // still all raw: nothing kept
			}
		} else {
			place(j, start)
		}
	}
	if pending {
		putGroupBuf(out)
		return nil
	}
	return out
}

// checkMetaSize refuses a metadata block larger than readers accept.
func checkMetaSize(n int64, bs uint32) error {
	if n > MaxMetaSize {
		return fmt.Errorf("%w: metadata block of %d bytes exceeds MaxMetaSize (%d): use a larger block size than %d (WithBlockSize), or fewer variable fragments",
			ErrInvalid, n, int64(MaxMetaSize), bs)
	}
	return nil
}
