package fileformat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/vfd"
)

// Delta is an opened delta file (docs/format/dcp.md): its header and
// trailer checked, its image's metadata parsed and checked as an FTI-FF
// reader checks a file's, its run table checked against the image. The
// data of the runs is verified by [Delta.Verify] and, in a chain, by
// whoever reads the image ([OpenImage]). A Delta does not own its file.
type Delta struct {
	f    vfd.File
	path string
	o    options
	hdr  deltaHeader
	hb   [DeltaHeaderSize]byte
	tr   deltaTrailer
	trb  [DeltaTrailerSize]byte
	img  *Reader // the image's metadata, read through imageMeta
	view *imageMeta
	runs []deltaRun
}

// deltaRun is a run with the offset of its data in the delta file.
type deltaRun struct {
	Run
	off int64
}

func (d *Delta) corrupt(varID int32, chunk int, off int64, err error) error {
	return &CorruptionError{Path: d.path, Rank: int(d.hdr.rank), VarID: varID, Chunk: chunk, Offset: off, Err: err}
}

func (d *Delta) fileErr(off int64, err error, format string, args ...any) error {
	rank := -1
	if d.hdr.headerSize != 0 {
		rank = int(d.hdr.rank)
	}
	return &CorruptionError{Path: d.path, Rank: rank, VarID: -1, Chunk: -1, Offset: off, Err: fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...))}
}

func (d *Delta) readAt(t vfd.MemType, p []byte, off int64) error {
	n, err := vfd.ReadAtType(d.f, t, p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return d.fileErr(off+int64(n), ErrTruncated, "file ends inside a %d-byte read at %d", len(p), off)
	}
	return vfd.WrapPathAt(err, "read", d.path, off)
}

// IsDelta reports whether the first bytes of a file (at least 8) are a
// delta file's magic.
func IsDelta(head []byte) bool { return len(head) >= 8 && bytes.Equal(head[:8], deltaMagic[:]) }

