package dataset

import (
	"cmp"
	"fmt"
	"slices"
)

// Copy is one contiguous run of bytes from an old rank's variable to a
// new rank's variable: Len bytes at SrcOff of variable SrcVar of old rank
// Src go to DstOff of variable DstVar of new rank Dst.
type Copy struct {
	Dst    int
	DstVar int32
	DstOff int64
	Src    int
	SrcVar int32
	SrcOff int64
	Len    int64
}

// Fill is a byte range of a new rank's variable that no old subset
// covers (only in Sparse datasets): it is zeroed.
type Fill struct {
	Dst    int
	DstVar int32
	Off    int64
	Len    int64
}

// Plan moves the data of one decomposition (the checkpoint's, N ranks)
// to another (the restart's, M ranks) of the same datasets. Build it with
// [NewPlan]; it is immutable.
type Plan struct {
	old, new *Decomposition
}

// NewPlan checks that every dataset the new decomposition uses is in the
// old one ([ErrUnknown]) with the same name, shape, element type and
// size ([ErrMismatch]), and returns the plan between them. The new
// decomposition may cover only part of a dataset; the old one must be
// complete unless the dataset is Sparse (NewDecomposition checked it).
func NewPlan(old, new *Decomposition) (*Plan, error) {
	for _, nd := range new.datasets {
		if len(new.pieces[nd.ID]) == 0 {
			continue
		}
		if err := CheckStored(nd, old.datasets); err != nil {
			return nil, err
		}
	}
	return &Plan{old: old, new: new}, nil
}

// CheckStored checks dataset nd of a restart against stored, the
// checkpoint's datasets: nd's id is there ([ErrUnknown]) with the same
// name, shape, element type and size ([ErrMismatch]).
func CheckStored(nd Dataset, stored []Dataset) error {
	i := slices.IndexFunc(stored, func(d Dataset) bool { return d.ID == nd.ID })
	if i < 0 {
		return fmt.Errorf("%w: dataset %v is not in the checkpoint (it holds %s)", ErrUnknown, nd, listDatasets(stored))
	}
	od := stored[i]
	if od.Name != nd.Name || !slices.Equal(od.Shape, nd.Shape) || od.Type != nd.Type || od.Elem() != nd.Elem() {
		return fmt.Errorf("%w: dataset %d is %v in the checkpoint but %v in this run", ErrMismatch, nd.ID, od, nd)
	}
	return nil
}

func listDatasets(ds []Dataset) string {
	if len(ds) == 0 {
		return "no datasets"
	}
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += d.String()
	}
	return s
}

// Old returns the checkpoint's decomposition.
func (p *Plan) Old() *Decomposition { return p.old }

// New returns the restart's decomposition.
func (p *Plan) New() *Decomposition { return p.new }

// Copies computes the copies that fill new rank dst's variables, sorted
// by (Src, SrcVar, SrcOff). Runs contiguous in both variables are one
// copy, so a block of rows that is contiguous on both sides moves as one
// copy, and a run never crosses a variable boundary.
func (p *Plan) Copies(dst int) []Copy {
	var out []Copy
	for _, b := range p.new.Subsets(dst) {
		ds, _ := p.new.Dataset(b.Dataset)
		es := int64(ds.Elem())
		for _, a := range p.old.pieces[b.Dataset] {
			out = appendRuns(out, a.sub, b, a.rank, dst, es)
		}
	}
	slices.SortFunc(out, func(x, y Copy) int {
		return cmp.Or(cmp.Compare(x.Src, y.Src), cmp.Compare(x.SrcVar, y.SrcVar), cmp.Compare(x.SrcOff, y.SrcOff))
	})
	return merge(out)
}

