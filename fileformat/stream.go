package fileformat

import (
	"fmt"
	"sync"

	"github.com/ftigo/ftigo/internal/b3"
)

// Verifier checks an FTI-FF file as its bytes stream past, in order from
// offset 0, against the metadata its [Reader] read at [Open]: it does
// what [Reader.Verify] does (the header and the file block equal to those
// read at Open, every dCP block hash, the zero tails of the containers,
// the metadata hash, the file checksum) without reading the file itself,
// so that a reader that goes through the whole file anyway (a copy to a
// partner, an encoder, a copy into a container) verifies it in the same
// pass. The bytes it is shown are the bytes checked: a file changed after
// Open fails as a file damaged before it.
//
// Write returns a *[CorruptionError] (wrapping [ErrHashMismatch],
// [ErrCorrupt] or, for bytes past the file's end, [ErrCorrupt]) at the
// first bad byte, and the same error on every later call; Close, after
// the last byte, returns it or reports a stream that ended early
// ([ErrTruncated]). Not safe for concurrent use.
type Verifier struct {
	r   *Reader
	off int64 // bytes seen
	ci  int   // the container holding off (file order)
	// part gathers a dCP block that straddles writes, hashed whole (with
	// [BlockHash], as every other block) once its last byte arrives.
	part []byte
	// got holds the hashes of a write's whole blocks when they are hashed
	// by several goroutines (workers, from [WithHashWorkers]).
	got     [][HashSize]byte
	workers int
	mh      *b3.Hasher // the metadata block
	metaOK  bool       // the metadata hash was checked
	err     error
	// cchunk and cj are the compressed chunk being streamed and the block
	// of it the stream is in; dec receives a block's decompressed bytes.
	cchunk, cj int
	dec        []byte
}

// NewVerifier returns a [Verifier] of r's file. A file written without
// chunk hashes ([WithoutHash]) has nothing to check its data against:
// that is [ErrUnhashed], as for [Reader.Verify].
func (r *Reader) NewVerifier() (*Verifier, error) {
	if !r.Hashed() {
		return nil, fmt.Errorf("%s: %w", r.path, ErrUnhashed)
	}
	// Open checked that the containers tile the data area in this order;
	// the stream relies on it.
	end := int64(HeaderSize)
	for i := range r.chunk {
		if r.chunk[i].Fptr != end {
			return nil, r.fileErr(r.chunk[i].Fptr, ErrCorrupt, "container %d does not follow the one before", i)
		}
		end += r.chunk[i].extent()
	}
	if end != r.fb.metaOff {
		return nil, r.fileErr(end, ErrCorrupt, "containers end at %d, metadata starts at %d", end, r.fb.metaOff)
	}
	return &Verifier{r: r, mh: b3.New(), workers: r.o.workers, cchunk: -1}, nil
}

// Write checks the next len(p) bytes of the file.
func (v *Verifier) Write(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	done := 0
	for done < len(p) {
		n, err := v.step(p[done:])
		done += n
		v.off += int64(n)
		if err != nil {
			v.err = err
			return done, err
		}
	}
	return done, nil
}

// Close reports the first damage found, or a stream that stopped before
// the end of the file.
func (v *Verifier) Close() error {
	if v.err != nil {
		return v.err
	}
	r := v.r
	if v.off < r.fb.fs {
		v.err = r.fileErr(v.off, ErrTruncated, "the stream ended after %d of the file's %d bytes", v.off, r.fb.fs)
		return v.err
	}
	if sum := fileChecksum(r.chunk); sum != r.fb.checksum {
		v.err = r.fileErr(r.fb.fs-FBSize+128, ErrHashMismatch, "file checksum")
	}
	return v.err
}

