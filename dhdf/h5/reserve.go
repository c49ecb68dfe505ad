package h5

import (
	"fmt"
)

// ReserveDataset adds a contiguous dataset of type t and shape dims whose
// raw data the writer does not write: it only allocates the region, at
// the next multiple of align bytes (align <= 1: no alignment), and other
// writers (other ranks, with their own handles on the file) fill it at
// [Dataset.Addr] before the file is closed. What nobody writes reads as
// zeros (a hole), which is the dataset's fill value. The gap left by the
// alignment is part of no object. Use it for datasets written in parallel
// (one file, every rank writing its hyperslabs at computed offsets).
func (g *Group) ReserveDataset(name string, t Datatype, dims []uint64, align int64) (*Dataset, error) {
	if g.w.err != nil {
		return nil, g.w.err
	}
	size, err := checkShape(t, dims)
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", name, err)
	}
	if align < 0 || align > 1<<30 {
		return nil, fmt.Errorf("%w: dataset %q: alignment %d", ErrInvalid, name, align)
	}
	d := &Dataset{w: g.w, typ: t, dims: append([]uint64(nil), dims...), addr: undef, size: size, attrs: map[string]Attribute{}}
	if err := g.add(name, &link{ds: d}); err != nil {
		return nil, err
	}
	if size > 0 {
		if align > 1 {
			g.w.eoa = (g.w.eoa + align - 1) / align * align
		}
		d.addr = uint64(g.w.eoa)
		g.w.eoa += int64(size)
	}
	return d, nil
}

// Addr returns the file offset of the dataset's raw data, and false for a
// virtual or empty dataset (which has none).
func (d *Dataset) Addr() (int64, bool) {
	if d.addr == undef {
		return 0, false
	}
	return int64(d.addr), true
}

// DataSize returns the size in bytes of the dataset's raw data.
func (d *Dataset) DataSize() int64 { return int64(d.size) }

// Group returns the member group called name, created earlier with
// CreateGroup.
func (g *Group) Group(name string) (*Group, bool) {
	l, ok := g.links[name]
	if !ok || l.group == nil {
		return nil, false
	}
	return l.group, true
}
