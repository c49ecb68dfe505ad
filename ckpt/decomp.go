package ckpt

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/internal/exchange"
)

// The decomposition of the global datasets is checked spread over the
// ranks, so that no rank holds every rank's subsets:
//
//  1. The definitions go up a tree and are merged (one per dataset id,
//     with the first conflict found); the merged set comes back down.
//  2. Each rank checks its own subsets against the merged definitions.
//  3. One vector reduction sums, per dataset, the subsets, the ranks
//     holding some, their volume and their extents.
//  4. Each dataset is cut into bins (dataset.BinsFor: about one per
//     subset, at most one per rank). Every subset goes to the ranks of
//     the bins it meets, which check there that no two share an element
//     and how much of the bin they cover.
//  5. With no overlap, the volumes summed in step 3 tell whether every
//     element is covered; if not, the first bin short of elements names
//     one no subset covers.
//
// An error is agreed by a reduction of its key (dataset, kind, bin or
// rank) and broadcast by the rank that has the smallest. A rank's work
// and the bytes it receives are its own subsets, those of its bins and
// the merged definitions, over O(log P) steps.

// Tags of the spread-out dataset protocols.
const (
	tagDefs = 0x4453 // "DS"
	tagBins = 0x4442 // "DB"
)

// rankView is one rank's view in a spread-out check: this rank's own,
// or at a restart an old rank's this rank speaks for.
type rankView struct {
	rank int
	view dataset.View
}

// dsStats are the sums step 3 gives for one dataset.
type dsStats struct {
	pieces, ranks, vol int64
	extent             []int64 // the sum of the subsets' counts, per dimension
}

// mean returns the mean extent of the subsets along each dimension.
func (s dsStats) mean() []float64 {
	out := make([]float64, len(s.extent))
	for k, e := range s.extent {
		if s.pieces > 0 {
			out[k] = float64(e) / float64(s.pieces)
		}
	}
	return out
}

// spread is a decomposition checked spread over the ranks: the merged
// definitions (sorted by id) and the sums of step 3.
type spread struct {
	defs  []Dataset
	byID  map[int32]int
	stats []dsStats
}

// dataset returns the merged definition of id.
func (s *spread) dataset(id int32) (Dataset, bool) {
	i, ok := s.byID[id]
	if !ok {
		return Dataset{}, false
	}
	return s.defs[i], true
}

// checkSpread checks the decomposition the ranks' views make together
// (complete: every element of a dataset that is not Sparse covered).
// Collective; the error is the same on every rank and wraps the dataset
// package's sentinel.
func checkSpread(c comm.Comm, views []rankView, complete bool) (*spread, error) {
	sp, err := mergeDefs(c, views)
	if err != nil {
		return nil, err
	}
	key, lerr := int64(math.MaxInt64), error(nil)
	for _, rv := range views {
		if lerr = checkSubsets(sp, rv); lerr != nil {
			key = int64(rv.rank)
			break
		}
	}
	if err := agreeFirst(c, key, lerr); err != nil {
		return nil, err
	}
	if err := sp.sum(c, views); err != nil {
		return nil, err
	}
	return sp, sp.checkBins(c, views, complete)
}

// checkSubsets checks one rank's subsets against the merged definitions.
func checkSubsets(sp *spread, rv rankView) error {
	seen := map[int32]bool{}
	for _, s := range rv.view.Subsets {
		d, ok := sp.dataset(s.Dataset)
		if !ok {
			return fmt.Errorf("%w: rank %d variable %d: subset of dataset %d, which no rank defines", dataset.ErrUnknown, rv.rank, s.VarID, s.Dataset)
		}
		if err := s.CheckIn(d); err != nil {
			return fmt.Errorf("%w: rank %d %v", dataset.ErrInvalid, rv.rank, err)
		}
		if seen[s.VarID] {
			return fmt.Errorf("%w: rank %d maps variable %d onto two subsets", dataset.ErrDuplicate, rv.rank, s.VarID)
		}
		seen[s.VarID] = true
	}
	return nil
}

