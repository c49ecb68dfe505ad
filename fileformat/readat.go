package fileformat

import (
	"errors"
	"fmt"

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
	return b
}