// Sends computes the copies that read old rank src's variables, sorted by
// (Dst, SrcVar, SrcOff): what a rank that can read old rank src's data
// ships to each new rank.
func (p *Plan) Sends(src int) []Copy {
	var out []Copy
	for _, a := range p.old.Subsets(src) {
		ds, _ := p.old.Dataset(a.Dataset)
		es := int64(ds.Elem())
		for _, b := range p.new.pieces[a.Dataset] {
			out = appendRuns(out, a, b.sub, src, b.rank, es)
		}
	}
	slices.SortFunc(out, func(x, y Copy) int {
		return cmp.Or(cmp.Compare(x.Dst, y.Dst), cmp.Compare(x.SrcVar, y.SrcVar), cmp.Compare(x.SrcOff, y.SrcOff))
	})
	return merge(out)
}

// Fills returns the byte ranges of new rank dst's variables that no old
// subset covers (possible only in Sparse datasets): whole variables
// whose hyperslab the old subsets do not cover completely, to be zeroed
// before the copies run.
func (p *Plan) Fills(dst int) []Fill {
	var out []Fill
	for _, b := range p.new.Subsets(dst) {
		ds, _ := p.new.Dataset(b.Dataset)
		if !ds.Sparse {
			continue
		}
		var got int64
		for _, a := range p.old.pieces[b.Dataset] {
			if _, cnt, ok := intersect(a.sub.Offset, a.sub.Count, b.Offset, b.Count); ok {
				n := int64(1)
				for _, c := range cnt {
					n *= c
				}
				got += n
			}
		}
		if n := b.Elements(); got < n {
			out = append(out, Fill{Dst: dst, DstVar: b.VarID, Off: 0, Len: n * int64(ds.Elem())})
		}
	}
	return out
}

// strides returns the row-major element strides of a box of extents c.
func strides(c []int64) []int64 {
	s := make([]int64, len(c))
	n := int64(1)
	for k := len(c) - 1; k >= 0; k-- {
		s[k] = n
		n *= c[k]
	}
	return s
}

// appendRuns appends the runs that copy the intersection of old subset a
// (rank src) and new subset b (rank dst) of one dataset, elements of es
// bytes.
func appendRuns(out []Copy, a, b Subset, src, dst int, es int64) []Copy {
	lo, cnt, ok := intersect(a.Offset, a.Count, b.Offset, b.Count)
	if !ok {
		return out
	}
	d := len(lo)
	sa, sb := strides(a.Count), strides(b.Count)
	// Dimensions after j are whole in both boxes, so the intersection is
	// contiguous in both from dimension j inwards.
	j := d - 1
	for j > 0 && cnt[j] == a.Count[j] && cnt[j] == b.Count[j] {
		j--
	}
	run := cnt[j] * sa[j] // == cnt[j] * sb[j]: the inner dimensions are whole
	var srcBase, dstBase int64
	for k := 0; k < d; k++ {
		srcBase += (lo[k] - a.Offset[k]) * sa[k]
		dstBase += (lo[k] - b.Offset[k]) * sb[k]
	}
	idx := make([]int64, j)
	for {
		so, do := srcBase, dstBase
		for k := 0; k < j; k++ {
			so += idx[k] * sa[k]
			do += idx[k] * sb[k]
		}
		out = append(out, Copy{Dst: dst, DstVar: b.VarID, DstOff: do * es, Src: src, SrcVar: a.VarID, SrcOff: so * es, Len: run * es})
		k := j - 1
		for k >= 0 {
			idx[k]++
			if idx[k] < cnt[k] {
				break
			}
			idx[k] = 0
			k--
		}
		if k < 0 {
			return out
		}
	}
}

// merge joins neighbouring copies that are contiguous on both sides.
func merge(cs []Copy) []Copy {
	if len(cs) < 2 {
		return cs
	}
	out := cs[:1]
	for _, c := range cs[1:] {
		l := &out[len(out)-1]
		if c.Src == l.Src && c.SrcVar == l.SrcVar && c.Dst == l.Dst && c.DstVar == l.DstVar &&
			c.SrcOff == l.SrcOff+l.Len && c.DstOff == l.DstOff+l.Len {
			l.Len += c.Len
			continue
		}
		out = append(out, c)
	}
	return out
}
