package ckpt

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/exchange"
	"github.com/ftigo/ftigo/internal/levels"
)

// A redistributing Recover is spread over the ranks as the check of a
// decomposition is (decomp.go). Each dataset is cut into bins. The homes
// of the old ranks send the old subsets to the ranks of the bins they
// meet, with where their data is; each rank sends its own subsets. A
// bin's rank tells each new rank the old subsets that meet its own.
// Then each rank reads from the old ranks' data it can see itself and
// asks the rank that verified each other source for its runs. So a rank
// learns only the old ranks its hyperslabs need.

// Tags of the redistribution.
const (
	tagJoin  = 0x524a // "RJ": subsets to the bins
	tagMatch = 0x524d // "RM": the old subsets that meet a rank's
	tagPull  = 0x5250 // "RP": what a rank asks a reader for
	xchgTag  = 0x5258 // "RX": the bytes
)

// xchgChunk bounds one message of the bytes.
const xchgChunk = 8 << 20

// Record kinds of the join messages.
const (
	recOld byte = 'O' // an old subset in a bin
	recNew byte = 'N' // a new subset in a bin
	recSrc byte = 'S' // where an old rank's data is
)

func appendRecord(b []byte, kind byte, payload []byte) []byte {
	b = append(b, kind)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// eachRecord calls fn on every record of b.
func eachRecord(b []byte, fn func(kind byte, payload []byte) error) error {
	for len(b) > 0 {
		if len(b) < 5 {
			return fmt.Errorf("%d bytes left, a record header has 5", len(b))
		}
		n := binary.LittleEndian.Uint32(b[1:])
		if uint64(n) > uint64(len(b)-5) {
			return fmt.Errorf("a %d-byte record in %d bytes", n, len(b)-5)
		}
		if err := fn(b[0], b[5:5+n]); err != nil {
			return err
		}
		b = b[5+n:]
	}
	return nil
}

// oldPiece is an old subset that meets one of this rank's.
type oldPiece struct {
	rank int
	sub  fileformat.Subset
}

// joinBins cuts each of the checkpoint's datasets for the join: about
// one bin per subset of the coarser of the two decompositions.
func joinBins(st *reshapeState, nsp *spread, size int) []dataset.Bins {
	bins := make([]dataset.Bins, len(st.old.defs))
	for i, d := range st.old.defs {
		os := st.old.stats[i]
		if os.pieces == 0 {
			continue
		}
		mean := os.mean()
		if j, ok := nsp.byID[d.ID]; ok && nsp.stats[j].pieces > 0 && slices.Equal(nsp.defs[j].Shape, d.Shape) {
			for k, m := range nsp.stats[j].mean() {
				mean[k] = max(mean[k], m)
			}
		}
		bins[i] = dataset.BinsFor(d.Shape, mean, int64(size))
	}
	return bins
}

// join returns the old subsets that meet this rank's wanted subsets,
// and records where their data is in st.sources. Collective.
func (r *Runtime) join(st *reshapeState, nsp *spread, wanted []fileformat.Subset) ([]oldPiece, error) {
	size, me := r.c.Size(), r.c.Rank()
	bins := joinBins(st, nsp, size)
	out := map[int][]byte{}
	told := map[[2]int]bool{} // (bin rank, old rank) already told the source
	for _, o := range sortedKeys(st.homeMeta) {
		for _, s := range st.homeMeta[o].View.Subsets {
			i, ok := st.old.byID[s.Dataset]
			if !ok || s.Elements() == 0 {
				continue
			}
			for _, b := range bins[i].Cover(s.Offset, s.Count) {
				dst := binOwner(b, bins[i].Len(), size)
				if !told[[2]int{dst, o}] {
					told[[2]int{dst, o}] = true
					src, _ := json.Marshal(st.sources[o])
					out[dst] = appendRecord(out[dst], recSrc, src)
				}
				out[dst] = appendRecord(out[dst], recOld, appendBinPiece(nil, i, b, dataset.Piece{Rank: o, Subset: s}))
			}
		}
	}
	asked := map[int]bool{} // the bins' ranks this rank asks
	for _, s := range wanted {
		i := st.old.byID[s.Dataset]
		for _, b := range bins[i].Cover(s.Offset, s.Count) {
			dst := binOwner(b, bins[i].Len(), size)
			asked[dst] = true
			out[dst] = appendRecord(out[dst], recNew, appendBinPiece(nil, i, b, dataset.Piece{Rank: me, Subset: s}))
		}
	}
	in, err := exchange.Sparse(r.c, tagJoin, exchange.ByPeer(out))
	if err != nil {
		return nil, fmt.Errorf("ckpt: send the subsets to their bins: %w", err)
	}
	type binID struct {
		ds  int
		bin int64
	}
	olds, news := map[binID][]dataset.Piece{}, map[binID][]dataset.Piece{}
	srcs := map[int][]byte{}
	var lerr error
	for _, m := range in {
		derr := eachRecord(m.Data, func(kind byte, p []byte) error {
			if kind == recSrc {
				var src levels.ReshapeSource
				if err := json.Unmarshal(p, &src); err != nil {
					return err
				}
				srcs[src.Rank] = p
				return nil
			}
			return readBinPieces(p, st.old.defs, func(ds int, bin int64, pc dataset.Piece) {
				if kind == recOld {
					olds[binID{ds, bin}] = append(olds[binID{ds, bin}], pc)
				} else {
					news[binID{ds, bin}] = append(news[binID{ds, bin}], pc)
				}
			})
		})
		if derr != nil && lerr == nil {
			lerr = fmt.Errorf("ckpt: decode rank %d's subsets: %w", m.Peer, derr)
		}
	}
	// Every rank that asked gets an answer, maybe empty, straight back.
	out = map[int][]byte{}
	for _, ns := range news {
		for _, n := range ns {
			out[n.Rank] = out[n.Rank][:0:0]
		}
	}
	told = map[[2]int]bool{}
	sent := map[[3]int]bool{} // (new rank, old rank, old variable)
	for id, ns := range news {
		for _, n := range ns {
			for _, o := range olds[id] {
				if _, _, ok := intersectBoxes(o.Subset, n.Subset); !ok || sent[[3]int{n.Rank, o.Rank, int(o.Subset.VarID)}] {
					continue
				}
				sent[[3]int{n.Rank, o.Rank, int(o.Subset.VarID)}] = true
				if !told[[2]int{n.Rank, o.Rank}] {
					told[[2]int{n.Rank, o.Rank}] = true
					out[n.Rank] = appendRecord(out[n.Rank], recSrc, srcs[o.Rank])
				}
				out[n.Rank] = appendRecord(out[n.Rank], recOld, appendBinPiece(nil, id.ds, id.bin, o))
			}
		}
	}
	answers, err := exchange.Reply(r.c, tagMatch, sortedKeys(asked), out)
	if err != nil {
		return nil, fmt.Errorf("ckpt: send the old subsets that meet each rank's: %w", err)
	}
	var got []oldPiece
	seen := map[[2]int]bool{}
	for _, peer := range sortedKeys(answers) {
		derr := eachRecord(answers[peer], func(kind byte, p []byte) error {
			if kind == recSrc {
				var src levels.ReshapeSource
				if err := json.Unmarshal(p, &src); err != nil {
					return err
				}
				if _, ok := st.sources[src.Rank]; !ok {
					st.sources[src.Rank] = src
				}
				return nil
			}
			return readBinPieces(p, st.old.defs, func(_ int, _ int64, pc dataset.Piece) {
				if k := [2]int{pc.Rank, int(pc.Subset.VarID)}; !seen[k] {
					seen[k] = true
					got = append(got, oldPiece{rank: pc.Rank, sub: pc.Subset})
				}
			})
		})
		if derr != nil && lerr == nil {
			lerr = fmt.Errorf("ckpt: decode rank %d's old subsets: %w", peer, derr)
		}
	}
	slices.SortFunc(got, func(a, b oldPiece) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.sub.VarID, b.sub.VarID))
	})
	return got, agreeFirst(r.c, int64(me), lerr)
}