// sum computes the statistics of step 3 with one vector reduction.
func (sp *spread) sum(c comm.Comm, views []rankView) error {
	at := make([]int, len(sp.defs)+1)
	for i, d := range sp.defs {
		at[i+1] = at[i] + 3 + len(d.Shape)
	}
	v := make([]int64, at[len(sp.defs)])
	for _, rv := range views {
		held := map[int]bool{}
		for _, s := range rv.view.Subsets {
			if s.Elements() == 0 {
				continue
			}
			i := sp.byID[s.Dataset]
			v[at[i]]++
			if !held[i] {
				held[i] = true
				v[at[i]+1]++
			}
			v[at[i]+2] += s.Elements()
			for k, n := range s.Count {
				v[at[i]+3+k] += n
			}
		}
	}
	tot, err := allreduceInts(c, v, comm.Sum)
	if err != nil {
		return err
	}
	sp.stats = make([]dsStats, len(sp.defs))
	for i := range sp.defs {
		x := tot[at[i]:at[i+1]]
		sp.stats[i] = dsStats{pieces: x[0], ranks: x[1], vol: x[2], extent: slices.Clone(x[3:])}
	}
	return nil
}

// binOwner returns the rank that checks bin b of n over p ranks.
func binOwner(b, n int64, p int) int {
	return int(b * int64(p) / max(n, 1))
}

// binKey orders the errors of the bins: by dataset, overlaps first.
func binKey(ds int, gap bool, bin int64) int64 {
	k := int64(2 * ds)
	if gap {
		k++
	}
	return k<<40 | bin
}

// checkBins runs steps 4 and 5.
func (sp *spread) checkBins(c comm.Comm, views []rankView, complete bool) error {
	bins := make([]dataset.Bins, len(sp.defs))
	for i, d := range sp.defs {
		if sp.stats[i].pieces > 0 {
			bins[i] = dataset.BinsFor(d.Shape, sp.stats[i].mean(), int64(c.Size()))
		}
	}
	out := map[int][]byte{}
	for _, rv := range views {
		for _, s := range rv.view.Subsets {
			i := sp.byID[s.Dataset]
			for _, b := range bins[i].Cover(s.Offset, s.Count) {
				dst := binOwner(b, bins[i].Len(), c.Size())
				out[dst] = appendBinPiece(out[dst], i, b, dataset.Piece{Rank: rv.rank, Subset: s})
			}
		}
	}
	in, err := exchange.Sparse(c, tagBins, exchange.ByPeer(out))
	if err != nil {
		return err
	}
	type binID struct {
		ds  int
		bin int64
	}
	got := map[binID][]dataset.Piece{}
	var lerr error
	for _, m := range in {
		if err := readBinPieces(m.Data, sp.defs, func(ds int, bin int64, p dataset.Piece) {
			got[binID{ds, bin}] = append(got[binID{ds, bin}], p)
		}); err != nil && lerr == nil {
			lerr = fmt.Errorf("%w: subsets from rank %d: %v", dataset.ErrInvalid, m.Peer, err)
		}
	}
	ids := make([]binID, 0, len(got))
	for id := range got {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b binID) int { return cmp.Or(cmp.Compare(a.ds, b.ds), cmp.Compare(a.bin, b.bin)) })
	key := int64(math.MaxInt64)
	if lerr != nil {
		key = -1
	}
	for _, id := range ids {
		if key < 0 {
			break
		}
		d, st := sp.defs[id.ds], sp.stats[id.ds]
		off, cnt := bins[id.ds].Box(id.bin)
		covered, gap, err := dataset.CheckBox(d, off, cnt, got[id])
		switch {
		case err != nil && binKey(id.ds, false, id.bin) < key:
			key, lerr = binKey(id.ds, false, id.bin), err
		case err == nil && complete && !d.Sparse && st.vol != d.Elements() && covered < boxVolume(cnt) && binKey(id.ds, true, id.bin) < key:
			key, lerr = binKey(id.ds, true, id.bin), dataset.GapError(d, int(st.ranks), st.vol, gap)
		}
	}
	// A bin no subset meets holds no piece here: it is short of every
	// element. Its owner knows it only by the volumes.
	if key >= 0 {
		for i, d := range sp.defs {
			st := sp.stats[i]
			if !complete || d.Sparse || st.vol == d.Elements() {
				continue
			}
			if st.pieces == 0 {
				if c.Rank() == 0 {
					k := binKey(i, true, 0)
					if k < key {
						key, lerr = k, dataset.GapError(d, 0, 0, make([]int64, len(d.Shape)))
					}
				}
				continue
			}
			for b := range bins[i].Len() {
				if binOwner(b, bins[i].Len(), c.Size()) != c.Rank() {
					continue
				}
				if _, ok := got[binID{i, b}]; ok {
					continue
				}
				if k := binKey(i, true, b); k < key {
					off, _ := bins[i].Box(b)
					key, lerr = k, dataset.GapError(d, int(st.ranks), st.vol, off)
				}
				break
			}
		}
	}
	return agreeFirst(c, key, lerr)
}

