package ckpt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/h5ckpt"
	"github.com/ftigo/ftigo/internal/exchange"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// errReshaped says a local call met a restart whose data must be
// redistributed collectively.
var errReshaped = errors.New("ckpt: restart of another shape")

// reshapeState is a restart from data another shape wrote (another rank
// count, ranks moved between nodes, or a level-9 HDF5 file), as one rank
// sees it: the sources it knows, what its home old ranks stored, and the
// readers this rank opened. No rank holds what every old rank stored.
type reshapeState struct {
	what     string // names the checkpoint in messages
	oldRanks int
	// sources are the old ranks' sources this rank knows, by old rank:
	// those it verified (with their images), those of the old ranks it
	// is home for (levels.HomeOf), and those its redistributions need.
	sources map[int]levels.ReshapeSource
	// h5Path, h5Drv: the HDF5 file of sources with IsH5.
	h5Path string
	h5Drv  vfd.Driver
	// homeMeta is what each old rank this rank is home for stored.
	homeMeta map[int]oldMeta
	// own is the old rank whose variables outside the datasets this
	// rank takes (q*N/M), and ownMeta what it stored.
	own     int
	ownMeta oldMeta
	// old holds the checkpoint's datasets and the sums of their subsets.
	old *spread
	// storedIDs are the variable ids every old rank stored, together.
	storedIDs []int

	// sent and received count the bytes this rank's redistributions
	// shipped over the communicator.
	sent, received int64

	mu      sync.Mutex
	readers map[int]varReader
	h5      *h5ckpt.File
	closers []io.Closer
}

// oldMeta is what one old rank stored: its variables and its view of the
// global datasets.
type oldMeta struct {
	Vars []fileformat.VarInfo `json:"vars"`
	View dataset.View         `json:"view"`
	Err  string               `json:"err,omitempty"`
}

// reader returns a reader of old rank o's data on this rank, opening it
// on first use: an FTI-FF file whose checksum must be the one verified at
// Init, or the rank's part of the HDF5 file.
func (s *reshapeState) reader(o int, global levels.Store, nodes func(int) levels.Store, log *zap.Logger) (varReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rd, ok := s.readers[o]; ok {
		return rd, nil
	}
	src, ok := s.sources[o]
	if !ok {
		return nil, fmt.Errorf("ckpt: old rank %d of %d: no source known on this rank", o, s.oldRanks)
	}
	var rd varReader
	if src.IsH5() {
		if s.h5Path == "" {
			s.h5Path, s.h5Drv = global.Path(src.Entry.Attrs[levels.AttrContainer]), global.Driver
		}
		if s.h5 == nil {
			hf, err := h5ckpt.Open(s.h5Drv, s.h5Path, h5ckpt.WithLogger(log))
			if err != nil {
				return nil, fmt.Errorf("ckpt: open %s: %w", s.h5Path, err)
			}
			s.h5 = hf
			s.closers = append(s.closers, hf)
		}
		rd = &h5Rank{f: s.h5, rank: o}
	} else {
		var f vfd.File
		var opts []fileformat.Option
		if src.Image != nil {
			// Verified by this rank at Init as it was read into memory.
			f = vfd.BytesFile(src.Entry.Name, src.Image)
			opts = append(opts, fileformat.WithVerifiedData())
		} else {
			var err error
			if f, err = src.Open(global, nodes); err != nil {
				return nil, fmt.Errorf("ckpt: open the data of old rank %d: %w", o, err)
			}
		}
		ff, err := fileformat.Open(f, opts...)
		if err == nil && levels.Digest(ff.Summary().Checksum) != src.Checksum {
			err = &levels.CorruptionError{Path: f.Name(), Rank: o, Err: fmt.Errorf("%w: FTI-FF checksum %s, rank %d verified %s at start-up",
				levels.ErrDigestMismatch, levels.Digest(ff.Summary().Checksum), src.Reader, src.Checksum)}
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("ckpt: read the data of old rank %d: %w", o, err), f.Close())
		}
		s.closers = append(s.closers, f)
		rd = ff
	}
	if s.readers == nil {
		s.readers = map[int]varReader{}
	}
	s.readers[o] = rd
	return rd, nil
}

// dropImages lets go of the in-memory images of the sources this rank
// verified (and of the readers over them): a later read of them opens
// the files and checks every block again.
func (s *reshapeState) dropImages() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for o, src := range s.sources {
		if src.Image != nil {
			src.Image = nil
			s.sources[o] = src
			delete(s.readers, o)
		}
	}
}

func (s *reshapeState) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.closers {
		_ = c.Close()
	}
	s.closers, s.readers, s.h5 = nil, nil, nil
	for o, src := range s.sources {
		src.Image = nil
		s.sources[o] = src
	}
}