// intersectBoxes returns the elements two subsets of one dataset share.
func intersectBoxes(a, b fileformat.Subset) (lo, cnt []int64, ok bool) {
	if a.Dataset != b.Dataset || len(a.Offset) != len(b.Offset) {
		return nil, nil, false
	}
	lo, cnt = make([]int64, len(a.Offset)), make([]int64, len(a.Offset))
	for k := range a.Offset {
		l, h := max(a.Offset[k], b.Offset[k]), min(a.Offset[k]+a.Count[k], b.Offset[k]+b.Count[k])
		if h <= l {
			return nil, nil, false
		}
		lo[k], cnt[k] = l, h-l
	}
	return lo, cnt, true
}

// pull is what this rank takes from one old rank: pairs of an old
// subset and a new one that meet, and whole variables outside the
// datasets. Both the puller and the old rank's reader compute the
// copies from it, alike.
type pull struct {
	O      int           `json:"o"`
	Pairs  []pullPair    `json:"p,omitempty"`
	Plains []reshapeItem `json:"v,omitempty"`
}

type pullPair struct {
	Old  fileformat.Subset `json:"o"`
	New  fileformat.Subset `json:"n"`
	Elem int64             `json:"e"`
}

// copies returns the copies of p for new rank q, sorted by (SrcVar,
// SrcOff).
func (p pull) copies(q int) []dataset.Copy {
	var out []dataset.Copy
	for _, x := range p.Pairs {
		out = append(out, dataset.Runs(p.O, x.Old, q, x.New, x.Elem)...)
	}
	for _, it := range p.Plains {
		if it.Size > 0 {
			out = append(out, dataset.Copy{Dst: q, DstVar: int32(it.ID), Src: p.O, SrcVar: it.OldID, Len: it.Size})
		}
	}
	slices.SortStableFunc(out, func(x, y dataset.Copy) int {
		return cmp.Or(cmp.Compare(x.SrcVar, y.SrcVar), cmp.Compare(x.SrcOff, y.SrcOff))
	})
	return out
}