// OpenDelta reads and checks a delta file's header, trailer, metadata and
// run table; it reads no block data. Errors about the content are
// *[CorruptionError]s wrapping [ErrNotFTIFF] (not a delta file),
// [ErrVersion], [ErrTruncated], [ErrHashMismatch] or [ErrCorrupt]. Sizes
// and counts are checked against each other and the file's size before
// anything is allocated. OpenDelta uses [WithLogger] and [WithHashWorkers].
func OpenDelta(f vfd.File, opts ...Option) (*Delta, error) {
	d := &Delta{f: f, path: f.Name(), o: buildOptions(opts)}
	if err := d.open(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Delta) open() error {
	size, err := d.f.Size()
	if err != nil {
		return vfd.WrapPath(err, "size of", d.path)
	}
	if err := d.readFrame(size); err != nil {
		return err
	}
	dmSize, err := d.checkTrailer(size)
	if err != nil {
		return err
	}
	if err := d.checkDMHash(dmSize); err != nil {
		return err
	}
	if err := d.openImage(); err != nil {
		return err
	}
	tr := d.tr
	return d.readRuns(tr.dmOff + HeaderSize + tr.imgMetaSize + FBSize)
}

// readFrame reads and checks the header (d.hdr) and finds the trailer
// (kept in d.trb) of a size-byte delta file.
func (d *Delta) readFrame(size int64) error {
	hn := min(size, DeltaHeaderSize)
	if err := d.readAt(vfd.MemSuper, d.hb[:hn], 0); err != nil {
		return err
	}
	if hn < DeltaHeaderSize {
		if bytes.HasPrefix(deltaMagic[:], d.hb[:min(hn, 8)]) {
			return d.fileErr(hn, ErrTruncated, "%d bytes, shorter than the header", size)
		}
		return fmt.Errorf("%s: %w (not a delta file)", d.path, ErrNotFTIFF)
	}
	trailerOK := false
	if size >= DeltaHeaderSize+DeltaTrailerSize {
		if err := d.readAt(vfd.MemSuper, d.trb[:], size-DeltaTrailerSize); err != nil {
			return err
		}
		trailerOK = bytes.Equal(d.trb[:8], dtMagic[:])
	}
	if !bytes.Equal(d.hb[:8], deltaMagic[:]) {
		if trailerOK {
			return d.fileErr(0, ErrCorrupt, "bad header magic %x but a delta trailer", d.hb[:8])
		}
		return fmt.Errorf("%s: %w (not a delta file)", d.path, ErrNotFTIFF)
	}
	hdr, resOK := decodeDeltaHeader(d.hb[:])
	if hdr.version != DeltaVersion {
		if trailerOK && le.Uint16(d.trb[8:]) == hdr.version {
			return d.fileErr(8, ErrVersion, "delta version %d (this reader knows %d)", hdr.version, DeltaVersion)
		}
		return d.fileErr(8, ErrCorrupt, "header version %d does not match the trailer", hdr.version)
	}
	if hdr.headerSize != DeltaHeaderSize || hdr.trailerSize != DeltaTrailerSize || !resOK || hdr.rank < 0 {
		return d.fileErr(10, ErrCorrupt, "header size %d, trailer size %d, rank %d, reserved bytes", hdr.headerSize, hdr.trailerSize, hdr.rank)
	}
	d.hdr = hdr
	if !trailerOK {
		return d.fileErr(max(size-DeltaTrailerSize, DeltaHeaderSize), ErrTruncated, "no delta trailer at the end of the %d-byte file", size)
	}
	return nil
}

// checkTrailer checks the trailer's hash and fields against the file and
// sets d.tr; it returns the size of the delta metadata (DM: image header,
// image MB, image FB, run table).
func (d *Delta) checkTrailer(size int64) (int64, error) {
	hdr := d.hdr
	trOff := size - DeltaTrailerSize
	if h := deltaHash(d.hb[:], d.trb[:]); !bytes.Equal(h[:], d.trb[dtHashOff:]) {
		return 0, d.fileErr(trOff+dtHashOff, ErrHashMismatch, "delta trailer hash")
	}
	tr, trResOK := decodeDeltaTrailer(d.trb[:])
	d.tr = tr
	switch {
	case tr.version != hdr.version || tr.trailerSize != DeltaTrailerSize || tr.flags != 0 || !trResOK:
		return 0, d.fileErr(trOff+8, ErrCorrupt, "trailer version %d size %d flags %#x", tr.version, tr.trailerSize, tr.flags)
	case tr.fs > size:
		return 0, d.fileErr(size, ErrTruncated, "file is %d bytes, trailer says %d", size, tr.fs)
	case tr.fs != size:
		return 0, d.fileErr(trOff+40, ErrCorrupt, "file is %d bytes, trailer says %d", size, tr.fs)
	case tr.imgMetaSize < 0 || tr.imgMetaSize > MaxMetaSize:
		return 0, d.fileErr(trOff+32, ErrCorrupt, "image metadata of %d bytes", tr.imgMetaSize)
	case tr.dmOff < DeltaHeaderSize || tr.dmOff > trOff:
		return 0, d.fileErr(trOff+24, ErrCorrupt, "delta metadata at %d", tr.dmOff)
	case tr.nruns > uint64(trOff-tr.dmOff)/RunSize:
		return 0, d.fileErr(trOff+16, ErrCorrupt, "%d runs do not fit in the file", tr.nruns)
	}
	dmSize := HeaderSize + tr.imgMetaSize + FBSize + int64(tr.nruns)*RunSize
	if tr.dmOff+dmSize != trOff {
		return 0, d.fileErr(trOff+24, ErrCorrupt, "delta metadata at %d of %d bytes (%d runs, image metadata %d bytes) does not end at the trailer (%d)",
			tr.dmOff, dmSize, tr.nruns, tr.imgMetaSize, trOff)
	}
	return dmSize, nil
}

// checkDMHash streams the delta metadata through its hash and compares
// it with the trailer's.
func (d *Delta) checkDMHash(dmSize int64) error {
	tr := d.tr
	h := b3.New()
	buf := make([]byte, min(dmSize, metaBuf))
	for off := int64(0); off < dmSize; off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), dmSize-off)]
		if err := d.readAt(vfd.MemOHdr, p, tr.dmOff+off); err != nil {
			return err
		}
		_, _ = h.Write(p)
	}
	var dmh [HashSize]byte
	h.Sum(dmh[:0])
	if dmh != tr.dmHash {
		return d.fileErr(tr.dmOff, ErrHashMismatch, "delta metadata hash")
	}
	return nil
}