// step checks a prefix of p that lies in one part of the file (header,
// a container's data, its zero tail, the metadata, the file block) and
// returns its length; on damage, the length of the good bytes before it.
func (v *Verifier) step(p []byte) (int, error) {
	r, off := v.r, v.off
	fbOff := r.fb.fs - FBSize
	switch {
	case off < HeaderSize:
		n := min(int64(len(p)), HeaderSize-off)
		if i := firstDiff(p[:n], r.hb[off:off+n]); i >= 0 {
			return i, r.fileErr(off+int64(i), ErrHashMismatch, "header differs from the one read at open")
		}
		return int(n), nil
	case off < r.fb.metaOff:
		for r.chunk[v.ci].Fptr+r.chunk[v.ci].extent() <= off {
			v.ci++
		}
		c := &r.chunk[v.ci]
		if c.Compressed {
			return v.cdata(c, p)
		}
		if off < c.Fptr+c.Size {
			return v.data(c, p)
		}
		n := min(int64(len(p)), c.Fptr+c.ContainerSize-off)
		for j, x := range p[:n] {
			if x != 0 {
				return j, r.corrupt(c.VarID, v.ci, off+int64(j), fmt.Errorf("%w: non-zero byte in the empty part of container %d", ErrCorrupt, c.Container))
			}
		}
		return int(n), nil
	case off < fbOff:
		n := min(int64(len(p)), fbOff-off)
		_, _ = v.mh.Write(p[:n])
		return int(n), nil
	case off < r.fb.fs:
		if !v.metaOK {
			var sum [HashSize]byte
			v.mh.Sum(sum[:0])
			if sum != r.fb.metaHash {
				return 0, r.fileErr(r.fb.metaOff, ErrHashMismatch, "metadata hash")
			}
			v.metaOK = true
		}
		n := min(int64(len(p)), r.fb.fs-off)
		if i := firstDiff(p[:n], r.fbb[off-fbOff:off-fbOff+n]); i >= 0 {
			return i, r.fileErr(off+int64(i), ErrHashMismatch, "file block differs from the one read at open")
		}
		return int(n), nil
	default:
		return 0, r.fileErr(r.fb.fs, ErrCorrupt, "more bytes than the %d the file block says", r.fb.fs)
	}
}

// data checks a prefix of p inside the data of container c. Whole dCP
// blocks are hashed where they lie (a write of at least parallelMin
// bytes by up to workers goroutines); a block cut by the end of p is
// gathered into part until its last byte arrives and then hashed whole,
// so every block goes through [BlockHash] whatever the write sizes.
func (v *Verifier) data(c *ChunkInfo, p []byte) (int, error) {
	bs := int64(v.r.fb.blockSize)
	dataEnd := c.Fptr + c.Size
	k := (v.off - c.Fptr) / bs
	start := c.Fptr + k*bs
	end := min(start+bs, dataEnd)
	if v.off > start || int64(len(p)) < end-start {
		// Part of a block: start it or continue it.
		if v.off == start {
			if int64(cap(v.part)) < end-start {
				v.part = make([]byte, 0, bs)
			}
			v.part = v.part[:0]
		}
		n := min(int64(len(p)), end-v.off)
		v.part = append(v.part, p[:n]...)
		if v.off+n == end {
			if err := v.checkBlock(c, k, start, BlockHash(v.part)); err != nil {
				return 0, err
			}
		}
		return int(n), nil
	}
	// Whole blocks from p, as many as it holds: full ones, and the
	// chunk's short last block when p reaches the end of the data.
	span := min(int64(len(p)), dataEnd-start)
	nb, n := span/bs, span/bs*bs
	if span == dataEnd-start {
		nb, n = numBlocks(span, uint32(bs)), span
	}
	if v.workers > 1 && n >= parallelMin && nb > 1 {
		if int64(cap(v.got)) < nb {
			v.got = make([][HashSize]byte, nb)
		}
		got := v.got[:nb]
		hashBlocks(p[:n], uint32(bs), got, v.workers)
		for j := range got {
			if err := v.checkBlock(c, k+int64(j), start+int64(j)*bs, got[j]); err != nil {
				return j * int(bs), err
			}
		}
		return int(n), nil
	}
	for j := int64(0); j < nb; j++ {
		lo := j * bs
		if err := v.checkBlock(c, k+j, start+lo, BlockHash(p[lo:min(lo+bs, n)])); err != nil {
			return int(lo), err
		}
	}
	return int(n), nil
}