// pulls groups what this rank needs by old rank: the pairs its wanted
// subsets make with the old pieces, and its variables outside the
// datasets. It also returns the fills: the variables of sparse datasets
// that the old subsets do not cover whole.
func (r *Runtime) pulls(st *reshapeState, items []reshapeItem, olds []oldPiece) (map[int]*pull, []int32) {
	ps := map[int]*pull{}
	get := func(o int) *pull {
		if ps[o] == nil {
			ps[o] = &pull{O: o}
		}
		return ps[o]
	}
	var fills []int32
	for _, it := range items {
		if it.Src >= 0 {
			p := get(it.Src)
			p.Plains = append(p.Plains, it)
			continue
		}
		s := r.subsets[it.ID]
		d, _ := st.old.dataset(s.Dataset)
		var got int64
		for _, o := range olds {
			if _, cnt, ok := intersectBoxes(o.sub, s); ok {
				got += boxVolume(cnt)
				p := get(o.rank)
				p.Pairs = append(p.Pairs, pullPair{Old: o.sub, New: s, Elem: int64(d.Elem())})
			}
		}
		if d.Sparse && got < s.Elements() {
			fills = append(fills, int32(it.ID))
		}
	}
	return ps, fills
}

// checkWanted checks this rank's wanted subsets against the checkpoint's
// datasets: each dataset there, with the same name, shape and type.
func (r *Runtime) checkWanted(st *reshapeState, wanted []fileformat.Subset) error {
	for _, s := range wanted {
		if err := dataset.CheckStored(r.datasets[s.Dataset], st.old.defs); err != nil {
			return fmt.Errorf("ckpt: recover from %s: %w: %w", st.what, ErrDataset, err)
		}
	}
	return nil
}