// openImage reads the image's header and FB, checks them against the
// delta's header and the trailer, and opens the image's whole metadata
// through an FTI-FF reader over a view of the file (d.img).
func (d *Delta) openImage() error {
	tr := d.tr
	var ihb [HeaderSize]byte
	var ifb [FBSize]byte
	if err := d.readAt(vfd.MemSuper, ihb[:], tr.dmOff); err != nil {
		return err
	}
	fbAt := tr.dmOff + HeaderSize + tr.imgMetaSize
	if err := d.readAt(vfd.MemSuper, ifb[:], fbAt); err != nil {
		return err
	}
	if !bytes.Equal(ifb[:8], fbMagic[:]) || !bytes.Equal(ihb[:8], headerMagic[:]) {
		return d.fileErr(tr.dmOff, ErrCorrupt, "the image's header or file block has a bad magic")
	}
	if h := fbHash(ihb[:], ifb[:]); !bytes.Equal(h[:], ifb[fbHashOff:]) {
		return d.fileErr(fbAt+fbHashOff, ErrHashMismatch, "the image's file block hash")
	}
	ih := decodeHeader(ihb[:])
	ifbd := decodeFB(ifb[:])
	switch {
	case ih.ckptID != d.hdr.ckptID || ih.rank != d.hdr.rank || ih.level != d.hdr.level:
		return d.fileErr(tr.dmOff+16, ErrCorrupt, "image of checkpoint %d rank %d level %d in a delta of checkpoint %d rank %d level %d",
			ih.ckptID, ih.rank, ih.level, d.hdr.ckptID, d.hdr.rank, d.hdr.level)
	case ifbd.metaSize != tr.imgMetaSize || ifbd.fs < HeaderSize+FBSize || ifbd.metaOff+ifbd.metaSize+FBSize != ifbd.fs:
		return d.fileErr(fbAt+72, ErrCorrupt, "image metadata at %d of %d bytes in a %d-byte image, trailer says %d bytes",
			ifbd.metaOff, ifbd.metaSize, ifbd.fs, tr.imgMetaSize)
	case ifbd.flags&flagUnhashed != 0:
		return d.fileErr(fbAt+12, ErrCorrupt, "the image carries no block hashes")
	}
	d.view = &imageMeta{d: d, hb: ihb, fbb: ifb, fs: ifbd.fs, metaOff: ifbd.metaOff, metaSize: ifbd.metaSize}
	img, err := Open(d.view, WithLogger(d.o.logger), WithHashWorkers(d.o.workers))
	if err != nil {
		var ce *CorruptionError
		if errors.As(err, &ce) {
			// Name the delta file and the offset of the bad bytes in it.
			ce.Path = d.path
			if ce.Offset >= 0 {
				ce.Offset = d.view.fileOffset(ce.Offset)
			}
		}
		return err
	}
	d.img = img
	return nil
}

// readRuns reads and checks the run table at off.
func (d *Delta) readRuns(off int64) error {
	chunks := d.img.chunk
	bs := int64(d.img.fb.blockSize)
	d.runs = make([]deltaRun, 0, min(d.tr.nruns, 4096))
	data := int64(DeltaHeaderSize)
	var b [RunSize]byte
	buf := make([]byte, min(int64(d.tr.nruns)*RunSize, metaBuf))
	var prev Run
	for i := uint64(0); i < d.tr.nruns; {
		n := min(uint64(len(buf))/RunSize, d.tr.nruns-i)
		at := off + int64(i)*RunSize
		if err := d.readAt(vfd.MemOHdr, buf[:n*RunSize], at); err != nil {
			return err
		}
		for k := uint64(0); k < n; k++ {
			copy(b[:], buf[k*RunSize:])
			r := Run{Chunk: int(le.Uint32(b[0:])), First: int(le.Uint32(b[4:])), Count: int(le.Uint32(b[8:]))}
			ro := at + int64(k)*RunSize
			if le.Uint32(b[12:]) != 0 {
				return d.fileErr(ro+12, ErrCorrupt, "run %d: non-zero reserved bytes", i+k)
			}
			if r.Chunk >= len(chunks) || r.Count < 1 || r.First+r.Count > len(chunks[r.Chunk].BlockHashes) || r.First < 0 {
				return d.fileErr(ro, ErrCorrupt, "run %d: chunk %d blocks %d+%d outside the image", i+k, r.Chunk, r.First, r.Count)
			}
			if i+k > 0 && (r.Chunk < prev.Chunk || (r.Chunk == prev.Chunk && r.First < prev.First+prev.Count)) {
				return d.fileErr(ro, ErrCorrupt, "run %d: chunk %d block %d does not follow the run before (chunk %d blocks %d+%d)",
					i+k, r.Chunk, r.First, prev.Chunk, prev.First, prev.Count)
			}
			c := &chunks[r.Chunk]
			so := d.img.soffOf(r.Chunk)
			n := blockStart(c, so, r.First+r.Count, bs) - blockStart(c, so, r.First, bs)
			d.runs = append(d.runs, deltaRun{Run: r, off: data})
			data += n
			if data > d.tr.dmOff {
				return d.fileErr(ro, ErrCorrupt, "run %d: the runs hold more than the %d bytes of block data", i+k, d.tr.dmOff-DeltaHeaderSize)
			}
			prev = r
		}
		i += n
	}
	if data != d.tr.dmOff {
		return d.fileErr(d.tr.dmOff, ErrCorrupt, "the runs hold %d bytes, the block data is %d bytes", data-DeltaHeaderSize, d.tr.dmOff-DeltaHeaderSize)
	}
	return nil
}

