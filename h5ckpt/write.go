package h5ckpt

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/vfd"
)

// Option configures [Write] and [Open].
type Option func(*options)

type options struct {
	blockSize int
	workers   int
	logger    *zap.Logger
	clock     func() time.Time
	result    *Result
	cbWindow  int64 // collective buffering window (0: writebackPiece); tests shrink it
	cbOff     bool  // no collective buffering (tests compare the files)
}

func buildOptions(opts []Option) options {
	o := options{blockSize: fileformat.DefaultBlockSize, workers: runtime.GOMAXPROCS(0), clock: time.Now}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	o.workers = max(o.workers, 1)
	return o
}

// WithBlockSize sets the size of the blocks each variable is hashed in
// (default [fileformat.DefaultBlockSize]; between fileformat.MinBlockSize
// and fileformat.MaxBlockSize). A restart reads whole blocks.
func WithBlockSize(n int) Option { return func(o *options) { o.blockSize = n } }

// WithHashWorkers sets how many goroutines hash in parallel (default GOMAXPROCS).
func WithHashWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithLogger sets the logger (nil: none).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock sets the clock for Meta.Timestamp when it is 0.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// Result is what a successful [Write] tells every rank about the file it
// committed (see [WithResult]).
type Result struct {
	// TablesHash is the file's [File.TablesHash]: one value that covers
	// every block hash, so it identifies every byte the file stores.
	TablesHash [32]byte
	// Size is the file's size in bytes.
	Size int64
}

// WithResult has a successful [Write] fill res on every rank (rank 0
// broadcasts it after the commit: one more collective call).
func WithResult(res *Result) Option { return func(o *options) { o.result = res } }

// Tags of the point-to-point messages of Write.
const tagHashes = 0x4835 // "H5"

// Alignment of raw data: datasets of at least alignMin bytes start at a
// multiple of align, so that no two ranks' large writes share a page at
// a dataset's start.
const (
	align    = 4096
	alignMin = 64 << 10
)

// writebackPiece is how many bytes a rank writes before it starts their
// writeback (as fileformat does), so the device works while the rank goes
// on copying and hashing.
const writebackPiece = 16 << 20

