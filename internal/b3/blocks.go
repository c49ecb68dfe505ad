package b3

import "sync"

// backgroundMin is the read size from which blocks are hashed on other
// goroutines while the next segment is read. Below it the hand-off
// costs more than it saves.
const backgroundMin = 1 << 20

// Blocks reads byte ranges of an object stored as blocks, checking each
// block it reads against its recorded digest. Every block is BlockSize
// bytes long except the last, which may be shorter. FTI-FF chunks and
// the variables of an HDF5 checkpoint are such objects.
type Blocks struct {
	// Len is the object's length in bytes.
	Len int64
	// BlockSize is the length of every block but the last.
	BlockSize int64
	// Segment is how many bytes one ReadAt call takes. It is rounded
	// down to whole blocks (one at least).
	Segment int64
	// Workers bounds the goroutines hashing at once (one at least).
	Workers int
	// ReadAt reads exactly len(p) bytes at offset off of the object.
	ReadAt func(p []byte, off int64) error
	// Want returns the recorded digest of block j. When Want is nil the
	// blocks are read without a check.
	Want func(j int64) [Size]byte
	// Mismatch returns the error for block j, whose digest differs.
	Mismatch func(j int64) error
	// Checked, when not nil, reports whether block j, just read, is
	// known to match Want(j) without hashing it (its ReadAt checked it
	// another way). It is called after the ReadAt that read block j.
	Checked func(j int64) bool
}

// ReadRange reads len(dst) bytes at offset off of the object. Whole
// blocks inside the range are read straight into dst. A block the range
// cuts is read whole into a scratch buffer, so it can be checked.
func (b *Blocks) ReadRange(dst []byte, off int64) error {
	bs := b.BlockSize
	end := off + int64(len(dst))
	if end == off {
		return nil
	}
	var scratch []byte
	edge := func(j int64) error {
		if scratch == nil {
			scratch = make([]byte, bs)
		}
		p := scratch[:min(bs, b.Len-j*bs)]
		if err := b.Read(j, p); err != nil {
			return err
		}
		lo, hi := max(off, j*bs), min(end, j*bs+int64(len(p)))
		copy(dst[lo-off:hi-off], p[lo-j*bs:hi-j*bs])
		return nil
	}
	// The range touches blocks [j0, j1); [first, last) are whole in it.
	j0, j1 := off/bs, (end+bs-1)/bs
	first, last := j0, j1
	if off%bs != 0 {
		first++
	}
	if end%bs != 0 && end != b.Len {
		last--
	}
	if first >= last {
		// No whole block: at most two cut ones.
		for j := j0; j < j1; j++ {
			if err := edge(j); err != nil {
				return err
			}
		}
		return nil
	}
	if first > j0 {
		if err := edge(j0); err != nil {
			return err
		}
	}
	if err := b.Read(first, dst[first*bs-off:min(last*bs, b.Len)-off]); err != nil {
		return err
	}
	if last < j1 {
		return edge(last)
	}
	return nil
}

// Read reads dst from the start of block first. dst ends at a block
// boundary or at the object's end. Every block is checked; the error
// names the lowest bad block. Reading a segment overlaps hashing the
// ones before it, once dst is 1 MiB or more.
func (b *Blocks) Read(first int64, dst []byte) error {
	bs := b.BlockSize
	seg := max(b.Segment/bs, 1) * bs
	background := b.Want != nil && len(dst) >= backgroundMin
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		bad = int64(-1)
		sem = make(chan struct{}, max(b.Workers, 1))
	)
	check := func(p []byte, j0 int64) {
		for k := int64(0); k*bs < int64(len(p)); k++ {
			if b.Checked != nil && b.Checked(j0+k) {
				continue
			}
			if Sum256(p[k*bs:min((k+1)*bs, int64(len(p)))]) != b.Want(j0+k) {
				mu.Lock()
				if bad < 0 || j0+k < bad {
					bad = j0 + k
				}
				mu.Unlock()
				return
			}
		}
	}
	var rerr error
	for o := int64(0); o < int64(len(dst)); o += seg {
		p := dst[o:min(o+seg, int64(len(dst)))]
		if rerr = b.ReadAt(p, first*bs+o); rerr != nil {
			break
		}
		switch {
		case b.Want == nil:
		case !background:
			check(p, first+o/bs)
		default:
			sem <- struct{}{}
			wg.Add(1)
			go func(p []byte, j0 int64) {
				defer func() { <-sem; wg.Done() }()
				check(p, j0)
			}(p, first+o/bs)
		}
	}
	wg.Wait()
	if rerr != nil {
		return rerr
	}
	if bad >= 0 {
		return b.Mismatch(bad)
	}
	return nil
}