// Meta returns the image's metadata (checkpoint id, rank, level, timestamp).
func (d *Delta) Meta() Meta { return d.img.Meta() }

// ParentChecksum returns the file checksum of the image this delta applies to.
func (d *Delta) ParentChecksum() [HashSize]byte { return d.hdr.parent }

// Image returns a reader of the image's metadata: its variables, layout and
// summary (chunks with their block hashes, the file checksum). Reading
// variables through it fails: use [OpenImage].
func (d *Delta) Image() *Reader { return d.img }

// Runs returns the runs of blocks the delta stores.
func (d *Delta) Runs() []Run {
	out := make([]Run, len(d.runs))
	for i, r := range d.runs {
		out[i] = r.Run
	}
	return out
}

// Written returns the number of variable bytes the delta stores.
func (d *Delta) Written() int64 { return d.tr.dmOff - DeltaHeaderSize }

// Verify re-reads the header, the trailer and the delta metadata and
// checks them against what Open read, then reads every run and checks
// every block against the image's block hash. Memory use is bounded.
func (d *Delta) Verify() error {
	size, err := d.f.Size()
	if err != nil {
		return vfd.WrapPath(err, "size of", d.path)
	}
	if size != d.tr.fs {
		return d.fileErr(min(size, d.tr.fs), ErrTruncated, "file is %d bytes, trailer says %d", size, d.tr.fs)
	}
	var hb [DeltaHeaderSize]byte
	var trb [DeltaTrailerSize]byte
	if err := d.readAt(vfd.MemSuper, hb[:], 0); err != nil {
		return err
	}
	if err := d.readAt(vfd.MemSuper, trb[:], size-DeltaTrailerSize); err != nil {
		return err
	}
	if i := firstDiff(hb[:], d.hb[:]); i >= 0 {
		return d.fileErr(int64(i), ErrHashMismatch, "header changed since open")
	}
	if i := firstDiff(trb[:], d.trb[:]); i >= 0 {
		return d.fileErr(size-DeltaTrailerSize+int64(i), ErrHashMismatch, "trailer changed since open")
	}
	h := b3.New()
	dmSize := size - DeltaTrailerSize - d.tr.dmOff
	buf := make([]byte, min(max(dmSize, 1<<16), metaBuf))
	for off := int64(0); off < dmSize; off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), dmSize-off)]
		if err := d.readAt(vfd.MemOHdr, p, d.tr.dmOff+off); err != nil {
			return err
		}
		_, _ = h.Write(p)
	}
	var dmh [HashSize]byte
	h.Sum(dmh[:0])
	if dmh != d.tr.dmHash {
		return d.fileErr(d.tr.dmOff, ErrHashMismatch, "delta metadata hash")
	}
	return d.verifyRuns()
}