// Write writes one checkpoint as the HDF5 file name, collectively: every
// rank of c calls it with its own variables, the datasets it knows and the
// subsets of its variables (see the package doc for the protocol). Every
// rank returns the same error: on input the ranks cannot store together,
// one wrapping [ErrInvalid] (overlaps, gaps and id clashes also wrap the
// dataset package's errors); on a failed write, one wrapping [ErrFailed]
// (and, on the ranks that failed, their local error). After a failure the
// previous file under name, if any, is untouched and the temporary file
// is removed.
func Write(c comm.Comm, d vfd.Driver, name string, meta Meta, vars []fileformat.Var, datasets []dataset.Dataset, subsets []dataset.Subset, opts ...Option) error {
	o := buildOptions(opts)
	start := o.clock()
	if meta.Timestamp == 0 {
		meta.Timestamp = start.UnixNano()
	}
	meta.Ranks, meta.BlockSize = c.Size(), o.blockSize
	mine, lerr := localDecl(c.Rank(), vars, datasets, subsets, o)
	// Rank 0 alone sees every declaration: it checks them together, lays
	// out the file and hands each rank its part of the layout.
	blobs, err := comm.GathervBytes(c, 0, encodeDecl(mine, lerr))
	if err != nil {
		return fmt.Errorf("h5ckpt: exchange declarations: %w", err)
	}
	w := &writer{c: c, d: d, name: name, tmp: name + ".tmp", meta: meta, o: o, vars: vars}
	var parts [][]byte
	var createErr, layoutErr error
	if c.Rank() == 0 {
		parts, createErr, layoutErr = w.plan(blobs)
	}
	part, err := comm.ScattervBytes(c, 0, parts)
	if err != nil {
		w.abandon()
		return fmt.Errorf("h5ckpt: hand out the layout: %w", err)
	}
	// Without a layout (decodePart's ok false, err nil) rank 0 failed to
	// create or lay out the file, and its error fails a step everywhere.
	view, _, err := decodePart(part, c.Size())
	var rerr *remoteError
	if errors.As(err, &rerr) {
		if lerr != nil {
			return &comm.AgreedError{Msg: fmt.Sprintf("%v: %v", ErrInvalid, err), Local: errors.Join(ErrInvalid, lerr)}
		}
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := w.run(view, createErr, errors.Join(layoutErr, err)); err != nil {
		o.logger.Warn("HDF5 checkpoint failed", zap.String("file", name), zap.Error(err))
		return err
	}
	if c.Rank() == 0 {
		o.logger.Info("HDF5 checkpoint written", zap.String("file", name), zap.Int64("ckpt-id", meta.CkptID),
			zap.Int("ranks", c.Size()), zap.Duration("took", o.clock().Sub(start)))
	}
	return nil
}

// localDecl checks one rank's input by itself and describes it.
func localDecl(rank int, vars []fileformat.Var, ds []dataset.Dataset, subs []dataset.Subset, o options) (decl, error) {
	if o.blockSize < fileformat.MinBlockSize || o.blockSize > fileformat.MaxBlockSize {
		return decl{}, fmt.Errorf("block size %d outside [%d, %d]", o.blockSize, fileformat.MinBlockSize, fileformat.MaxBlockSize)
	}
	d := decl{datasets: ds}
	byID := map[int32]int{}
	for i, v := range vars {
		if v.ID < 0 {
			return decl{}, fmt.Errorf("variable id %d is negative", v.ID)
		}
		if _, dup := byID[v.ID]; dup {
			return decl{}, fmt.Errorf("variable id %d used twice", v.ID)
		}
		byID[v.ID] = i
		es := v.Type.Size()
		if v.Type == fileformat.Struct {
			es = v.ElemSize
		}
		if !v.Type.Valid() || es == 0 || (v.ElemSize != 0 && v.ElemSize != es) {
			return decl{}, fmt.Errorf("variable %d: element type %v with element size %d", v.ID, v.Type, v.ElemSize)
		}
		if len(v.Data)%int(es) != 0 {
			return decl{}, fmt.Errorf("variable %d: %d bytes is not a multiple of element size %d", v.ID, len(v.Data), es)
		}
		d.vars = append(d.vars, varRec{rank: rank, id: v.ID, name: v.Name, typ: v.Type, es: es, size: int64(len(v.Data)), dataset: -1})
	}
	slices.SortFunc(d.vars, func(a, b varRec) int { return int(a.id) - int(b.id) })
	dsByID := map[int32]dataset.Dataset{}
	for _, x := range ds {
		dsByID[x.ID] = x
	}
	for _, s := range subs {
		x, ok := dsByID[s.Dataset]
		if !ok {
			return decl{}, fmt.Errorf("variable %d: subset of dataset %d, which this rank did not define", s.VarID, s.Dataset)
		}
		if err := x.Check(); err != nil {
			return decl{}, err
		}
		if err := s.CheckIn(x); err != nil {
			return decl{}, err
		}
		i, ok := slices.BinarySearchFunc(d.vars, s.VarID, func(v varRec, id int32) int { return int(v.id) - int(id) })
		if !ok {
			return decl{}, fmt.Errorf("subset of dataset %d %q for variable %d, which is not protected", x.ID, x.Name, s.VarID)
		}
		v := &d.vars[i]
		if v.dataset >= 0 {
			return decl{}, fmt.Errorf("variable %d mapped onto two subsets", s.VarID)
		}
		if err := s.CheckVar(x, v.typ, v.es, v.size); err != nil {
			return decl{}, err
		}
		v.dataset, v.offset, v.count = s.Dataset, slices.Clone(s.Offset), slices.Clone(s.Count)
	}
	return d, nil
}

// combine decodes every rank's declaration and validates them together;
// it runs identically on every rank, so its error is the same everywhere.
func combine(blobs [][]byte, meta Meta) ([]decl, *dataset.Decomposition, error) {
	decls := make([]decl, len(blobs))
	views := make([]dataset.View, len(blobs))
	var errs []string
	for r, b := range blobs {
		d, err := decodeDecl(b, r)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		decls[r] = d
		views[r].Datasets = d.datasets
		for _, v := range d.vars {
			if v.dataset >= 0 {
				views[r].Subsets = append(views[r].Subsets, dataset.Subset{VarID: v.id, Dataset: v.dataset, Offset: v.offset, Count: v.count})
			}
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.New(strings.Join(errs, "; "))
	}
	dec, err := dataset.NewDecomposition(views)
	if err != nil {
		return nil, nil, err
	}
	if err := checkNames(dec.Datasets()); err != nil {
		return nil, nil, err
	}
	if meta.CkptID < 0 {
		return nil, nil, fmt.Errorf("checkpoint id %d", meta.CkptID)
	}
	return decls, dec, nil
}

// checkNames refuses dataset names HDF5 cannot hold side by side: one
// inside ftigo's group, or one that is a group on the path of another.
func checkNames(ds []dataset.Dataset) error {
	names := map[string]int32{}
	for _, x := range ds {
		if first, _, _ := strings.Cut(x.Name, "/"); first == MetaGroup {
			return fmt.Errorf("dataset %d: name %q is inside the reserved group %q", x.ID, x.Name, MetaGroup)
		}
		names[x.Name] = x.ID
	}
	for _, x := range ds {
		for p := x.Name; ; {
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				break
			}
			p = p[:i]
			if id, ok := names[p]; ok {
				return fmt.Errorf("datasets %d %q and %d %q: the first would have to be a group", id, p, x.ID, x.Name)
			}
		}
	}
	return nil
}

// writer is one rank's state during Write.
type writer struct {
	c    comm.Comm
	d    vfd.Driver
	name string
	tmp  string
	meta Meta
	o    options
	vars []fileformat.Var
	view rankView // this rank's part of the layout

	// Rank 0 only: every rank's declaration, their decomposition and
	// the layout of every variable.
	decls []decl
	dec   *dataset.Decomposition

	f      vfd.File
	h      *h5.Writer
	r      int               // max dataset rank, >= 1
	loc    map[[2]int64]slab // (rank, var id) -> where its bytes go
	dsT    map[int32]*h5.Dataset
	hashes [][][fileformat.HashSize]byte // block hashes of vars, by index

	// Rank 0, once committed: the tables hash and the file size.
	tablesHash [32]byte
	size       int64
}

// agree turns a local error into the same error on every rank. A
// failure the ranks agree on wraps ErrFailed (and, where it happened,
// the local error).
func (w *writer) agree(local error, what string) error {
	err := comm.Agree(w.c, local, w.name+" "+what)
	if _, ok := err.(*comm.AgreedError); ok {
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	return err
}

// plan runs on rank 0: it combines every rank's declaration, creates
// the temporary file, lays it out and returns each rank's part of the
// layout. An invalid input makes every part carry the error (and no
// file). A failure to create or lay out the file makes every part say
// there is no layout, and comes back as createErr or layoutErr.
func (w *writer) plan(blobs [][]byte) (parts [][]byte, createErr, layoutErr error) {
	parts = make([][]byte, len(blobs))
	fill := func(b []byte) {
		for r := range parts {
			parts[r] = b
		}
	}
	decls, dec, err := combine(blobs, w.meta)
	if err != nil {
		fill(invalidPart(err))
		return parts, nil, nil
	}
	w.decls, w.dec = decls, dec
	if err := w.create(); err != nil {
		fill([]byte{partNoLayout})
		return parts, err, nil
	}
	if err := w.layout(); err != nil {
		fill([]byte{partNoLayout})
		return parts, nil, err
	}
	p := w.collectivePlan()
	var aggs [][]cbSlab
	if p != nil {
		aggs = p.domains(len(blobs))
	}
	for r := range parts {
		parts[r] = encodeView(w.viewOf(r, p, aggs))
	}
	return parts, nil, nil
}

// run writes, after plan: rank 0's createErr fails the create step on
// every rank, and localErr (a layout that failed on rank 0, or this
// rank's part that did not arrive whole) the open step.
func (w *writer) run(view rankView, createErr, localErr error) error {
	if err := w.agree(createErr, "create"); err != nil {
		w.abandon()
		return err
	}
	// The others open the file rank 0 created.
	var err error
	if w.c.Rank() != 0 {
		w.f, err = w.d.Open(w.tmp, vfd.ReadWrite)
		if err != nil {
			err = vfd.WrapPath(err, "open", w.tmp)
		}
	}
	w.view = view
	// Every rank must be ready before any writes: the writes of
	// collective buffering need every rank.
	if err := w.agree(errors.Join(localErr, err), "open"); err != nil {
		w.abandon()
		return err
	}
	err = w.writeData()
	if w.c.Rank() != 0 && w.f != nil {
		err = errors.Join(err, w.f.Close())
		w.f = nil
	}
	if err := w.agree(err, "write"); err != nil {
		w.abandon()
		return err
	}
	hashes, err := w.gatherHashes()
	if err == nil && w.c.Rank() == 0 {
		err = w.commit(hashes)
	}
	if err := w.agree(err, "commit"); err != nil {
		w.abandon()
		return err
	}
	if w.o.result != nil {
		var b [40]byte
		copy(b[:32], w.tablesHash[:])
		le.PutUint64(b[32:], uint64(w.size))
		if err := w.c.Bcast(0, b[:]); err != nil {
			return fmt.Errorf("h5ckpt: %s committed, but its hash did not reach every rank: %w", w.name, err)
		}
		copy(w.o.result.TablesHash[:], b[:32])
		w.o.result.Size = int64(le.Uint64(b[32:]))
	}
	return nil
}

func (w *writer) create() error {
	dir := path.Dir(w.name)
	if _, err := w.d.Stat(dir); err != nil {
		// A new directory is durable once its parent is synced.
		if err := w.d.MkdirAll(dir, 0o755); err != nil {
			return vfd.WrapPath(err, "create", dir)
		}
		if err := w.d.SyncDir(path.Dir(dir)); err != nil {
			return vfd.WrapPath(err, "sync parent of", dir)
		}
	}
	if err := w.d.Remove(w.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return vfd.WrapPath(err, "remove stale", w.tmp)
	}
	f, err := w.d.Open(w.tmp, vfd.ReadWrite|vfd.OCreate|vfd.OTrunc)
	if err != nil {
		return vfd.WrapPath(err, "create", w.tmp)
	}
	w.f = f
	return nil
}

// abandon closes rank 0's handle and removes the temporary file.
func (w *writer) abandon() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
	if w.c.Rank() == 0 {
		_ = w.d.Remove(w.tmp)
	}
}

// layout builds, identically on every rank, the groups and the reserved
// raw data of every dataset and every variable outside a dataset, so each
// rank knows where its bytes go; rank 0 later writes the headers.
func (w *writer) layout() error {
	w.h = h5.NewWriter(w.f)
	w.loc = map[[2]int64]slab{}
	w.dsT = map[int32]*h5.Dataset{}
	root := w.h.Root()
	w.r = 1
	addrs := map[int32]int64{}
	for _, x := range w.dec.Datasets() {
		w.r = max(w.r, len(x.Shape))
		parts := strings.Split(x.Name, "/")
		g := root
		for _, p := range parts[:len(parts)-1] {
			sub, ok := g.Group(p)
			if !ok {
				var err error
				if sub, err = g.CreateGroup(p); err != nil {
					return fmt.Errorf("group %q of dataset %d: %w", p, x.ID, err)
				}
			}
			g = sub
		}
		dims := make([]uint64, len(x.Shape))
		for k, e := range x.Shape {
			dims[k] = uint64(e)
		}
		t := h5Type(x.Type, x.Elem())
		a := int64(0)
		if x.Elements()*int64(x.Elem()) >= alignMin {
			a = align
		}
		hd, err := g.ReserveDataset(parts[len(parts)-1], t, dims, a)
		if err != nil {
			return fmt.Errorf("dataset %d %q: %w", x.ID, x.Name, err)
		}
		for _, at := range []h5.Attribute{h5.MustAttr(attrDatasetID, x.ID), h5.StringAttr(attrElemType, x.Type.String()),
			h5.MustAttr(attrSparse, int32(boolByte(x.Sparse)))} {
			if err := hd.SetAttr(at); err != nil {
				return err
			}
		}
		addrs[x.ID], _ = hd.Addr()
		w.dsT[x.ID] = hd
	}
	meta, err := root.CreateGroup(MetaGroup)
	if err != nil {
		return err
	}
	for r, d := range w.decls {
		var g *h5.Group
		for _, v := range d.vars {
			key := [2]int64{int64(r), int64(v.id)}
			if v.dataset >= 0 {
				x, _ := w.dec.Dataset(v.dataset)
				w.loc[key] = newSlab(addrs[v.dataset], x.Shape, v.offset, v.count, int64(v.es))
				continue
			}
			if g == nil {
				if g, err = meta.CreateGroup(rankGroup(r)); err != nil {
					return err
				}
			}
			a := int64(0)
			if v.size >= alignMin {
				a = align
			}
			hd, err := g.ReserveDataset(strconv.Itoa(int(v.id)), h5Type(v.typ, v.es), []uint64{uint64(v.size / int64(v.es))}, a)
			if err != nil {
				return fmt.Errorf("rank %d variable %d: %w", r, v.id, err)
			}
			addr, _ := hd.Addr()
			w.loc[key] = localSlab(addr, v.size)
		}
	}
	return nil
}

func rankGroup(r int) string { return "rank" + strconv.Itoa(r) }

// writeData writes this rank's variables where the layout put them (the
// slabs of short runs through collective buffering, see collective.go)
// while a goroutine hashes them from memory, then syncs.
func (w *writer) writeData() error {
	bs := w.o.blockSize
	hashes := make([][][fileformat.HashSize]byte, len(w.vars))
	done := make(chan error, 1)
	go func() {
		var herr error
		for i, v := range w.vars {
			if hashes[i], herr = fileformat.HashBlocks(v.Data, bs, fileformat.WithHashWorkers(w.o.workers)); herr != nil {
				break
			}
		}
		done <- herr
	}()
	own := map[int32]ownVar{}
	for _, ov := range w.view.vars {
		own[ov.id] = ov
	}
	b := behind{f: w.f, lo: -1}
	var err error
	for _, v := range w.vars {
		ov, ok := own[v.ID]
		if !ok || ov.s.size != int64(len(v.Data)) {
			err = fmt.Errorf("variable %d: the layout from rank 0 does not hold it", v.ID)
			break
		}
		if ov.collective {
			continue
		}
		s := ov.s
		err = s.runs(0, int64(len(v.Data)), func(fileOff, varOff, n int64) error {
			return b.write(v.Data[varOff:varOff+n], fileOff)
		})
		if err != nil {
			err = fmt.Errorf("write variable %d: %w", v.ID, err)
			break
		}
	}
	if w.view.cb != nil {
		data := make(map[int32][]byte, len(w.vars))
		for _, v := range w.vars {
			data[v.ID] = v.Data
		}
		err = errors.Join(err, w.writeCollective(w.view.cb, w.view.vars, data, err != nil))
	}
	if err == nil {
		if serr := w.f.Sync(); serr != nil {
			err = vfd.WrapPath(serr, "sync", w.tmp)
		}
	}
	err = errors.Join(err, <-done)
	w.hashes = hashes
	return err
}

// behind writes one rank's runs and starts their writeback behind them:
// every writebackPiece bytes written, it starts the writeback of the file
// range they span. When a rank's runs are shorter than that (rows of a
// block decomposition, too long for collective buffering) the range also
// holds other ranks' runs, whose pages, if written by then, go with it.
// It is only a hint: its errors are ignored, and a write
// error it meets comes back from the sync.
type behind struct {
	f      vfd.File
	lo, hi int64 // file range written since the last hint (lo < 0: none)
	n      int64 // bytes written since the last hint
}

func (b *behind) write(p []byte, off int64) error {
	for o := 0; o < len(p); {
		e := min(o+int(writebackPiece-b.n), len(p))
		at := off + int64(o)
		if _, err := vfd.WriteAtType(b.f, vfd.MemDraw, p[o:e], at); err != nil {
			return fmt.Errorf("at %d: %w", at, err)
		}
		end := at + int64(e-o)
		if b.lo < 0 {
			b.lo, b.hi = at, end
		} else {
			b.lo, b.hi = min(b.lo, at), max(b.hi, end)
		}
		b.n += int64(e - o)
		o = e
		if b.n == writebackPiece {
			_ = vfd.StartWriteback(b.f, b.lo, b.hi-b.lo)
			b.lo, b.hi, b.n = -1, 0, 0
		}
	}
	return nil
}

// gatherHashes sends every rank's block hashes, in variable id order, to
// rank 0, which returns them per rank.
func (w *writer) gatherHashes() ([][]byte, error) {
	var mine []byte
	idx := make([]int, len(w.vars))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(w.vars[a].ID) - int(w.vars[b].ID) })
	for _, i := range idx {
		for _, h := range w.hashes[i] {
			mine = append(mine, h[:]...)
		}
	}
	if w.c.Rank() != 0 {
		if len(mine) == 0 {
			return nil, nil
		}
		if err := w.c.Send(0, tagHashes, mine); err != nil {
			return nil, fmt.Errorf("send block hashes: %w", err)
		}
		return nil, nil
	}
	all := make([][]byte, len(w.decls))
	all[0] = mine
	for r := 1; r < len(w.decls); r++ {
		var n int64
		for _, v := range w.decls[r].vars {
			n += numBlocks(v.size, int64(w.o.blockSize)) * fileformat.HashSize
		}
		if n == 0 {
			continue
		}
		buf := make([]byte, n)
		k, err := w.c.Recv(r, tagHashes, buf)
		if err != nil {
			return nil, fmt.Errorf("receive block hashes of rank %d: %w", r, err)
		}
		if int64(k) != n {
			return nil, fmt.Errorf("rank %d sent %d bytes of block hashes, want %d", r, k, n)
		}
		all[r] = buf
	}
	return all, nil
}