// oldSource adapts the old ranks' readers to dataset.Source.
type oldSource struct {
	r *Runtime
}

func (o oldSource) ReadVarAt(rank int, id int32, dst []byte, off int64) error {
	rd, err := o.r.reshape.reader(rank, o.r.env.Global, o.r.nodeStore, o.r.log)
	if err != nil {
		return err
	}
	return rd.ReadVarAt(id, dst, off)
}

// Tags of the spread restart.
const (
	tagMeta    = 0x5243 // "RC": what the old ranks stored, to their homes
	tagIDs     = 0x5244 // the stored variable ids, merged
	tagOwnAsk  = 0x5245 // a rank asks for its own old rank's metadata
	tagOwnTell = 0x5246 // and gets it
)

// metaMsg carries old rank O's metadata (and, to a rank that asked for
// it, its source).
type metaMsg struct {
	O    int                   `json:"o"`
	Meta oldMeta               `json:"m"`
	Src  *levels.ReshapeSource `json:"s,omitempty"`
}

// startReshape records the restart from st: each rank that verified an
// old rank's data reads what it stored and tells its home; the homes
// check the old decomposition together, spread over the ranks; every
// rank learns the metadata of its own old rank (q*N/M). Collective.
func (r *Runtime) startReshape(st *reshapeState, verified, home map[int]levels.ReshapeSource) error {
	r.reshape = st
	size := r.c.Size()
	st.sources = map[int]levels.ReshapeSource{}
	for o, src := range home {
		st.sources[o] = src
	}
	for o, src := range verified {
		st.sources[o] = src
	}
	out := map[int][]byte{}
	for _, o := range sortedKeys(verified) {
		var m oldMeta
		rd, err := st.reader(o, r.env.Global, r.nodeStore, r.log)
		if err == nil {
			m.Vars = rd.Vars()
			m.View = oldView(rd)
		} else {
			m.Err = err.Error()
		}
		appendJSON(out, levels.HomeOf(o, st.oldRanks, size), metaMsg{O: o, Meta: m})
	}
	in, err := exchange.Sparse(r.c, tagMeta, exchange.ByPeer(out))
	if err != nil {
		return fmt.Errorf("ckpt: exchange what the old ranks stored: %w", err)
	}
	st.homeMeta = map[int]oldMeta{}
	var lerr error
	lkey := int64(math.MaxInt64)
	fail := func(o int, err error) {
		if int64(o) < lkey {
			lkey, lerr = int64(o), err
		}
	}
	for _, m := range in {
		if derr := eachJSON(m.Data, func(x metaMsg) {
			st.homeMeta[x.O] = x.Meta
			if x.Meta.Err != "" {
				fail(x.O, fmt.Errorf("ckpt: restart from %s: old rank %d (read by rank %d): %s", st.what, x.O, m.Peer, x.Meta.Err))
			}
		}); derr != nil {
			fail(-1, fmt.Errorf("ckpt: decode rank %d's old metadata: %w", m.Peer, derr))
		}
	}
	homes := sortedKeys(home)
	for _, o := range homes {
		if _, ok := st.homeMeta[o]; !ok {
			fail(o, fmt.Errorf("ckpt: restart from %s: old rank %d: no rank read its metadata", st.what, o))
		}
	}
	if err := agreeFirst(r.c, lkey, lerr); err != nil {
		return err
	}
	views := make([]rankView, 0, len(homes))
	var ids []int
	for _, o := range homes {
		views = append(views, rankView{rank: o, view: st.homeMeta[o].View})
		for _, v := range st.homeMeta[o].Vars {
			ids = append(ids, int(v.ID))
		}
	}
	if st.old, err = checkSpread(r.c, views, true); err != nil {
		return fmt.Errorf("ckpt: restart from %s: the global datasets it recorded: %w", st.what, err)
	}
	if st.storedIDs, err = mergeIDs(r.c, ids); err != nil {
		return err
	}
	return r.fetchOwn(st)
}

