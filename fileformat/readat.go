package fileformat

import (
	"errors"
	"fmt"
	"sync"

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
	c := &r.chunk[ci]
	bs := int64(r.fb.blockSize)
	end := rel + int64(len(dst))
	blockLen := func(j int64) int64 { return min(bs, c.Size-j*bs) }
	var scratch []byte
	edge := func(j int64) error {
		if scratch == nil {
			scratch = make([]byte, bs)
		}
		b := scratch[:blockLen(j)]
		if err := r.readBlocks(ci, j, b); err != nil {
			return err
		}
		lo, hi := max(rel, j*bs), min(end, j*bs+int64(len(b)))
		copy(dst[lo-rel:hi-rel], b[lo-j*bs:hi-j*bs])
		return nil
	}
	j0, j1 := rel/bs, (end+bs-1)/bs // blocks [j0, j1) are touched
	// Whole blocks inside the range: [a, b).
	a := j0
	if rel%bs != 0 {
		a++
	}
	b := j1
	if end%bs != 0 && end != c.Size {
		b--
	}
	if a >= b {
		// No whole block: at most two cut blocks.
		for j := j0; j < j1; j++ {
			if err := edge(j); err != nil {
				return err
			}
		}
		return nil
	}
	if a > j0 {
		if err := edge(j0); err != nil {
			return err
		}
	}
	if err := r.readBlocks(ci, a, dst[a*bs-rel:min(b*bs, c.Size)-rel]); err != nil {
		return err
	}
	if b < j1 {
		return edge(b)
	}
	return nil
}

// readBlocks reads dst from the start of block first of chunk ci (dst
// ends at a block boundary or at the chunk's end) and checks every block
// against its hash; reading the next segment overlaps hashing the ones
// before.
func (r *Reader) readBlocks(ci int, first int64, dst []byte) error {
	c := &r.chunk[ci]
	bs := int64(r.fb.blockSize)
	base := c.Fptr + first*bs
	hashed := r.Hashed() && !r.o.verified
	parallel := int64(len(dst)) >= parallelMin && r.o.workers > 1
	seg := segSize(r.fb.blockSize)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstBad = int64(-1)
		sem      = make(chan struct{}, max(r.o.workers, 1))
	)
	check := func(p []byte, b0 int64) {
		for k := int64(0); k*bs < int64(len(p)); k++ {
			blk := p[k*bs : min((k+1)*bs, int64(len(p)))]
			if BlockHash(blk) != c.BlockHashes[b0+k] {
				mu.Lock()
				if firstBad < 0 || b0+k < firstBad {
					firstBad = b0 + k
				}
				mu.Unlock()
				return
			}
		}
	}
	var rerr error
	for o := int64(0); o < int64(len(dst)); o += seg {
		p := dst[o:min(o+seg, int64(len(dst)))]
		if err := r.readAt(vfd.MemDraw, p, base+o); err != nil {
			rerr = err
			break
		}
		if !hashed {
			continue
		}
		if !parallel {
			check(p, first+o/bs)
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(p []byte, b0 int64) {
			defer func() { <-sem; wg.Done() }()
			check(p, b0)
		}(p, first+o/bs)
	}
	wg.Wait()
	if rerr != nil {
		var ce *CorruptionError
		if errors.As(rerr, &ce) {
			ce.VarID, ce.Chunk = c.VarID, ci
		}
		return rerr
	}
	if firstBad >= 0 {
		return r.corrupt(c.VarID, ci, c.Fptr+firstBad*bs, fmt.Errorf("%w: block %d of chunk", ErrHashMismatch, firstBad))
	}
	return nil
}