func numBlocks(n, bs int64) int64 { return (n + bs - 1) / bs }

// commit (rank 0) writes the tables, the object headers and the
// superblock, then renames the file to its final name.
func (w *writer) commit(hashes [][]byte) error {
	dsRows, varRows, names, hashBytes := w.tables(hashes)
	th := b3.New()
	for _, b := range [][]byte{dsRows, varRows, names, hashBytes} {
		_, _ = th.Write(b)
	}
	root := w.h.Root()
	attrs := []h5.Attribute{
		h5.StringAttr(attrFormat, FormatName),
		h5.MustAttr(attrVersion, int32(FormatVersion)),
		h5.MustAttr(attrCkptID, w.meta.CkptID),
		h5.MustAttr(attrLevel, int32(w.meta.Level)),
		h5.MustAttr(attrRanks, int32(w.meta.Ranks)),
		h5.MustAttr(attrTimestamp, w.meta.Timestamp),
		h5.MustAttr(attrBlockSize, int64(w.meta.BlockSize)),
		h5.MustAttr(attrTablesHash, th.Sum(nil)),
	}
	if w.meta.Run != "" {
		attrs = append(attrs, h5.StringAttr(attrRun, w.meta.Run))
	}
	th.Sum(w.tablesHash[:0])
	for _, a := range attrs {
		if err := root.SetAttr(a); err != nil {
			return err
		}
	}
	meta, ok := root.Group(MetaGroup)
	if !ok {
		return errors.New("no meta group")
	}
	ndDatasets := uint64(len(dsRows)) / uint64(datasetsRowType(w.r).Size)
	ndVars := uint64(len(varRows)) / uint64(variablesRowType(w.r).Size)
	if _, err := meta.CreateDataset(tableDatasets, datasetsRowType(w.r), []uint64{ndDatasets}, dsRows); err != nil {
		return err
	}
	if _, err := meta.CreateDataset(tableVariables, variablesRowType(w.r), []uint64{ndVars}, varRows); err != nil {
		return err
	}
	if _, err := meta.CreateDataset(tableNames, h5.Uint8, []uint64{uint64(len(names))}, names); err != nil {
		return err
	}
	if _, err := meta.CreateDataset(tableHashes, h5.Uint8, []uint64{uint64(len(hashBytes) / fileformat.HashSize), fileformat.HashSize}, hashBytes); err != nil {
		return err
	}
	// The rename below commits the file, so the superblock need not wait
	// for a sync of the headers: one sync after it suffices.
	w.h.OneSync()
	if err := w.h.Close(); err != nil {
		return err
	}
	if sz, err := w.f.Size(); err == nil {
		w.size = sz
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return vfd.WrapPath(err, "close", w.tmp)
	}
	if err := w.d.Rename(w.tmp, w.name); err != nil {
		return vfd.WrapPath(err, "rename", w.tmp)
	}
	if err := w.d.SyncDir(path.Dir(w.name)); err != nil {
		return vfd.WrapPath(err, "sync directory of", w.name)
	}
	return nil
}

