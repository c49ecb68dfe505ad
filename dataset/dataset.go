package dataset

import (
	"fmt"
	"slices"
	"sort"

	"github.com/ftigo/ftigo/fileformat"
)

// Dataset is a global array; see [fileformat.Dataset].
type Dataset = fileformat.Dataset

// Subset maps a variable onto a hyperslab of a dataset; see [fileformat.Subset].
type Subset = fileformat.Subset

// MaxRank is the largest number of dimensions of a dataset.
const MaxRank = fileformat.MaxDatasetRank

// View is what one rank declared (or one checkpoint file recorded): the
// datasets it knows and the subsets of its variables.
type View struct {
	Datasets []Dataset
	Subsets  []Subset
}

// piece is one subset together with the rank that holds it.
type piece struct {
	rank int
	sub  Subset
}

// Decomposition is every rank's subsets of a set of datasets, validated.
// Build it with [NewDecomposition] or [FromFiles].
type Decomposition struct {
	datasets []Dataset
	byID     map[int32]int
	ranks    [][]Subset        // per rank, sorted by variable id
	pieces   map[int32][]piece // per dataset, by rank then variable
}

// NewDecomposition merges the views of ranks 0..len(views)-1 and
// validates them: every definition passes [Dataset.Check]; one dataset id
// means one definition on every rank and on one rank it is given once
// ([ErrDuplicate]); two datasets do not share a name ([ErrDuplicate});
// every subset names a defined dataset ([ErrUnknown]), lies inside its
// shape ([ErrInvalid]) and maps a variable not mapped before on its rank
// ([ErrDuplicate]); no two subsets share an element ([ErrOverlap]); and
// the subsets of a dataset that is not Sparse cover every element
// ([ErrGap]).
func NewDecomposition(views []View) (*Decomposition, error) {
	return newDecomposition(views, true)
}

// Partial is [NewDecomposition] without the coverage rule: the subsets
// need not cover their datasets (they still must not overlap). It
// describes a request for some parts of the datasets, such as a
// hyperslab read from a checkpoint.
func Partial(views []View) (*Decomposition, error) {
	return newDecomposition(views, false)
}