func boxVolume(cnt []int64) int64 {
	n := int64(1)
	for _, x := range cnt {
		n *= x
	}
	return n
}

// appendBinPiece encodes piece p of dataset ds for bin b: the dataset
// index, the bin, the rank, the variable and, per dimension, offset and
// count (the dimensions are the dataset's).
func appendBinPiece(b []byte, ds int, bin int64, p dataset.Piece) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(ds))
	b = binary.LittleEndian.AppendUint64(b, uint64(bin))
	b = appendPiece(b, p)
	return b
}

func appendPiece(b []byte, p dataset.Piece) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(p.Rank))
	b = binary.LittleEndian.AppendUint32(b, uint32(p.Subset.VarID))
	b = binary.LittleEndian.AppendUint32(b, uint32(p.Subset.Dataset))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Subset.Offset)))
	for k := range p.Subset.Offset {
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Subset.Offset[k]))
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Subset.Count[k]))
	}
	return b
}

// readPiece decodes a piece at the start of b and returns the rest.
func readPiece(b []byte) (dataset.Piece, []byte, error) {
	if len(b) < 16 {
		return dataset.Piece{}, nil, fmt.Errorf("%d bytes left, a subset needs 16", len(b))
	}
	p := dataset.Piece{Rank: int(binary.LittleEndian.Uint32(b))}
	p.Subset.VarID = int32(binary.LittleEndian.Uint32(b[4:]))
	p.Subset.Dataset = int32(binary.LittleEndian.Uint32(b[8:]))
	nd := int(binary.LittleEndian.Uint32(b[12:]))
	b = b[16:]
	if nd > dataset.MaxRank || len(b) < 16*nd {
		return dataset.Piece{}, nil, fmt.Errorf("a subset of %d dimensions in %d bytes", nd, len(b))
	}
	p.Subset.Offset, p.Subset.Count = make([]int64, nd), make([]int64, nd)
	for k := range nd {
		p.Subset.Offset[k] = int64(binary.LittleEndian.Uint64(b[16*k:]))
		p.Subset.Count[k] = int64(binary.LittleEndian.Uint64(b[16*k+8:]))
	}
	return p, b[16*nd:], nil
}

// readBinPieces decodes a message of appendBinPiece records.
func readBinPieces(b []byte, defs []Dataset, fn func(ds int, bin int64, p dataset.Piece)) error {
	for len(b) > 0 {
		if len(b) < 12 {
			return fmt.Errorf("%d bytes left, a record needs 12", len(b))
		}
		ds, bin := int(binary.LittleEndian.Uint32(b)), int64(binary.LittleEndian.Uint64(b[4:]))
		p, rest, err := readPiece(b[12:])
		if err != nil {
			return err
		}
		if ds >= len(defs) || len(p.Subset.Offset) != len(defs[ds].Shape) || p.Subset.Dataset != defs[ds].ID {
			return fmt.Errorf("a subset of dataset %d filed under dataset %d of %d", p.Subset.Dataset, ds, len(defs))
		}
		fn(ds, bin, p)
		b = rest
	}
	return nil
}

