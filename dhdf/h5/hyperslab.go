package h5

import (
	"fmt"
)

// ReadHyperslab reads the block of contiguous dataset o that starts at
// start and extends count elements in each dimension into dst, in
// row-major order (len(dst) must be the block's element count times the
// element size). Rows that are contiguous in the file are read together:
// a block spanning the whole of its inner dimensions is one read.
func (f *File) ReadHyperslab(o *Object, start, count []uint64, dst []byte) error {
	if o.Kind != KindDataset || o.Virtual != nil {
		return fmt.Errorf("%w: %s: not a contiguous dataset", ErrInvalid, f.path)
	}
	d := len(o.Dims)
	if len(start) != d || len(count) != d {
		return fmt.Errorf("%w: %s: hyperslab of rank %d/%d in a dataset of rank %d", ErrInvalid, f.path, len(start), len(count), d)
	}
	n := uint64(1)
	for k := 0; k < d; k++ {
		if start[k] > o.Dims[k] || count[k] > o.Dims[k]-start[k] {
			return fmt.Errorf("%w: %s: hyperslab start %v count %v outside dims %v", ErrInvalid, f.path, start, count, o.Dims)
		}
		n *= count[k]
	}
	es := uint64(o.Type.Size)
	if uint64(len(dst)) != n*es {
		return fmt.Errorf("%w: %s: %d bytes for a hyperslab of %d elements of %d bytes", ErrInvalid, f.path, len(dst), n, es)
	}
	if n == 0 {
		return nil
	}
	if d == 0 {
		return f.readInto(dst, o.DataAddr, "raw data")
	}
	// Dimensions after j are whole, so each run spans count[j] rows of them.
	j := d - 1
	for j > 0 && count[j] == o.Dims[j] {
		j--
	}
	gs := make([]uint64, d) // element strides of the dataset
	s := uint64(1)
	for k := d - 1; k >= 0; k-- {
		gs[k] = s
		s *= o.Dims[k]
	}
	run := count[j] * gs[j] * es
	idx := make([]uint64, j)
	var p uint64
	for {
		e := start[j] * gs[j]
		for k := 0; k < j; k++ {
			e += (start[k] + idx[k]) * gs[k]
		}
		if err := f.readInto(dst[p:p+run], o.DataAddr+e*es, "raw data"); err != nil {
			return err
		}
		p += run
		k := j - 1
		for k >= 0 {
			idx[k]++
			if idx[k] < count[k] {
				break
			}
			idx[k] = 0
			k--
		}
		if k < 0 {
			return nil
		}
	}
}