func newDecomposition(views []View, complete bool) (*Decomposition, error) {
	d := &Decomposition{byID: map[int32]int{}, ranks: make([][]Subset, len(views)), pieces: map[int32][]piece{}}
	defRank := map[int32]int{}
	for r, v := range views {
		local := map[int32]bool{}
		for _, ds := range v.Datasets {
			if err := ds.Check(); err != nil {
				return nil, fmt.Errorf("%w: rank %d: %v", ErrInvalid, r, err)
			}
			if local[ds.ID] {
				return nil, fmt.Errorf("%w: rank %d defines dataset %d twice", ErrDuplicate, r, ds.ID)
			}
			local[ds.ID] = true
			ds = ds.Clone()
			ds.ElemSize = ds.Elem()
			if i, ok := d.byID[ds.ID]; ok {
				if !d.datasets[i].Equal(ds) {
					return nil, fmt.Errorf("%w: dataset id %d is %v on rank %d but %v on rank %d",
						ErrDuplicate, ds.ID, d.datasets[i], defRank[ds.ID], ds, r)
				}
				continue
			}
			d.byID[ds.ID] = len(d.datasets)
			defRank[ds.ID] = r
			d.datasets = append(d.datasets, ds)
		}
	}
	names := map[string]int32{}
	for _, ds := range d.datasets {
		if other, ok := names[ds.Name]; ok {
			return nil, fmt.Errorf("%w: datasets %d and %d are both named %q", ErrDuplicate, other, ds.ID, ds.Name)
		}
		names[ds.Name] = ds.ID
	}
	slices.SortFunc(d.datasets, func(a, b Dataset) int { return int(a.ID) - int(b.ID) })
	for i, ds := range d.datasets {
		d.byID[ds.ID] = i
	}
	for r, v := range views {
		seen := map[int32]bool{}
		subs := make([]Subset, 0, len(v.Subsets))
		for _, s := range v.Subsets {
			i, ok := d.byID[s.Dataset]
			if !ok {
				return nil, fmt.Errorf("%w: rank %d variable %d: subset of dataset %d, which no rank defines", ErrUnknown, r, s.VarID, s.Dataset)
			}
			if err := s.CheckIn(d.datasets[i]); err != nil {
				return nil, fmt.Errorf("%w: rank %d %v", ErrInvalid, r, err)
			}
			if seen[s.VarID] {
				return nil, fmt.Errorf("%w: rank %d maps variable %d onto two subsets", ErrDuplicate, r, s.VarID)
			}
			seen[s.VarID] = true
			s = s.Clone()
			subs = append(subs, s)
			d.pieces[s.Dataset] = append(d.pieces[s.Dataset], piece{rank: r, sub: s})
		}
		slices.SortFunc(subs, func(a, b Subset) int { return int(a.VarID) - int(b.VarID) })
		d.ranks[r] = subs
	}
	for _, ds := range d.datasets {
		if err := checkCoverage(ds, d.pieces[ds.ID], complete); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// FromFiles builds the decomposition recorded in the FTI-FF files of one
// checkpoint, rs[r] being rank r's file.
func FromFiles(rs []*fileformat.Reader) (*Decomposition, error) {
	views := make([]View, len(rs))
	for i, r := range rs {
		if r == nil {
			return nil, fmt.Errorf("%w: no file for rank %d", ErrInvalid, i)
		}
		if got := int(r.Meta().Rank); got != i {
			return nil, fmt.Errorf("%w: file of rank %d given as rank %d", ErrInvalid, got, i)
		}
		views[i] = View{Datasets: r.Datasets(), Subsets: r.Subsets()}
	}
	return NewDecomposition(views)
}

// Ranks returns the number of ranks.
func (d *Decomposition) Ranks() int { return len(d.ranks) }

// Datasets returns the datasets, sorted by id.
func (d *Decomposition) Datasets() []Dataset {
	out := make([]Dataset, len(d.datasets))
	for i, ds := range d.datasets {
		out[i] = ds.Clone()
	}
	return out
}

// Dataset returns the dataset with the given id.
func (d *Decomposition) Dataset(id int32) (Dataset, bool) {
	i, ok := d.byID[id]
	if !ok {
		return Dataset{}, false
	}
	return d.datasets[i].Clone(), true
}

// Subsets returns rank's subsets, sorted by variable id.
func (d *Decomposition) Subsets(rank int) []Subset {
	if rank < 0 || rank >= len(d.ranks) {
		return nil
	}
	out := make([]Subset, len(d.ranks[rank]))
	for i, s := range d.ranks[rank] {
		out[i] = s.Clone()
	}
	return out
}

// SubsetOf returns the subset variable varID of rank maps onto.
func (d *Decomposition) SubsetOf(rank int, varID int32) (Subset, bool) {
	if rank < 0 || rank >= len(d.ranks) {
		return Subset{}, false
	}
	subs := d.ranks[rank]
	i, ok := slices.BinarySearchFunc(subs, varID, func(s Subset, id int32) int { return int(s.VarID) - int(id) })
	if !ok {
		return Subset{}, false
	}
	return subs[i].Clone(), true
}

// VarSize returns the byte size of the variable of subset s.
func (d *Decomposition) VarSize(s Subset) int64 {
	ds, ok := d.Dataset(s.Dataset)
	if !ok {
		return 0
	}
	return s.Elements() * int64(ds.Elem())
}

func describe(p piece) string {
	return fmt.Sprintf("rank %d variable %d (offset %v count %v)", p.rank, p.sub.VarID, p.sub.Offset, p.sub.Count)
}

// intersect returns the intersection of two boxes of equal rank, and
// whether it is non-empty.
func intersect(ao, ac, bo, bc []int64) (lo, cnt []int64, ok bool) {
	lo = make([]int64, len(ao))
	cnt = make([]int64, len(ao))
	for k := range ao {
		l := max(ao[k], bo[k])
		h := min(ao[k]+ac[k], bo[k]+bc[k])
		if h <= l {
			return nil, nil, false
		}
		lo[k], cnt[k] = l, h-l
	}
	return lo, cnt, true
}

func overlaps(ao, ac, bo, bc []int64) bool {
	for k := range ao {
		if max(ao[k], bo[k]) >= min(ao[k]+ac[k], bo[k]+bc[k]) {
			return false
		}
	}
	return true
}

// checkCoverage refuses overlapping subsets of ds and, unless ds is
// Sparse, subsets that leave an element uncovered.
func checkCoverage(ds Dataset, ps []piece, complete bool) error {
	var live []piece
	var vol int64
	for _, p := range ps {
		if n := p.sub.Elements(); n > 0 {
			live = append(live, p)
			vol += n
		}
	}
	if err := findOverlap(ds, live); err != nil {
		return err
	}
	if !complete || ds.Sparse || vol == ds.Elements() {
		return nil
	}
	return GapError(ds, countRanks(live), vol, uncovered(ds, live))
}

// findOverlap returns the error naming the first two pieces (in the
// order given, along the sweep) that share an element.
func findOverlap(ds Dataset, live []piece) error {
	// Sweep along the dimension with the most distinct offsets, so that
	// typical decompositions compare each subset with few others.
	sweep := 0
	best := -1
	for k := range ds.Shape {
		seen := map[int64]bool{}
		for _, p := range live {
			seen[p.sub.Offset[k]] = true
		}
		if len(seen) > best {
			best, sweep = len(seen), k
		}
	}
	live = slices.Clone(live)
	sort.SliceStable(live, func(i, j int) bool { return live[i].sub.Offset[sweep] < live[j].sub.Offset[sweep] })
	for i := range live {
		a := live[i].sub
		end := a.Offset[sweep] + a.Count[sweep]
		for j := i + 1; j < len(live) && live[j].sub.Offset[sweep] < end; j++ {
			b := live[j].sub
			if lo, cnt, ok := intersect(a.Offset, a.Count, b.Offset, b.Count); ok {
				return fmt.Errorf("%w: dataset %d %q: %s and %s share the elements at offset %v count %v",
					ErrOverlap, ds.ID, ds.Name, describe(live[i]), describe(live[j]), lo, cnt)
			}
		}
	}
	return nil
}

type gapError struct{ msg string }

func (e *gapError) Error() string { return e.msg }
func (e *gapError) Unwrap() error { return ErrGap }

func countRanks(ps []piece) int {
	seen := map[int]bool{}
	for _, p := range ps {
		seen[p.rank] = true
	}
	return len(seen)
}

// uncovered returns an element of ds no piece covers, or nil when
// finding one would cost too much.
func uncovered(ds Dataset, ps []piece) []int64 {
	return uncoveredIn(make([]int64, len(ds.Shape)), ds.Shape, ps)
}

// uncoveredIn returns an element of the box (off, cnt) no piece
// covers, or nil when finding one would cost too much. Some uncovered
// element has, in every dimension, the box's first coordinate or the
// end of some piece (move any uncovered element down one dimension at a
// time until it meets a piece or the box's edge), so those candidates
// suffice.
func uncoveredIn(off, cnt []int64, ps []piece) []int64 {
	const budget = 1 << 22
	d := len(off)
	cand := make([][]int64, d)
	work := int64(max(len(ps), 1))
	for k := range d {
		set := map[int64]bool{off[k]: true}
		for _, p := range ps {
			if e := p.sub.Offset[k] + p.sub.Count[k]; e > off[k] && e < off[k]+cnt[k] {
				set[e] = true
			}
		}
		for x := range set {
			cand[k] = append(cand[k], x)
		}
		slices.Sort(cand[k])
		work *= int64(len(cand[k]))
		if work > budget {
			return nil
		}
	}
	pt := make([]int64, d)
	idx := make([]int, d)
	one := make([]int64, d)
	for k := range one {
		one[k] = 1
	}
	for {
		for k := range pt {
			pt[k] = cand[k][idx[k]]
		}
		covered := false
		for _, p := range ps {
			if overlaps(pt, one, p.sub.Offset, p.sub.Count) {
				covered = true
				break
			}
		}
		if !covered {
			return pt
		}
		k := len(idx) - 1
		for k >= 0 {
			idx[k]++
			if idx[k] < len(cand[k]) {
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