// verifyRuns reads every run and checks each block against the image's
// block hash, a segment at a time.
func (d *Delta) verifyRuns() error {
	bs := int64(d.img.fb.blockSize)
	seg := segSize(d.img.fb.blockSize)
	var buf []byte
	for _, run := range d.runs {
		c := &d.img.chunk[run.Chunk]
		first := int64(run.First)
		b := &b3.Blocks{
			Len: c.Size, BlockSize: bs, Segment: seg, Workers: d.o.workers,
			ReadAt: func(p []byte, off int64) error {
				return d.readAt(vfd.MemDraw, p, run.off+off-first*bs)
			},
			Want: func(j int64) [HashSize]byte { return c.BlockHashes[j] },
			Mismatch: func(j int64) error {
				return d.corrupt(c.VarID, run.Chunk, run.off+(j-first)*bs, fmt.Errorf("%w: block %d of chunk", ErrHashMismatch, j))
			},
		}
		if c.Compressed {
			soff := d.img.soffOf(run.Chunk)
			at := func(j int64) int64 { return run.off + soff[j] - soff[first] }
			b.Mismatch = func(j int64) error {
				return d.corrupt(c.VarID, run.Chunk, at(j), fmt.Errorf("%w: block %d of chunk (compressed)", ErrHashMismatch, j))
			}
			var zero []bool
			zero, b.Checked = zeroChecks(c, d.img.fb.blockSize)
			b.ReadAt = decodingReadAt(c, soff, bs, d.o.workers, zero, func(p []byte, off int64) error {
				return d.readAt(vfd.MemDraw, p, run.off+off-soff[first])
			}, func(j int64, err error) error {
				return d.corrupt(c.VarID, run.Chunk, at(j), fmt.Errorf("%w: block %d of chunk: %v", ErrHashMismatch, j, err))
			})
		}
		end := min(int64(run.First+run.Count)*bs, c.Size)
		for off := first * bs; off < end; off += seg {
			n := min(seg, end-off)
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			if err := b.Read(off/bs, buf[:n]); err != nil {
				return err
			}
		}
	}
	return nil
}

// imageMeta presents an image's header, metadata block and file block,
// stored in a delta file, at the offsets an FTI-FF file has them, so that
// the FTI-FF reader checks them. Its data region cannot be read.
type imageMeta struct {
	d                 *Delta
	hb                [HeaderSize]byte
	fbb               [FBSize]byte
	fs                int64
	metaOff, metaSize int64
}

var errNoData = errors.New("fileformat: the data of a delta's image is read through OpenImage")

func (m *imageMeta) Name() string { return m.d.path }

func (m *imageMeta) Size() (int64, error) { return m.fs, nil }

// fileOffset maps an offset in the image's metadata to the delta file.
func (m *imageMeta) fileOffset(off int64) int64 {
	dm := m.d.tr.dmOff
	switch {
	case off < HeaderSize:
		return dm + off
	case off >= m.metaOff && off < m.metaOff+m.metaSize:
		return dm + HeaderSize + off - m.metaOff
	case off >= m.fs-FBSize:
		return dm + HeaderSize + m.metaSize + off - (m.fs - FBSize)
	}
	return dm
}

func (m *imageMeta) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		o := off + int64(n)
		var k int
		switch {
		case o < 0 || o >= m.fs:
			return n, io.EOF
		case o < HeaderSize:
			k = copy(p[n:], m.hb[o:])
		case o >= m.fs-FBSize:
			k = copy(p[n:], m.fbb[o-(m.fs-FBSize):])
		case o >= m.metaOff && o < m.metaOff+m.metaSize:
			k = int(min(int64(len(p)-n), m.metaOff+m.metaSize-o))
			if err := m.d.readAt(vfd.MemOHdr, p[n:n+k], m.d.tr.dmOff+HeaderSize+o-m.metaOff); err != nil {
				return n, err
			}
		default:
			return n, errNoData
		}
		n += k
	}
	return n, nil
}

func (m *imageMeta) WriteAt([]byte, int64) (int, error) { return 0, vfd.ErrReadOnly }
func (m *imageMeta) Truncate(int64) error               { return vfd.ErrReadOnly }
func (m *imageMeta) Sync() error                        { return nil }
func (m *imageMeta) Close() error                       { return nil }

// Image is the FTI-FF image of the last layer of a chain (a full file and
// the deltas after it) presented as a read-only file: it reads exactly as
// the full file of that checkpoint would, each data block taken from the
// newest layer that stores it. [Open] on it gives an ordinary [Reader],
// whose reads check every block against the image's hashes; copying it
// gives the image's FTI-FF file byte for byte.
type Image struct {
	layers []vfd.File
	name   string
	bs     int64
	// The last image's header, file block and metadata location.
	hb                [HeaderSize]byte
	fbb               [FBSize]byte
	fs                int64
	metaOff, metaSize int64
	metaFile          vfd.File // holds the metadata block ...
	metaAt            int64    // ... at this offset
	chunks            []ChunkInfo
	soff              [][]int64    // per compressed chunk, its blocks' stored offsets
	locs              [][]blockLoc // per chunk, where each block's bytes are
	checksum          [HashSize]byte
	closed            bool
}

