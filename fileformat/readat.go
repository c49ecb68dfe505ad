package fileformat

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/vfd"
)

// ReadVarAt reads len(dst) bytes of variable id starting at byte off of
// its data, reading only the dCP blocks the range touches and checking
// each against its hash: a block wholly inside the range is read straight
// into dst, a block the range cuts is read whole into a scratch buffer
// first. It is what a restart on another number of ranks uses to fetch
// the parts of an old rank's variable it needs. A range outside the
// variable is an error wrapping [ErrSize]; on any error dst is zeroed.
func (r *Reader) ReadVarAt(id int32, dst []byte, off int64) error {
	vi, ok := r.byID[id]
	if !ok {
		return fmt.Errorf("%s: variable %d: %w", r.path, id, ErrNoVar)
	}
	v := &r.vars[vi]
	n := int64(len(dst))
	if off < 0 || off > v.Size || n > v.Size-off {
		return fmt.Errorf("%s: variable %d: %w (bytes [%d, %d) of %d)", r.path, id, ErrSize, off, off+n, v.Size)
	}
	if r.stSize[vi] != v.Size {
		return r.readLossyAt(vi, dst, off)
	}
	return r.readStoredAt(vi, dst, off)
}

// readLossyAt reads bytes [off, off+len(dst)) of lossy variable vi, whose
// stored values are smaller than its own: it reads the stored values of
// the elements the range touches and widens them.
func (r *Reader) readLossyAt(vi int, dst []byte, off int64) error {
	v := &r.vars[vi]
	es := int64(v.ElemSize)
	ses := r.stSize[vi] / max(v.Count, 1)
	e0, e1 := off/es, (off+int64(len(dst))+es-1)/es
	st := make([]byte, (e1-e0)*ses)
	if err := r.readStoredAt(vi, st, e0*ses); err != nil {
		clear(dst)
		return err
	}
	wide := make([]byte, (e1-e0)*es)
	lossyDecode(v.Lossy, v.Type, st, wide)
	copy(dst, wide[off-e0*es:])
	return nil
}

// readStoredAt reads bytes [off, off+len(dst)) of variable vi's stored
// values.
func (r *Reader) readStoredAt(vi int, dst []byte, off int64) error {
	n := int64(len(dst))
	for _, ci := range r.perV[vi] {
		c := &r.chunk[ci]
		lo, hi := max(off, c.Dptr), min(off+n, c.Dptr+c.Size)
		if lo >= hi {
			continue
		}
		if err := r.readChunkRange(ci, dst[lo-off:hi-off], lo-c.Dptr); err != nil {
			clear(dst)
			return err
		}
	}
	return nil
}

// readChunkRange reads bytes [rel, rel+len(dst)) of chunk ci into dst,
// verifying every block it touches.
func (r *Reader) readChunkRange(ci int, dst []byte, rel int64) error {
	if r.moved != nil && r.moved[ci].Load() {
		return r.movedErr(ci)
	}
	return r.blocks(ci).ReadRange(dst, rel)
}

// blocks returns the checked block reader of chunk ci. Its blocks are
// checked unless the file has no hashes or its data was verified
// already ([WithVerifiedData]). Errors name the variable and chunk.
func (r *Reader) blocks(ci int) *b3.Blocks {
	c := &r.chunk[ci]
	bs := int64(r.fb.blockSize)
	b := &b3.Blocks{
		Len: c.Size, BlockSize: bs, Segment: segSize(r.fb.blockSize), Workers: r.o.workers,
		ReadAt: func(p []byte, off int64) error {
			err := r.readAt(vfd.MemDraw, p, c.Fptr+off)
			var ce *CorruptionError
			if errors.As(err, &ce) {
				ce.VarID, ce.Chunk = c.VarID, ci
			}
			return err
		},
		Mismatch: func(j int64) error {
			return r.corrupt(c.VarID, ci, c.Fptr+j*bs, fmt.Errorf("%w: block %d of chunk", ErrHashMismatch, j))
		},
	}
	if r.Hashed() && !r.o.verified {
		b.Want = func(j int64) [HashSize]byte { return c.BlockHashes[j] }
	}
	if c.Compressed {
		soff := r.soff[ci]
		b.Mismatch = func(j int64) error {
			return r.corrupt(c.VarID, ci, c.Fptr+soff[j], fmt.Errorf("%w: block %d of chunk (compressed)", ErrHashMismatch, j))
		}
		var zero []bool
		zero, b.Checked = zeroChecks(c, r.fb.blockSize)
		b.ReadAt = decodingReadAt(c, soff, bs, r.o.workers, zero, func(p []byte, off int64) error {
			err := r.readAt(vfd.MemDraw, p, c.Fptr+off)
			var ce *CorruptionError
			if errors.As(err, &ce) {
				ce.VarID, ce.Chunk = c.VarID, ci
			}
			return err
		}, func(j int64, err error) error {
			return r.corrupt(c.VarID, ci, c.Fptr+soff[j], fmt.Errorf("%w: block %d of chunk: %v", ErrHashMismatch, j, err))
		})
	}
	return b
}