// The errors a spread-out step agrees on carry the sentinels they wrap
// by a mask of these.
var sharedKinds = []error{dataset.ErrInvalid, dataset.ErrDuplicate, dataset.ErrOverlap, dataset.ErrGap,
	dataset.ErrUnknown, dataset.ErrMismatch, ErrDataset, ErrVarMismatch, ErrNotProtected, ErrUnrecoverable, ErrConfig}

// kindMask returns the mask of the sentinels err wraps.
func kindMask(err error) uint32 {
	var m uint32
	for i, k := range sharedKinds {
		if errors.Is(err, k) {
			m |= 1 << i
		}
	}
	return m
}

// sharedError is an error every rank returns alike: the message of the
// rank whose error came first, and the sentinels it wraps. On a rank
// that failed it also wraps that rank's own error.
type sharedError struct {
	msg   string
	kinds []error
	local error
}

func newShared(msg string, mask uint32, local error) *sharedError {
	e := &sharedError{msg: msg, local: local}
	for i, k := range sharedKinds {
		if mask&(1<<i) != 0 {
			e.kinds = append(e.kinds, k)
		}
	}
	return e
}

func (e *sharedError) Error() string { return e.msg }

func (e *sharedError) Unwrap() []error {
	if e.local != nil {
		return append(slices.Clone(e.kinds), e.local)
	}
	return e.kinds
}

// agreeFirst returns, on every rank, the error with the smallest key
// (nil when no rank has one). Success costs one fixed-size reduction;
// on a failure two more and a broadcast of one message.
func agreeFirst(c comm.Comm, key int64, local error) error {
	if local == nil {
		key = math.MaxInt64
	}
	least, err := c.AllreduceInt64(key, comm.Min)
	if err != nil {
		return errors.Join(local, err)
	}
	if least == math.MaxInt64 {
		return nil
	}
	cand := int64(math.MaxInt64)
	if local != nil && key == least {
		cand = int64(c.Rank())
	}
	winner, err := c.AllreduceInt64(cand, comm.Min)
	if err != nil {
		return errors.Join(local, err)
	}
	var b []byte
	if int64(c.Rank()) == winner {
		b = binary.LittleEndian.AppendUint32(nil, kindMask(local))
		b = append(b, local.Error()...)
	}
	b, err = comm.BcastBytes(c, int(winner), b)
	if err != nil {
		return errors.Join(local, err)
	}
	if len(b) < 4 {
		return fmt.Errorf("%w: a %d-byte error from rank %d", comm.ErrBadArgument, len(b), winner)
	}
	return newShared(string(b[4:]), binary.LittleEndian.Uint32(b), local)
}

// defEntry is one dataset id in the merge of definitions: the definition
// of the lowest rank defining it, and the first other definition found.
type defEntry struct {
	Def       Dataset  `json:"d"`
	Rank      int      `json:"r"`
	Other     *Dataset `json:"o,omitempty"`
	OtherRank int      `json:"or,omitempty"`
}

// defSet is the value merged up the tree: the entries by id and the
// first error a rank found in its own definitions.
type defSet struct {
	Defs    []defEntry `json:"defs"`
	ErrRank int        `json:"er,omitempty"`
	ErrKind uint32     `json:"ek,omitempty"`
	ErrMsg  string     `json:"em,omitempty"`
}

// add merges entry e (of ranks above those already merged).
func (s *defSet) add(e defEntry) {
	i, ok := slices.BinarySearchFunc(s.Defs, e.Def.ID, func(x defEntry, id int32) int { return cmp.Compare(x.Def.ID, id) })
	if !ok {
		s.Defs = slices.Insert(s.Defs, i, e)
		return
	}
	x := &s.Defs[i]
	switch {
	case x.Other != nil: // the first conflict stays
	case !x.Def.Equal(e.Def):
		x.Other, x.OtherRank = &e.Def, e.Rank
	case e.Other != nil:
		x.Other, x.OtherRank = e.Other, e.OtherRank
	}
}