// tables encodes the dataset and variable tables, the names and the
// block hashes (rank order, then variable id order).
func (w *writer) tables(hashes [][]byte) (dsRows, varRows, names, hashBytes []byte) {
	r := w.r
	putDims := func(b []byte, x []int64) []byte {
		for k := 0; k < r; k++ {
			v := int64(0)
			if k < len(x) {
				v = x[k]
			}
			b = le.AppendUint64(b, uint64(v))
		}
		return b
	}
	for _, x := range w.dec.Datasets() {
		dsRows = le.AppendUint32(dsRows, uint32(x.ID))
		dsRows = le.AppendUint32(dsRows, uint32(x.Type))
		dsRows = le.AppendUint32(dsRows, x.Elem())
		dsRows = le.AppendUint32(dsRows, uint32(boolByte(x.Sparse)))
		dsRows = le.AppendUint32(dsRows, uint32(len(x.Shape)))
		dsRows = le.AppendUint64(dsRows, uint64(len(names)))
		dsRows = le.AppendUint64(dsRows, uint64(len(x.Name)))
		dsRows = putDims(dsRows, x.Shape)
		names = append(names, x.Name...)
	}
	var first int64
	for rank, d := range w.decls {
		for _, v := range d.vars {
			varRows = le.AppendUint32(varRows, uint32(rank))
			varRows = le.AppendUint32(varRows, uint32(v.id))
			varRows = le.AppendUint32(varRows, uint32(v.dataset))
			varRows = le.AppendUint32(varRows, uint32(v.typ))
			varRows = le.AppendUint32(varRows, v.es)
			varRows = le.AppendUint64(varRows, uint64(v.size))
			varRows = le.AppendUint64(varRows, uint64(len(names)))
			varRows = le.AppendUint64(varRows, uint64(len(v.name)))
			varRows = le.AppendUint64(varRows, uint64(first))
			varRows = putDims(varRows, v.offset)
			varRows = putDims(varRows, v.count)
			names = append(names, v.name...)
			first += numBlocks(v.size, int64(w.o.blockSize))
		}
		hashBytes = append(hashBytes, hashes[rank]...)
	}
	return dsRows, varRows, names, hashBytes
}