// fetchOwn asks the home of this rank's own old rank for what it stored
// and where its data is. Collective.
func (r *Runtime) fetchOwn(st *reshapeState) error {
	me, size := r.c.Rank(), r.c.Size()
	st.own = int(int64(me) * int64(st.oldRanks) / int64(size))
	out := map[int][]byte{}
	appendJSON(out, levels.HomeOf(st.own, st.oldRanks, size), st.own)
	in, err := exchange.Sparse(r.c, tagOwnAsk, exchange.ByPeer(out))
	if err != nil {
		return fmt.Errorf("ckpt: ask for the old ranks' metadata: %w", err)
	}
	answers := map[int][]byte{}
	var lerr error
	for _, m := range in {
		answers[m.Peer] = nil
		if derr := eachJSON(m.Data, func(o int) {
			src := st.sources[o]
			one := map[int][]byte{}
			appendJSON(one, 0, metaMsg{O: o, Meta: st.homeMeta[o], Src: &src})
			answers[m.Peer] = append(answers[m.Peer], one[0]...)
		}); derr != nil && lerr == nil {
			lerr = fmt.Errorf("ckpt: decode rank %d's question: %w", m.Peer, derr)
		}
	}
	home := levels.HomeOf(st.own, st.oldRanks, size)
	got := false
	got2, err := exchange.Reply(r.c, tagOwnTell, []int{home}, answers)
	if err != nil {
		return fmt.Errorf("ckpt: send the old ranks' metadata: %w", err)
	}
	if derr := eachJSON(got2[home], func(x metaMsg) {
		if x.O == st.own && x.Src != nil {
			st.ownMeta, got = x.Meta, true
			if _, ok := st.sources[x.O]; !ok {
				st.sources[x.O] = *x.Src
			}
		}
	}); derr != nil && lerr == nil {
		lerr = fmt.Errorf("ckpt: decode rank %d's answer: %w", home, derr)
	}
	if !got && lerr == nil {
		lerr = fmt.Errorf("ckpt: restart from %s: no answer about old rank %d", st.what, st.own)
	}
	return agreeFirst(r.c, int64(me), lerr)
}

// mergeIDs returns the union of every rank's ids, sorted. Collective.
func mergeIDs(c comm.Comm, ids []int) ([]int, error) {
	slices.Sort(ids)
	raw, _ := json.Marshal(slices.Compact(ids))
	raw, err := exchange.Merge(c, tagIDs, raw, func(lo, hi []byte) []byte {
		var a, b []int
		if json.Unmarshal(lo, &a) != nil || json.Unmarshal(hi, &b) != nil {
			return lo
		}
		a = append(a, b...)
		slices.Sort(a)
		out, _ := json.Marshal(slices.Compact(a))
		return out
	})
	if err != nil {
		return nil, fmt.Errorf("ckpt: merge the stored variable ids: %w", err)
	}
	var all []int
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("ckpt: decode the stored variable ids: %w", err)
	}
	return all, nil
}

// appendJSON appends v, one line of JSON, to the message for dst.
func appendJSON(out map[int][]byte, dst int, v any) {
	b, _ := json.Marshal(v) // the types of this package marshal
	out[dst] = append(append(out[dst], b...), '\n')
}

// eachJSON decodes every line of b as a T.
func eachJSON[T any](b []byte, fn func(T)) error {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			i = len(b)
		}
		if i > 0 {
			var v T
			if err := json.Unmarshal(b[:i], &v); err != nil {
				return err
			}
			fn(v)
		}
		b = b[min(i+1, len(b)):]
	}
	return nil
}

// sortedKeys returns the keys of m, ascending.
func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// oldView returns the datasets and subsets a reader's file recorded.
func oldView(rd varReader) dataset.View {
	switch x := rd.(type) {
	case *fileformat.Reader:
		return dataset.View{Datasets: x.Datasets(), Subsets: x.Subsets()}
	case *h5Rank:
		dec := x.f.Decomposition()
		return dataset.View{Datasets: dec.Datasets(), Subsets: dec.Subsets(x.rank)}
	}
	return dataset.View{}
}

// Reshaped reports whether the run restarted from data another shape
// wrote: a checkpoint of another number of ranks, one whose ranks ran on
// other nodes, or a level-9 HDF5 file. Recover, RecoverVar and
// RecoverVarByName are then collective: every rank calls them, with the
// same variable for the last two, because a rank's data may have to come
// from files only other ranks can read.
func (r *Runtime) Reshaped() bool { return r != nil && r.reshape != nil }

// OldRanks returns the number of ranks that wrote the data the run
// restarted from (this run's size after a restart of the same shape, 0
// on a fresh run).
func (r *Runtime) OldRanks() int {
	switch {
	case r == nil || r.from == nil:
		return 0
	case r.reshape != nil:
		return r.reshape.oldRanks
	}
	return r.from.Ranks
}

// plainSource returns the old rank whose copy of a variable outside every
// global dataset this rank receives: old rank floor(q*N/M) for new rank q
// of M and N old ranks, defined when one count divides the other (M = N:
// the same rank; N = kM: the first of the k old ranks q replaces; M = kN:
// the old rank each group of k new ranks comes from).
func plainSource(q, newRanks, oldRanks int) (int, bool) {
	if oldRanks%newRanks != 0 && newRanks%oldRanks != 0 {
		return 0, false
	}
	return q * oldRanks / newRanks, true
}