// blockLoc is where a block's bytes are: layer and offset in its file.
type blockLoc struct {
	layer int32
	off   int64
}

// blockStart returns the offset of block j's stored form from the start
// of chunk c's data (j up to the number of blocks).
func blockStart(c *ChunkInfo, soff []int64, j int, bs int64) int64 {
	if c.Compressed {
		return soff[j]
	}
	return min(int64(j)*bs, c.Size)
}

// OpenImage opens the chain layers[0] (a full FTI-FF file), layers[1:]
// (delta files, each applying to the image before it) and returns the
// image of the last layer. It checks every file's metadata (as [Open] and
// [OpenDelta] do), that each delta's parent checksum is the checksum of
// the image before it, and that every block a delta does not store is
// held by the image before it with the same length and hash. On success
// the Image owns the layer files: its Close closes them. Errors are
// *[CorruptionError]s naming the layer at fault.
func OpenImage(layers []vfd.File, opts ...Option) (*Image, error) {
	if len(layers) == 0 {
		return nil, fmt.Errorf("%w: an image needs at least a full file", ErrInvalid)
	}
	base, err := Open(layers[0], opts...)
	if err != nil {
		return nil, err
	}
	if !base.Hashed() {
		return nil, base.fileErr(-1, ErrCorrupt, "the base of a chain carries no block hashes")
	}
	im := &Image{layers: layers, name: layers[len(layers)-1].Name(), bs: int64(base.fb.blockSize)}
	// Base image: every block in place.
	chunks := base.chunk
	locs := make([][]blockLoc, len(chunks))
	for ci := range chunks {
		c := &chunks[ci]
		locs[ci] = make([]blockLoc, len(c.BlockHashes))
		for j := range locs[ci] {
			locs[ci][j] = blockLoc{0, c.Fptr + blockStart(c, base.soffOf(ci), j, im.bs)}
		}
	}
	soffs := make([][]int64, len(chunks))
	for ci := range chunks {
		soffs[ci] = base.soffOf(ci)
	}
	sum := base.fb.checksum
	im.hb, im.fbb, im.fs, im.metaOff, im.metaSize = base.hb, base.fbb, base.fb.fs, base.fb.metaOff, base.fb.metaSize
	im.metaFile, im.metaAt = layers[0], base.fb.metaOff
	for k := 1; k < len(layers); k++ {
		d, err := OpenDelta(layers[k], opts...)
		if err != nil {
			return nil, err
		}
		if d.hdr.parent != sum {
			return nil, d.fileErr(32, ErrCorrupt, "the delta applies to an image with checksum %x, the layer before it has %x", d.hdr.parent[:8], sum[:8])
		}
		if int64(d.img.fb.blockSize) != im.bs {
			return nil, d.fileErr(-1, ErrCorrupt, "block size %d, the layer before it has %d", d.img.fb.blockSize, im.bs)
		}
		prev := make(map[chunkKey]int, len(chunks))
		for ci := range chunks {
			if chunks[ci].Size > 0 {
				prev[chunkKey{chunks[ci].VarID, chunks[ci].Dptr}] = ci
			}
		}
		next := d.img.chunk
		nlocs := make([][]blockLoc, len(next))
		ri := 0
		for ci := range next {
			c := &next[ci]
			nlocs[ci] = make([]blockLoc, len(c.BlockHashes))
			pi, hasPrev := prev[chunkKey{c.VarID, c.Dptr}]
			for j := range nlocs[ci] {
				for ri < len(d.runs) && (d.runs[ri].Chunk < ci || (d.runs[ri].Chunk == ci && d.runs[ri].First+d.runs[ri].Count <= j)) {
					ri++
				}
				nsoff := d.img.soffOf(ci)
				if ri < len(d.runs) && d.runs[ri].Chunk == ci && d.runs[ri].First <= j {
					r := d.runs[ri]
					nlocs[ci][j] = blockLoc{int32(k), r.off + blockStart(c, nsoff, j, im.bs) - blockStart(c, nsoff, r.First, im.bs)}
					continue
				}
				var p *ChunkInfo
				if hasPrev {
					p = &chunks[pi]
				}
				bs := uint32(im.bs)
				if p == nil || j >= len(p.BlockHashes) || blockLen(p.Size, bs, j) != blockLen(c.Size, bs, j) ||
					p.BlockHashes[j] != c.BlockHashes[j] || p.storedLen(j, bs) != c.storedLen(j, bs) {
					return nil, d.corrupt(c.VarID, ci, -1, fmt.Errorf("%w: delta does not match its parent: block %d of the chunk at offset %d of variable %d is neither stored nor held by the layer before it",
						ErrCorrupt, j, c.Dptr, c.VarID))
				}
				nlocs[ci][j] = locs[pi][j]
			}
		}
		chunks, locs, sum = next, nlocs, d.img.fb.checksum
		soffs = make([][]int64, len(chunks))
		for ci := range chunks {
			soffs[ci] = d.img.soffOf(ci)
		}
		v := d.view
		im.hb, im.fbb, im.fs, im.metaOff, im.metaSize = v.hb, v.fbb, v.fs, v.metaOff, v.metaSize
		im.metaFile, im.metaAt = layers[k], d.tr.dmOff+HeaderSize
	}
	im.chunks, im.locs, im.checksum, im.soff = chunks, locs, sum, soffs
	return im, nil
}