// recoverReshaped restores the variables ids (collective): the new
// decomposition is checked, the old subsets each rank needs are found
// by bins, each rank reads what it can see itself, and the ranks that
// verified the other sources send the rest.
func (r *Runtime) recoverReshaped(ids []int, byName bool) error {
	st := r.reshape
	me := r.c.Rank()
	items, lerr := r.request(ids, byName)
	if lerr != nil {
		lerr = fmt.Errorf("ckpt: recover from %s failed on rank %d: %w", st.what, me, lerr)
	}
	if err := agreeFirst(r.c, int64(me), lerr); err != nil {
		return err
	}
	nsp, err := checkSpread(r.c, []rankView{{rank: me, view: r.datasetView()}}, true)
	if err != nil {
		return fmt.Errorf("ckpt: recover from %s: %w: this run's subsets: %w", st.what, ErrDataset, err)
	}
	var wanted []fileformat.Subset
	for _, it := range items {
		if it.Src < 0 {
			wanted = append(wanted, r.subsets[it.ID])
		}
	}
	if err := agreeFirst(r.c, int64(me), r.checkWanted(st, wanted)); err != nil {
		return err
	}
	olds, err := r.join(st, nsp, wanted)
	if err != nil {
		return err
	}
	pulls, fills := r.pulls(st, items, olds)
	// Destination memory, sized as the subsets or the old variables say.
	bufs := map[int32][]byte{}
	var terr error
	for _, it := range items {
		buf, err := r.vars[it.ID].target(it.Size)
		if err != nil {
			terr = fmt.Errorf("ckpt: recover variable %d: %w", it.ID, err)
			break
		}
		bufs[int32(it.ID)] = buf
	}
	if terr == nil {
		for _, id := range fills {
			clear(bufs[id])
		}
	}
	local, remote := r.splitPulls(st, pulls)
	var rerr error
	if terr == nil {
		for _, o := range sortedKeys(local) {
			if err := dataset.Apply(local[o].copies(me), oldSource{r}, bufs); err != nil {
				rerr = err
				break
			}
		}
	}
	xerr := r.transfer(st, remote, bufs, terr != nil)
	err = errors.Join(terr, rerr, xerr)
	if err == nil {
		for _, it := range items {
			if v := r.vars[it.ID]; v.loaded != nil {
				if lerr := v.loaded(bufs[int32(it.ID)]); lerr != nil {
					err = fmt.Errorf("ckpt: recover variable %d: %w", it.ID, lerr)
					break
				}
			}
		}
	}
	r.log.Debug("redistributed", zap.String("from", st.what), zap.Int("variables", len(items)), zap.Int("old-ranks", len(pulls)),
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
	return agreeFirst(r.c, int64(r.c.Rank()), fmt.Errorf("ckpt: recover from %s failed on rank %d: %w", r.reshape.what, r.c.Rank(), err))
}

// splitPulls sorts the pulls into those this rank reads itself (the
// sources it verified, and those not held in a reader's memory that it
// can open) and those it asks the sources' readers for.
func (r *Runtime) splitPulls(st *reshapeState, pulls map[int]*pull) (local, remote map[int]*pull) {
	local, remote = map[int]*pull{}, map[int]*pull{}
	for o, p := range pulls {
		src, ok := st.sources[o]
		switch {
		case !ok:
			remote[o] = p // no source known: the transfer reports it
		case src.Reader == r.c.Rank():
			local[o] = p
		case src.Held:
			remote[o] = p
		default:
			if _, err := st.reader(o, r.env.Global, r.nodeStore, r.log); err == nil {
				local[o] = p
			} else {
				remote[o] = p
			}
		}
	}
	return local, remote
}