func (v *Verifier) checkBlock(c *ChunkInfo, k, start int64, got [HashSize]byte) error {
	if got != c.BlockHashes[k] {
		return v.r.corrupt(c.VarID, v.ci, start, fmt.Errorf("%w: block %d of chunk", ErrHashMismatch, k))
	}
	return nil
}

// cdata checks a prefix of p inside compressed chunk c: the stored form
// of each block is gathered whole (or taken where it lies in p),
// decompressed and hashed. A run of whole blocks in a large write is
// decompressed and hashed by up to workers goroutines.
func (v *Verifier) cdata(c *ChunkInfo, p []byte) (int, error) {
	r := v.r
	bs := r.fb.blockSize
	soff := r.soff[v.ci]
	if v.cchunk != v.ci {
		v.cchunk, v.cj = v.ci, 0
	}
	rel := v.off - c.Fptr
	j := v.cj
	start, end := soff[j], soff[j+1]
	if rel == start && len(v.part) == 0 {
		// Whole blocks where they lie in p.
		k := j
		for k < len(c.Stored) && soff[k+1]-start <= int64(len(p)) {
			k++
		}
		if k > j {
			n := soff[k] - start
			var err error
			if v.workers > 1 && n >= parallelMin && k-j > 1 {
				err = parallelBlocks(int64(j), int64(k), v.workers, func(b int64) error {
					buf := getBlockBuf(bs)
					defer putBlockBuf(buf)
					return v.checkStored(c, int(b), p[soff[b]-start:soff[b+1]-start], buf)
				})
			} else {
				for b := j; b < k && err == nil; b++ {
					err = v.checkStored(c, b, p[soff[b]-start:soff[b+1]-start], nil)
				}
			}
			if err != nil {
				return 0, err
			}
			v.cj = k
			return int(n), nil
		}
	}
	// Part of a block: gather it.
	if rel == start {
		if int64(cap(v.part)) < end-start {
			v.part = make([]byte, 0, bs)
		}
		v.part = v.part[:0]
	}
	n := min(int64(len(p)), end-rel)
	v.part = append(v.part, p[:n]...)
	if rel+n < end {
		return int(n), nil
	}
	err := v.checkStored(c, j, v.part, nil)
	v.part = v.part[:0]
	if err != nil {
		return 0, err
	}
	v.cj++
	return int(n), nil
}

// checkStored decompresses the stored form src of block j of compressed
// chunk c (into buf, or the Verifier's own buffer when buf is nil) and
// checks its hash.
func (v *Verifier) checkStored(c *ChunkInfo, j int, src, buf []byte) error {
	r := v.r
	bs := r.fb.blockSize
	at := c.Fptr + r.soff[v.ci][j]
	n := blockLen(c.Size, bs, j)
	if buf == nil {
		if int64(cap(v.dec)) < n {
			v.dec = make([]byte, bs)
		}
		buf = v.dec
	}
	d := buf[:n]
	zero, err := decodeBlock(d, src)
	if err != nil {
		return r.corrupt(c.VarID, v.ci, at, fmt.Errorf("%w: block %d of chunk: %v", ErrHashMismatch, j, err))
	}
	if zero && c.BlockHashes[j] == zeroFormOf(int(n)).hash {
		return nil // exactly zeros: the hash is known
	}
	if BlockHash(d) != c.BlockHashes[j] {
		return r.corrupt(c.VarID, v.ci, at, fmt.Errorf("%w: block %d of chunk (compressed)", ErrHashMismatch, j))
	}
	return nil
}

var blockBufs sync.Pool

func getBlockBuf(bs uint32) []byte {
	if b, ok := blockBufs.Get().(*[]byte); ok && cap(*b) >= int(bs) {
		return (*b)[:bs]
	}
	return make([]byte, bs)
}

func putBlockBuf(b []byte) { blockBufs.Put(&b) }