// Checksum returns the image's file checksum.
func (im *Image) Checksum() [HashSize]byte { return im.checksum }

// Name names the image after its last layer.
func (im *Image) Name() string { return im.name }

// Size returns the image's file size.
func (im *Image) Size() (int64, error) { return im.fs, nil }

// ReadAt reads the image's bytes at off, each block from its layer.
func (im *Image) ReadAt(p []byte, off int64) (int, error) {
	return im.ReadAtType(vfd.MemDefault, p, off)
}

// ReadAtType reads as ReadAt with a memory-type hint passed to the layers.
func (im *Image) ReadAtType(t vfd.MemType, p []byte, off int64) (int, error) {
	if im.closed {
		return 0, fmt.Errorf("%s: %w", im.name, vfd.ErrClosed)
	}
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", im.name, off)
	}
	n := 0
	for n < len(p) {
		o := off + int64(n)
		var k int
		switch {
		case o >= im.fs:
			return n, io.EOF
		case o < HeaderSize:
			k = copy(p[n:], im.hb[o:])
		case o >= im.fs-FBSize:
			k = copy(p[n:], im.fbb[o-(im.fs-FBSize):])
		case o >= im.metaOff:
			k = int(min(int64(len(p)-n), im.metaOff+im.metaSize-o))
			if err := readFull(im.metaFile, vfd.MemOHdr, p[n:n+k], im.metaAt+o-im.metaOff); err != nil {
				return n, err
			}
		default:
			var err error
			if k, err = im.readData(t, p[n:], o); err != nil {
				return n, err
			}
		}
		n += k
	}
	return n, nil
}

// readData reads data bytes at o (inside the data region) into p, up to
// the end of the block run that lies contiguously in one layer, or of a
// container's zero tail.
func (im *Image) readData(t vfd.MemType, p []byte, o int64) (int, error) {
	ci := sort.Search(len(im.chunks), func(i int) bool { return im.chunks[i].Fptr+im.chunks[i].extent() > o })
	if ci == len(im.chunks) {
		return 0, fmt.Errorf("%s: offset %d outside the image's containers", im.name, o)
	}
	c := &im.chunks[ci]
	rel := o - c.Fptr
	if !c.Compressed && rel >= c.Size {
		k := int(min(int64(len(p)), c.ContainerSize-rel))
		clear(p[:k])
		return k, nil
	}
	bs := uint32(im.bs)
	soff := im.soff[ci]
	j := int(rel / im.bs)
	if c.Compressed {
		j = sort.Search(len(c.Stored), func(b int) bool { return soff[b+1] > rel })
	}
	loc := im.locs[ci][j]
	start := loc.off + rel - blockStart(c, soff, j, im.bs)
	end := loc.off + c.storedLen(j, bs)
	// Extend over the following blocks stored right after in the same layer.
	for j+1 < len(im.locs[ci]) && end-start < int64(len(p)) {
		nl := im.locs[ci][j+1]
		if nl.layer != loc.layer || nl.off != end {
			break
		}
		j++
		end += c.storedLen(j, bs)
	}
	k := int(min(int64(len(p)), end-start))
	if err := readFull(im.layers[loc.layer], t, p[:k], start); err != nil {
		return 0, err
	}
	return k, nil
}