// reshapeItem is one variable a rank asks for.
type reshapeItem struct {
	ID    int   `json:"id"`    // protected variable id in this run
	Src   int   `json:"src"`   // old rank of a variable outside the datasets; -1: a subset
	OldID int32 `json:"old"`   // that old rank's variable id
	Size  int64 `json:"size"`  // bytes
	Named bool  `json:"named"` // found by name
}

// plainItem resolves variable v (id, or name when byName) outside every
// global dataset to an old rank's variable.
func (r *Runtime) plainItem(v *variable, byName bool) (reshapeItem, error) {
	st := r.reshape
	what := fmt.Sprintf("variable %d", v.id)
	if v.name != "" {
		what = fmt.Sprintf("variable %d (%q)", v.id, v.name)
	}
	src, ok := plainSource(r.c.Rank(), r.c.Size(), st.oldRanks)
	if !ok {
		return reshapeItem{}, fmt.Errorf("%w: %s maps onto no global dataset, and %s was written by %d ranks: with %d ranks now, neither count divides the other, so no old rank's copy of it is defined for rank %d; "+
			"map it onto a global dataset (DefineDataset, AddSubset) to have it redistributed", ErrVarMismatch, what, st.what, st.oldRanks, r.c.Size(), r.c.Rank())
	}
	if src != st.own {
		return reshapeItem{}, fmt.Errorf("ckpt: old rank %d is not this rank's own old rank %d", src, st.own)
	}
	var info fileformat.VarInfo
	found := false
	for _, x := range st.ownMeta.Vars {
		if (byName && x.Name == v.name) || (!byName && x.ID == int32(v.id)) {
			if found {
				return reshapeItem{}, fmt.Errorf("%w: old rank %d stored two variables named %q", ErrVarMismatch, src, v.name)
			}
			info, found = x, true
		}
	}
	if !found {
		return reshapeItem{}, fmt.Errorf("%w: %s is not in %s (old rank %d's data, which rank %d receives)", ErrVarMismatch, what, st.what, src, r.c.Rank())
	}
	if info.Type != v.typ || int(info.ElemSize) != v.elemSize {
		return reshapeItem{}, fmt.Errorf("%w: %s is protected as %s (%v, %d bytes) but old rank %d stored it as %v with %d-byte elements",
			ErrVarMismatch, what, v.goType, v.typ, v.elemSize, src, info.Type, info.ElemSize)
	}
	for _, s := range st.ownMeta.View.Subsets {
		if s.VarID == info.ID {
			d, _ := st.old.dataset(s.Dataset)
			return reshapeItem{}, fmt.Errorf("%w: %w: %s was part of global dataset %v in %s: map it onto that dataset with AddSubset so that Recover redistributes it",
				ErrVarMismatch, ErrDataset, what, d, st.what)
		}
	}
	return reshapeItem{ID: v.id, Src: src, OldID: info.ID, Size: info.Size, Named: byName}, nil
}

// request returns the items of the variables ids (by name when byName,
// ids then holding one variable).
func (r *Runtime) request(ids []int, byName bool) ([]reshapeItem, error) {
	var items []reshapeItem
	for _, id := range ids {
		v := r.vars[id]
		if s, ok := r.subsets[id]; ok {
			d := r.datasets[s.Dataset]
			items = append(items, reshapeItem{ID: id, Src: -1, OldID: int32(id), Size: s.Elements() * int64(d.Elem())})
			continue
		}
		it, err := r.plainItem(v, byName)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

// reshapeStoredSize returns what variable id will hold after a
// redistributing Recover: its subset's bytes, or the bytes of the old
// rank's copy of a variable outside the datasets.
func (r *Runtime) reshapeStoredSize(id int) (int64, error) {
	v, ok := r.vars[id]
	if !ok {
		return 0, fmt.Errorf("%w: id %d", ErrNotProtected, id)
	}
	if s, ok := r.subsets[id]; ok {
		return s.Elements() * int64(r.datasets[s.Dataset].Elem()), nil
	}
	it, err := r.plainItem(v, false)
	if err != nil {
		return 0, err
	}
	return it.Size, nil
}

// reshapeIDByName returns the id under which this rank's own old rank
// (q*N/M) stored the variable named name: in FTI's model the ids are
// the same on every rank, so any old rank answers.
func (r *Runtime) reshapeIDByName(name string) (int, error) {
	st := r.reshape
	src := st.own
	found := -1
	for _, v := range st.ownMeta.Vars {
		if v.Name == name {
			if found >= 0 {
				return 0, fmt.Errorf("ckpt: %s: old rank %d stored variables %d and %d both named %q: %w", st.what, src, found, v.ID, name, fileformat.ErrNoVar)
			}
			found = int(v.ID)
		}
	}
	if found < 0 {
		return 0, fmt.Errorf("ckpt: %s: old rank %d stored no variable named %q: %w", st.what, src, name, fileformat.ErrNoVar)
	}
	return found, nil
}