// fail records err of rank unless a lower rank's is there.
func (s *defSet) fail(rank int, err error) {
	if s.ErrMsg != "" && s.ErrRank <= rank {
		return
	}
	s.ErrRank, s.ErrMsg, s.ErrKind = rank, err.Error(), kindMask(err)
}

// mergeDefs merges the definitions of every rank's views (step 1) and
// checks them: each valid, defined once per rank, one definition per id,
// one id per name. Collective.
func mergeDefs(c comm.Comm, views []rankView) (*spread, error) {
	var mine defSet
	for _, rv := range views {
		local := map[int32]bool{}
		for _, d := range rv.view.Datasets {
			if err := d.Check(); err != nil {
				mine.fail(rv.rank, fmt.Errorf("%w: rank %d: %v", dataset.ErrInvalid, rv.rank, err))
				continue
			}
			if local[d.ID] {
				mine.fail(rv.rank, fmt.Errorf("%w: rank %d defines dataset %d twice", dataset.ErrDuplicate, rv.rank, d.ID))
				continue
			}
			local[d.ID] = true
			d = d.Clone()
			d.ElemSize = d.Elem()
			mine.add(defEntry{Def: d, Rank: rv.rank})
		}
	}
	raw, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	var derr error
	raw, err = exchange.Merge(c, tagDefs, raw, func(lo, hi []byte) []byte {
		var a, b defSet
		if err := errors.Join(json.Unmarshal(lo, &a), json.Unmarshal(hi, &b)); err != nil {
			derr = err
			return lo
		}
		for _, e := range b.Defs {
			a.add(e)
		}
		if b.ErrMsg != "" {
			a.fail(b.ErrRank, newShared(b.ErrMsg, b.ErrKind, nil))
		}
		out, _ := json.Marshal(a)
		return out
	})
	if err != nil {
		return nil, err
	}
	var all defSet
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("ckpt: decode the merged dataset definitions: %w", err)
	}
	// A rank whose merge could not decode a child's value is a bug or
	// memory damage: agreed like any other error.
	if err := agreeFirst(c, -1, derr); err != nil {
		return nil, err
	}
	return all.check()
}

// check turns the merged set into the decomposition's definitions, or
// the first error: a rank's own, then a conflict, then a shared name.
func (s defSet) check() (*spread, error) {
	var conflict *defEntry
	for i, e := range s.Defs {
		if e.Other != nil && (conflict == nil || e.OtherRank < conflict.OtherRank) {
			conflict = &s.Defs[i]
		}
	}
	switch {
	case s.ErrMsg != "" && (conflict == nil || s.ErrRank <= conflict.OtherRank):
		return nil, newShared(s.ErrMsg, s.ErrKind, nil)
	case conflict != nil:
		return nil, newShared(fmt.Sprintf("%v: dataset id %d is %v on rank %d but %v on rank %d",
			dataset.ErrDuplicate, conflict.Def.ID, conflict.Def, conflict.Rank, *conflict.Other, conflict.OtherRank), kindMask(dataset.ErrDuplicate), nil)
	}
	// Names in the order the datasets first appear.
	order := slices.Clone(s.Defs)
	slices.SortStableFunc(order, func(a, b defEntry) int { return cmp.Compare(a.Rank, b.Rank) })
	names := map[string]int32{}
	for _, e := range order {
		if other, ok := names[e.Def.Name]; ok {
			return nil, newShared(fmt.Sprintf("%v: datasets %d and %d are both named %q",
				dataset.ErrDuplicate, other, e.Def.ID, e.Def.Name), kindMask(dataset.ErrDuplicate), nil)
		}
		names[e.Def.Name] = e.Def.ID
	}
	sp := &spread{byID: map[int32]int{}}
	for i, e := range s.Defs {
		sp.defs = append(sp.defs, e.Def)
		sp.byID[e.Def.ID] = i
	}
	return sp, nil
}