func readFull(f vfd.File, t vfd.MemType, p []byte, off int64) error {
	n, err := vfd.ReadAtType(f, t, p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return vfd.WrapPathAt(err, "read", f.Name(), off+int64(n))
}

// WriteAt fails: an image is read-only.
func (im *Image) WriteAt([]byte, int64) (int, error) {
	return 0, fmt.Errorf("%s: %w", im.name, vfd.ErrReadOnly)
}

// Truncate fails: an image is read-only.
func (im *Image) Truncate(int64) error { return fmt.Errorf("%s: %w", im.name, vfd.ErrReadOnly) }

// Sync does nothing.
func (im *Image) Sync() error { return nil }

// Close closes every layer.
func (im *Image) Close() error {
	if im.closed {
		return nil
	}
	im.closed = true
	var errs []error
	for _, f := range im.layers {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// CopyTo writes the file r reads to dst at the same offsets. For an
// [Image] that is the full FTI-FF file of the chain's last checkpoint.
// Every byte goes through r's [Verifier] before it is written, so the
// copy is checked as [Reader.Verify] checks a file. A bad block is a
// *CorruptionError naming the variable, chunk and offset; dst is then
// left partial. The empty tails of containers are written as zeros. It
// returns the number of bytes written. dst is truncated first and
// neither synced nor closed.
func (r *Reader) CopyTo(dst vfd.File) (int64, error) {
	v, err := r.NewVerifier()
	if err != nil {
		return 0, err
	}
	if err := dst.Truncate(0); err != nil {
		return 0, vfd.WrapPath(err, "truncate", dst.Name())
	}
	// copyOut checks p, the bytes at off, then writes them.
	copyOut := func(t vfd.MemType, p []byte, off int64) error {
		if _, err := v.Write(p); err != nil {
			return err
		}
		if t == vfd.MemDraw {
			if err := writeStarting(dst, p, off); err != nil {
				return vfd.WrapPath(err, "write", dst.Name())
			}
			return nil
		}
		if _, err := vfd.WriteAtType(dst, t, p, off); err != nil {
			return vfd.WrapPathAt(err, "write", dst.Name(), off)
		}
		return nil
	}
	if err := copyOut(vfd.MemSuper, r.hb[:], 0); err != nil {
		return 0, err
	}
	if err := r.copyData(copyOut); err != nil {
		return 0, err
	}
	mb := make([]byte, min(r.fb.metaSize, metaBuf))
	for off := int64(0); off < r.fb.metaSize; off += int64(len(mb)) {
		p := mb[:min(int64(len(mb)), r.fb.metaSize-off)]
		if err := r.readAt(vfd.MemOHdr, p, r.fb.metaOff+off); err != nil {
			return 0, err
		}
		if err := copyOut(vfd.MemOHdr, p, r.fb.metaOff+off); err != nil {
			return 0, err
		}
	}
	if err := copyOut(vfd.MemSuper, r.fbb[:], r.fb.fs-FBSize); err != nil {
		return 0, err
	}
	if err := v.Close(); err != nil {
		return 0, err
	}
	return r.fb.fs, nil
}

// copyData hands the data area to copyOut in file order: each chunk's
// data in segments read from the file, then its container's zero tail.
func (r *Reader) copyData(copyOut func(t vfd.MemType, p []byte, off int64) error) error {
	seg := segSize(r.fb.blockSize)
	var buf []byte
	for ci := range r.chunk {
		c := &r.chunk[ci]
		data := c.Size // bytes to read; the rest of the extent is zero
		if c.Compressed {
			data = c.StoredSize
		}
		for off := int64(0); off < c.extent(); {
			n := min(seg, c.extent()-off)
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			p := buf[:n]
			if off >= data {
				clear(p)
			} else {
				p = p[:min(n, data-off)]
				if err := r.readAt(vfd.MemDraw, p, c.Fptr+off); err != nil {
					return err
				}
			}
			if err := copyOut(vfd.MemDraw, p, c.Fptr+off); err != nil {
				return err
			}
			off += int64(len(p))
		}
	}
	return nil
}
