package ckpt

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/h5ckpt"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// errReshaped says a local call met a restart whose data must be
// redistributed collectively.
var errReshaped = errors.New("ckpt: restart of another shape")

// reshapeState is a restart from data another shape wrote (another rank
// count, ranks moved between nodes, or a level-9 HDF5 file): where each
// old rank's data is, what it stored, and the readers this rank opened.
type reshapeState struct {
	what     string // names the checkpoint in messages
	oldRanks int
	sources  []levels.ReshapeSource
	// h5Path, h5Drv: the HDF5 file of sources with IsH5.
	h5Path string
	h5Drv  vfd.Driver
	meta   []oldMeta
	old    *dataset.Decomposition

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
	if o < 0 || o >= len(s.sources) {
		return nil, fmt.Errorf("ckpt: old rank %d of %d", o, len(s.sources))
	}
	src := s.sources[o]
	var rd varReader
	if src.IsH5() {
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
	for o := range s.sources {
		if s.sources[o].Image != nil {
			s.sources[o].Image = nil
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
	for o := range s.sources {
		s.sources[o].Image = nil
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

// startReshape records the restart from rs and gathers what every old
// rank stored from the rank that verified it. Collective.
func (r *Runtime) startReshape(st *reshapeState) error {
	r.reshape = st
	var mine []oldMeta
	var mineRanks []int
	for o, src := range st.sources {
		if src.Reader != r.c.Rank() {
			continue
		}
		var m oldMeta
		rd, err := st.reader(o, r.env.Global, r.nodeStore, r.log)
		if err == nil {
			m.Vars = rd.Vars()
			m.View = oldView(rd)
		} else {
			m.Err = err.Error()
		}
		mine = append(mine, m)
		mineRanks = append(mineRanks, o)
	}
	type msg struct {
		Ranks []int     `json:"ranks"`
		Meta  []oldMeta `json:"meta"`
	}
	b, err := json.Marshal(msg{Ranks: mineRanks, Meta: mine})
	if err != nil {
		return err
	}
	all, err := comm.AllgatherBytes(r.c, b)
	if err != nil {
		return fmt.Errorf("ckpt: exchange what the old ranks stored: %w", err)
	}
	st.meta = make([]oldMeta, st.oldRanks)
	var errs []string
	got := make([]bool, st.oldRanks)
	for q, raw := range all {
		var m msg
		if err := json.Unmarshal(raw, &m); err != nil || len(m.Ranks) != len(m.Meta) {
			return fmt.Errorf("ckpt: decode rank %d's old metadata: %v", q, err)
		}
		for i, o := range m.Ranks {
			if o < 0 || o >= st.oldRanks {
				return fmt.Errorf("ckpt: rank %d sent the metadata of old rank %d of %d", q, o, st.oldRanks)
			}
			st.meta[o], got[o] = m.Meta[i], true
			if m.Meta[i].Err != "" {
				errs = append(errs, fmt.Sprintf("old rank %d (read by rank %d): %s", o, q, m.Meta[i].Err))
			}
		}
	}
	for o, ok := range got {
		if !ok {
			errs = append(errs, fmt.Sprintf("old rank %d: no rank read its metadata", o))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ckpt: restart from %s: %s", st.what, errs[0])
	}
	views := make([]dataset.View, st.oldRanks)
	for o := range views {
		views[o] = st.meta[o].View
	}
	dec, err := dataset.NewDecomposition(views)
	if err != nil {
		return fmt.Errorf("ckpt: restart from %s: the global datasets it recorded: %w", st.what, err)
	}
	st.old = dec
	return nil
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
	var info fileformat.VarInfo
	found := false
	for _, x := range st.meta[src].Vars {
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
	for _, s := range st.meta[src].View.Subsets {
		if s.VarID == info.ID {
			d, _ := st.old.Dataset(s.Dataset)
			return reshapeItem{}, fmt.Errorf("%w: %w: %s was part of global dataset %v in %s: map it onto that dataset with AddSubset so that Recover redistributes it",
				ErrVarMismatch, ErrDataset, what, d, st.what)
		}
	}
	return reshapeItem{ID: v.id, Src: src, OldID: info.ID, Size: info.Size, Named: byName}, nil
}

// reshapeRequest is what one rank asks for and how it maps its variables.
type reshapeRequest struct {
	View  dataset.View  `json:"view"`
	Items []reshapeItem `json:"items"`
	Err   string        `json:"err,omitempty"`
}

// request builds this rank's request for the variables ids (by name when
// byName, ids then holding one variable).
func (r *Runtime) request(ids []int, byName bool) (reshapeRequest, error) {
	req := reshapeRequest{View: r.datasetView()}
	for _, id := range ids {
		v := r.vars[id]
		if s, ok := r.subsets[id]; ok {
			d := r.datasets[s.Dataset]
			req.Items = append(req.Items, reshapeItem{ID: id, Src: -1, OldID: int32(id), Size: s.Elements() * int64(d.Elem())})
			continue
		}
		it, err := r.plainItem(v, byName)
		if err != nil {
			return req, err
		}
		req.Items = append(req.Items, it)
	}
	return req, nil
}

// copiesFor returns the copies that fill new rank q's requested
// variables, sorted by (Src, SrcVar, SrcOff).
func copiesFor(q int, plan *dataset.Plan, items []reshapeItem) []dataset.Copy {
	var out []dataset.Copy
	if plan != nil {
		out = plan.Copies(q)
	}
	for _, it := range items {
		if it.Src >= 0 && it.Size > 0 {
			out = append(out, dataset.Copy{Dst: q, DstVar: int32(it.ID), Src: it.Src, SrcVar: it.OldID, Len: it.Size})
		}
	}
	slices.SortFunc(out, func(x, y dataset.Copy) int {
		return cmp.Or(cmp.Compare(x.Src, y.Src), cmp.Compare(x.SrcVar, y.SrcVar), cmp.Compare(x.SrcOff, y.SrcOff))
	})
	return out
}

// recoverReshaped restores the variables ids (collective): every rank
// says what it needs; the copies are computed from the old and new
// decompositions (and, for variables outside the datasets, from
// plainSource); each rank reads what it can see itself, and the ranks
// that verified the other sources send the rest.
func (r *Runtime) recoverReshaped(ids []int, byName bool) error {
	st := r.reshape
	req, lerr := r.request(ids, byName)
	if lerr != nil {
		req.Err = lerr.Error()
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	all, err := comm.AllgatherBytes(r.c, b)
	if err != nil {
		return fmt.Errorf("ckpt: recover: exchange requests: %w", err)
	}
	reqs := make([]reshapeRequest, len(all))
	for q, raw := range all {
		if err := json.Unmarshal(raw, &reqs[q]); err != nil {
			return fmt.Errorf("ckpt: recover: decode rank %d's request: %w", q, err)
		}
	}
	for q, x := range reqs {
		if x.Err != "" {
			msg := fmt.Sprintf("ckpt: recover from %s failed on rank %d: %s", st.what, q, x.Err)
			if lerr != nil {
				return &agreed{msg: msg, local: lerr}
			}
			return errors.New(msg)
		}
	}
	// The new decomposition, checked as a checkpoint would check it, and
	// the plan for the requested subsets.
	views := make([]dataset.View, len(reqs))
	wanted := make([]dataset.View, len(reqs))
	for q, x := range reqs {
		views[q] = x.View
		wanted[q].Datasets = x.View.Datasets
		for _, it := range x.Items {
			if it.Src >= 0 {
				continue
			}
			for _, s := range x.View.Subsets {
				if int(s.VarID) == it.ID {
					wanted[q].Subsets = append(wanted[q].Subsets, s)
				}
			}
		}
	}
	if _, err := dataset.NewDecomposition(views); err != nil {
		return fmt.Errorf("ckpt: recover from %s: %w: this run's subsets: %w", st.what, ErrDataset, err)
	}
	var plan *dataset.Plan
	if req, err := dataset.Partial(wanted); err != nil {
		return fmt.Errorf("ckpt: recover from %s: %w: %w", st.what, ErrDataset, err)
	} else if plan, err = dataset.NewPlan(st.old, req); err != nil {
		return fmt.Errorf("ckpt: recover from %s: %w: %w", st.what, ErrDataset, err)
	}
	me := r.c.Rank()
	// Destination memory, sized as the subsets or the old variables say.
	bufs := map[int32][]byte{}
	var terr error
	for _, it := range reqs[me].Items {
		v := r.vars[it.ID]
		buf, err := v.target(it.Size)
		if err != nil {
			terr = fmt.Errorf("ckpt: recover variable %d: %w", it.ID, err)
			break
		}
		bufs[int32(it.ID)] = buf
	}
	var rerr error
	if terr == nil {
		for _, f := range plan.Fills(me) {
			clear(bufs[f.DstVar][f.Off : f.Off+f.Len])
		}
		var local []dataset.Copy
		for _, c := range copiesFor(me, plan, reqs[me].Items) {
			if st.sources[c.Src].Sees(me) {
				local = append(local, c)
			}
		}
		rerr = dataset.Apply(local, oldSource{r}, bufs)
	}
	xerr := r.exchange(plan, reqs, bufs, terr != nil)
	err = errors.Join(terr, rerr, xerr)
	if err == nil {
		for _, it := range reqs[me].Items {
			if v := r.vars[it.ID]; v.loaded != nil {
				if lerr := v.loaded(bufs[int32(it.ID)]); lerr != nil {
					err = fmt.Errorf("ckpt: recover variable %d: %w", it.ID, lerr)
					break
				}
			}
		}
	}
	r.log.Debug("redistributed", zap.String("from", st.what), zap.Int("variables", len(reqs[me].Items)),
		zap.Int64("sent-bytes", st.sent), zap.Int64("received-bytes", st.received))
	if aerr := comm.Agree(r.c, err, "recover from "+st.what); aerr != nil {
		for _, b := range bufs {
			clear(b) // bad data never looks restored
		}
		return fmt.Errorf("ckpt: %w", aerr)
	}
	return nil
}

// recoverReshapedMissing takes part in a redistributing recovery that
// fails on this rank before it could ask for anything (the other ranks
// are waiting in it), and returns err agreed on every rank.
func (r *Runtime) recoverReshapedMissing(err error) error {
	b, merr := json.Marshal(reshapeRequest{View: r.datasetView(), Err: err.Error()})
	if merr != nil {
		return merr
	}
	if _, gerr := comm.AllgatherBytes(r.c, b); gerr != nil {
		return errors.Join(err, gerr)
	}
	return &agreed{msg: fmt.Sprintf("ckpt: recover from %s failed on rank %d: %s", r.reshape.what, r.c.Rank(), err), local: err}
}

// agreed is an error every rank shares that also wraps this rank's own.
type agreed struct {
	msg   string
	local error
}

func (a *agreed) Error() string { return a.msg }
func (a *agreed) Unwrap() error { return a.local }

// Exchange tuning: a message carries at most xchgChunk bytes.
const (
	xchgChunk = 8 << 20
	xchgTag   = 0x5250 // "RP"
)

// piece is a copy (or part of one) placed in a message at off.
type piece struct {
	c   dataset.Copy
	off int64
}

// messages splits the stream of copies into messages of at most
// xchgChunk bytes, splitting copies larger than that.
func messages(cs []dataset.Copy) [][]piece {
	var out [][]piece
	var cur []piece
	fill := int64(0)
	for _, c := range cs {
		for c.Len > 0 {
			n := min(c.Len, xchgChunk-fill)
			p := c
			p.Len = n
			cur = append(cur, piece{c: p, off: fill})
			fill += n
			c.DstOff += n
			c.SrcOff += n
			c.Len -= n
			if fill == xchgChunk {
				out = append(out, cur)
				cur, fill = nil, 0
			}
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func msgLen(ps []piece) int64 {
	if len(ps) == 0 {
		return 0
	}
	l := ps[len(ps)-1]
	return l.off + l.c.Len
}

// shipped returns the copies of new rank q that rank p sends it (q
// cannot see their source and p verified it), in a fixed order.
func (r *Runtime) shipped(p, q int, plan *dataset.Plan, reqs []reshapeRequest) []dataset.Copy {
	var out []dataset.Copy
	for _, c := range copiesFor(q, plan, reqs[q].Items) {
		s := r.reshape.sources[c.Src]
		if !s.Sees(q) && s.Reader == p {
			out = append(out, c)
		}
	}
	return out
}

// exchange sends the runs other ranks need from the sources this rank
// verified and receives those it needs from sources it cannot see, in
// rounds of pairwise transfers (round k: to rank+k, from rank-k), in
// messages of at most xchgChunk bytes. A rank whose reads fail sends
// zeros and reports the error afterwards, so no rank waits forever.
// skipRecv: this rank has no destination memory (received bytes are
// dropped). Collective.
func (r *Runtime) exchange(plan *dataset.Plan, reqs []reshapeRequest, bufs map[int32][]byte, skipRecv bool) error {
	me, n := r.c.Rank(), r.c.Size()
	var errs []error
	var sendBuf, recvBuf []byte
	for k := 1; k < n; k++ {
		dst, src := (me+k)%n, (me-k+n)%n
		out := messages(r.shipped(me, dst, plan, reqs))
		in := messages(r.shipped(src, me, plan, reqs))
		for i := 0; i < max(len(out), len(in)); i++ {
			var send, recv []byte
			var direct bool
			if i < len(out) {
				ln := msgLen(out[i])
				if int64(cap(sendBuf)) < ln {
					sendBuf = make([]byte, ln)
				}
				send = sendBuf[:ln]
				cs := make([]dataset.Copy, len(out[i]))
				for j, p := range out[i] {
					c := p.c
					c.DstVar, c.DstOff = 0, p.off
					cs[j] = c
				}
				slices.SortFunc(cs, func(x, y dataset.Copy) int {
					return cmp.Or(cmp.Compare(x.Src, y.Src), cmp.Compare(x.SrcVar, y.SrcVar), cmp.Compare(x.SrcOff, y.SrcOff))
				})
				if err := dataset.Apply(cs, oldSource{r}, map[int32][]byte{0: send}); err != nil {
					clear(send)
					errs = append(errs, fmt.Errorf("read for rank %d: %w", dst, err))
				}
			}
			if i < len(in) {
				ln := msgLen(in[i])
				if len(in[i]) == 1 && !skipRecv {
					p := in[i][0].c
					recv, direct = bufs[p.DstVar][p.DstOff:p.DstOff+p.Len], true
				} else {
					if int64(cap(recvBuf)) < ln {
						recvBuf = make([]byte, ln)
					}
					recv = recvBuf[:ln]
				}
			}
			var got int
			var err error
			switch {
			case send != nil && recv != nil:
				got, err = r.c.Sendrecv(send, dst, xchgTag, recv, src, xchgTag)
			case send != nil:
				err = r.c.Send(dst, xchgTag, send)
			default:
				got, err = r.c.Recv(src, xchgTag, recv)
			}
			if err != nil {
				return errors.Join(append(errs, fmt.Errorf("exchange with ranks %d and %d: %w", dst, src, err))...)
			}
			r.reshape.sent += int64(len(send))
			if recv == nil {
				continue
			}
			r.reshape.received += int64(got)
			if got != len(recv) {
				errs = append(errs, fmt.Errorf("rank %d sent %d bytes, want %d", src, got, len(recv)))
				continue
			}
			if !direct && !skipRecv {
				for _, p := range in[i] {
					copy(bufs[p.c.DstVar][p.c.DstOff:p.c.DstOff+p.c.Len], recv[p.off:p.off+p.c.Len])
				}
			}
		}
	}
	return errors.Join(errs...)
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

// reshapeIDByName returns the id under which the old rank this rank
// takes variables from stored the variable named name.
func (r *Runtime) reshapeIDByName(name string) (int, error) {
	st := r.reshape
	src, ok := plainSource(r.c.Rank(), r.c.Size(), st.oldRanks)
	if !ok {
		src = 0 // ids are the same on every rank in FTI's model; any old rank answers
	}
	found := -1
	for _, v := range st.meta[src].Vars {
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