// storedOffsets returns the offset of each block's stored form from the
// start of chunk c's data, and the total (one more entry).
func storedOffsets(c *ChunkInfo) []int64 {
	out := make([]int64, len(c.Stored)+1)
	for j, n := range c.Stored {
		out[j+1] = out[j] + int64(n)
	}
	return out
}

// zeroChecks returns, for compressed chunk c, the zero table its
// decodingReadAt fills and the [b3.Blocks] Checked function that trusts
// a block decoded from the zero frame when its recorded hash is the zero
// block's: the block is then exactly zeros, so its hash is known.
func zeroChecks(c *ChunkInfo, bs uint32) ([]bool, func(j int64) bool) {
	zero := make([]bool, len(c.Stored))
	return zero, func(j int64) bool {
		return zero[j] && c.BlockHashes[j] == zeroFormOf(int(blockLen(c.Size, bs, int(j)))).hash
	}
}

// decodeMin is the size from which a read's blocks are decompressed by
// several goroutines.
const decodeMin = 1 << 20

// decodingReadAt returns a ReadAt of a compressed chunk's logical bytes
// for [b3.Blocks], which asks for whole blocks: it reads the stored forms
// of the blocks p covers in one read (read takes offsets from the
// chunk's stored start) and decompresses each into its place in p, on up
// to workers goroutines; blocks all stored raw are read into p
// directly. A block that does not decompress to its length is bad(j,
// why). zero (one entry per block, or nil) records which
// blocks were the zero frame (decodeBlock).
func decodingReadAt(c *ChunkInfo, soff []int64, bs int64, workers int, zero []bool, read func(p []byte, off int64) error,
	bad func(j int64, err error) error) func(p []byte, off int64) error {
	return func(p []byte, off int64) error {
		j0 := off / bs
		j1 := j0 + numBlocks(int64(len(p)), uint32(bs))
		if soff[j1]-soff[j0] == int64(len(p)) {
			// Stored lengths are at most the blocks' lengths, so every
			// block here is raw: read straight into p, no copy.
			return read(p, soff[j0])
		}
		src := make([]byte, soff[j1]-soff[j0])
		if err := read(src, soff[j0]); err != nil {
			return err
		}
		one := func(j int64) error {
			lo := (j - j0) * bs
			d := p[lo : lo+blockLen(c.Size, uint32(bs), int(j))]
			z, err := decodeBlock(d, src[soff[j]-soff[j0]:soff[j+1]-soff[j0]])
			if err != nil {
				return bad(j, err)
			}
			if zero != nil {
				zero[j] = z
			}
			return nil
		}
		if workers <= 1 || len(p) < decodeMin || j1-j0 < 2 {
			for j := j0; j < j1; j++ {
				if err := one(j); err != nil {
					return err
				}
			}
			return nil
		}
		return parallelBlocks(j0, j1, workers, one)
	}
}

// parallelBlocks runs one(j) for j in [j0, j1) on up to workers
// goroutines and returns the error of the lowest failing block.
func parallelBlocks(j0, j1 int64, workers int, one func(j int64) error) error {
	n := j1 - j0
	w := min(int64(workers), n)
	per := (n + w - 1) / w
	errs := make([]error, w)
	var wg sync.WaitGroup
	for k := int64(0); k < w; k++ {
		lo, hi := j0+k*per, min(j0+(k+1)*per, j1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := lo; j < hi; j++ {
				if err := one(j); err != nil {
					errs[k] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
