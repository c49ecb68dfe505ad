package levels

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// Differential checkpoints (docs/format/dcp.md): the manifest records the
// chain a differential checkpoint depends on, retention and deletion
// respect it, and recovery recovers every layer with its own level before
// the image is read.

// Attributes of the data entry of a differential checkpoint.
//
// wire format: never change — stored in manifests.
const (
	// AttrFormat names the format of a data file when it is not a full
	// FTI-FF file: [FormatDelta].
	AttrFormat = "format"
	// FormatDelta marks a delta file (the data file of a differential checkpoint).
	FormatDelta = fileformat.FormatDelta
	// AttrImage is the file checksum (64 hex digits) of the rank's image:
	// the FTI-FF file a full checkpoint of the same state would have written.
	AttrImage = "image"
	// AttrImageSize is the size in bytes of that image (decimal).
	AttrImageSize = "image-size"
)

// DCP is what the manifest of a differential checkpoint records.
type DCP struct {
	// Chain lists the sequence numbers of the checkpoints this one
	// depends on, oldest first: the full base, then every differential
	// checkpoint up to its parent (the last).
	Chain []uint64 `json:"chain"`
	// BlockSize is the dCP block size in bytes.
	BlockSize int `json:"block_size"`
	// Written is the variable data written (changed blocks) by all ranks;
	// Protected the variable data they protect. Written/Protected is FTI's
	// "dCP share".
	Written   int64 `json:"written"`
	Protected int64 `json:"protected"`
}

// Share returns Written/Protected (0 when nothing is protected).
func (d *DCP) Share() float64 {
	if d == nil || d.Protected <= 0 {
		return 0
	}
	return float64(d.Written) / float64(d.Protected)
}

// Differential reports whether m is a differential checkpoint.
func (m *Manifest) Differential() bool { return m.DCP != nil }

// Parent returns the sequence number of the checkpoint a differential
// checkpoint builds on; ok is false for a full one.
func (m *Manifest) Parent() (seq uint64, ok bool) {
	if m.DCP == nil || len(m.DCP.Chain) == 0 {
		return 0, false
	}
	return m.DCP.Chain[len(m.DCP.Chain)-1], true
}

// Layers returns the number of layers of m's chain, m included: 1 for a
// full checkpoint.
func (m *Manifest) Layers() int {
	if m.DCP == nil {
		return 1
	}
	return len(m.DCP.Chain) + 1
}

// DependsOn reports whether checkpoint seq is in m's chain.
func (m *Manifest) DependsOn(seq uint64) bool {
	return m.DCP != nil && slices.Contains(m.DCP.Chain, seq)
}

func (m *Manifest) validateDCP() error {
	if err := m.validateChain(); err != nil || m.DCP == nil {
		return err
	}
	for r := 0; r < m.Ranks; r++ {
		f, _ := m.DataFile(r)
		if err := checkDelta(r, f); err != nil {
			return err
		}
	}
	return nil
}

// validateChain checks the dcp field alone.
func (m *Manifest) validateChain() error {
	d := m.DCP
	if d == nil {
		return nil
	}
	if len(d.Chain) == 0 {
		return errors.New("dcp: empty chain")
	}
	for i, s := range d.Chain {
		if s >= m.Seq || (i > 0 && s <= d.Chain[i-1]) {
			return fmt.Errorf("dcp: chain %v is not strictly increasing below seq %d", d.Chain, m.Seq)
		}
	}
	if d.BlockSize < fileformat.MinBlockSize || d.BlockSize > fileformat.MaxBlockSize || d.Written < 0 || d.Protected < 0 || d.Written > d.Protected {
		return fmt.Errorf("dcp: block size %d, %d bytes written of %d protected", d.BlockSize, d.Written, d.Protected)
	}
	return nil
}

// checkDelta checks rank r's data entry f of a differential checkpoint.
func checkDelta(r int, f File) error {
	if f.Attrs[AttrFormat] != FormatDelta {
		return fmt.Errorf("dcp: rank %d's data file %q is not marked %s", r, f.Name, FormatDelta)
	}
	if _, err := imageDigest(f); err != nil {
		return fmt.Errorf("dcp: rank %d: %v", r, err)
	}
	return nil
}

// imageDigest returns the image checksum a delta data entry records.
func imageDigest(f File) (Digest, error) {
	var d Digest
	b, err := hex.DecodeString(f.Attrs[AttrImage])
	if err != nil || len(b) != len(d) {
		return d, fmt.Errorf("bad %s attribute %q", AttrImage, f.Attrs[AttrImage])
	}
	copy(d[:], b)
	if n, err := strconv.ParseInt(f.Attrs[AttrImageSize], 10, 64); err != nil || n < 0 {
		return d, fmt.Errorf("bad %s attribute %q", AttrImageSize, f.Attrs[AttrImageSize])
	}
	return d, nil
}

// DataStats are the variable bytes one rank wrote and protects in a
// checkpoint (both the data size for a full one). Logical and Stored,
// set by a writer that compressed or reduced some variable, are the
// bytes it wrote as the program holds them and as the file holds them;
// their sums go to the manifest ([Manifest.Compressed]).
type DataStats struct {
	Written, Protected int64
	Logical, Stored    int64
}

// DeltaInfo is what the [WriteFunc] of a differential checkpoint reports
// about the delta it wrote: its image's checksum and size, and its data
// statistics.
type DeltaInfo struct {
	Image     Digest
	ImageSize int64
	DataStats
}

// CheckpointOption configures one [Engine.Checkpoint].
type CheckpointOption func(*checkpointOptions)

type checkpointOptions struct {
	parent    *Manifest
	blockSize int
	delta     func() DeltaInfo
	stats     func() DataStats
	sizeHint  int64
	// target is the level an L1 checkpoint will be raised to ([RaiseLater]).
	target ID
	// prewritten: the data file exists already ([Prewritten]).
	prewritten bool
}

func buildCheckpointOptions(opts []CheckpointOption) checkpointOptions {
	var o checkpointOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// Differential makes the checkpoint a differential one built on parent, a
// committed checkpoint at the same level that recovery has not found
// unrecoverable, with dCP blocks of blockSize bytes. The [WriteFunc]
// writes each rank's delta file (fileformat.WriteDelta) and info, called
// once it succeeded, says what it wrote. The manifest records the chain
// (parent's chain and parent) and the totals. Every rank must pass the
// same parent.
func Differential(parent *Manifest, blockSize int, info func() DeltaInfo) CheckpointOption {
	return func(o *checkpointOptions) { o.parent, o.blockSize, o.delta = parent, blockSize, info }
}

// RaiseLater marks an L1 checkpoint that the caller will raise to level
// target with [Engine.Raise] (asynchronous post-processing). A
// differential one may then build on a parent at target: the level its
// chain will have once raised.
func RaiseLater(target ID) CheckpointOption {
	return func(o *checkpointOptions) { o.target = target }
}

// Prewritten says the caller has already written (part of) this rank's
// data file under its tmp name ([Engine.NextDataFile]), as an incremental
// checkpoint does: the engine opens it without truncating it and the
// [WriteFunc] completes it. Only for a level that does not place the data
// itself ([DataOpener]).
func Prewritten() CheckpointOption {
	return func(o *checkpointOptions) { o.prewritten = true }
}

// NextDataFile returns the store and the name (tmp suffix included) under
// which this rank's data file of the next checkpoint at a level writing
// to area is written: where a [Prewritten] checkpoint's data goes. The
// name holds until the next checkpoint is taken. Local.
func (e *Engine) NextDataFile(area Where) (Store, string) {
	return e.env.Store(area), RankFileName(CheckpointDir(e.nextSeq), RoleData, e.env.Rank) + TmpSuffix
}

// SizeHint tells a level that places the data itself ([DataOpener]) the
// size this rank's data file will have (an L4 container task is sized by
// it); without it the size of the newest committed data file is used.
func SizeHint(n int64) CheckpointOption {
	return func(o *checkpointOptions) { o.sizeHint = n }
}

// OpensData reports whether level lvl places each rank's data itself
// ([DataOpener]): what a [SizeHint] is for.
func (e *Engine) OpensData(lvl ID) bool {
	_, ok := opensData(e.levels[lvl])
	return ok
}

// ReadsData reports whether level lvl's Protect reads (and hashes) the
// whole data file ([DataReader]): a writer may then leave the data file's
// digest to it.
func (e *Engine) ReadsData(lvl ID) bool { return readsData(e.levels[lvl]) }

// WithDataStats reports a full checkpoint's data statistics, for the
// totals in [Stats] (the dCP share of a full checkpoint is 1).
func WithDataStats(f func() DataStats) CheckpointOption {
	return func(o *checkpointOptions) { o.stats = f }
}

// dataStats returns this rank's statistics after a successful write.
func (o *checkpointOptions) dataStats() DataStats {
	switch {
	case o.delta != nil:
		return o.delta().DataStats
	case o.stats != nil:
		return o.stats()
	}
	return DataStats{}
}

// checkParent returns the chain of a differential checkpoint at lvl on
// o.parent, or an error when the parent cannot carry one (identical on
// every rank: the committed list is).
func (e *Engine) checkParent(o *checkpointOptions, lvl ID) ([]uint64, error) {
	p := o.parent
	if p == nil {
		return nil, nil
	}
	if o.delta == nil || o.blockSize <= 0 {
		return nil, fmt.Errorf("%w: a differential checkpoint needs its delta information and block size", ErrBadParent)
	}
	var c *Manifest
	for _, x := range e.Recoverable() {
		if x.Seq == p.Seq {
			c = x
		}
	}
	switch {
	case c == nil:
		return nil, fmt.Errorf("%w: checkpoint %s is not committed, or was found unrecoverable", ErrBadParent, p.Dir())
	case c.Level != lvl && (o.target == 0 || c.Level != o.target):
		return nil, fmt.Errorf("%w: checkpoint %s is at %v, the new one at %v", ErrBadParent, p.Dir(), c.Level, lvl)
	case c.DCP != nil && c.DCP.BlockSize != o.blockSize:
		return nil, fmt.Errorf("%w: checkpoint %s has %d-byte dCP blocks, the new one %d", ErrBadParent, p.Dir(), c.DCP.BlockSize, o.blockSize)
	}
	var chain []uint64
	if c.DCP != nil {
		chain = slices.Clone(c.DCP.Chain)
	}
	for _, s := range chain {
		if e.committedSeq(s) == nil {
			return nil, fmt.Errorf("%w: checkpoint %s depends on %s, which is not committed", ErrBadParent, p.Dir(), CheckpointDir(s))
		}
	}
	return append(chain, c.Seq), nil
}

// markDelta records on this rank's data entry that it is a delta file.
func markDelta(p *Pending, o *checkpointOptions) {
	if o.delta == nil || len(p.Files) == 0 {
		return
	}
	info := o.delta()
	f := &p.Files[0]
	if f.Attrs == nil {
		f.Attrs = map[string]string{}
	}
	f.Attrs[AttrFormat] = FormatDelta
	f.Attrs[AttrImage] = info.Image.String()
	f.Attrs[AttrImageSize] = strconv.FormatInt(info.ImageSize, 10)
}

// committedSeq returns the committed checkpoint seq, or nil.
func (e *Engine) committedSeq(seq uint64) *Manifest {
	for _, m := range e.committed {
		if m.Seq == seq {
			return m
		}
	}
	return nil
}

// keepChains removes from drop every checkpoint a checkpoint that stays
// depends on, and orders the rest newest first, so that a crash while
// they are uncommitted leaves every committed checkpoint with its chain.
func keepChains(committed, drop []*Manifest) []*Manifest {
	dropped := map[uint64]bool{}
	for _, d := range drop {
		dropped[d.Seq] = true
	}
	needed := map[uint64]bool{}
	for _, c := range committed {
		if !dropped[c.Seq] && c.DCP != nil {
			for _, s := range c.DCP.Chain {
				needed[s] = true
			}
		}
	}
	out := slices.DeleteFunc(slices.Clone(drop), func(d *Manifest) bool { return needed[d.Seq] })
	slices.SortFunc(out, func(a, b *Manifest) int {
		switch {
		case a.Seq > b.Seq:
			return -1
		case a.Seq < b.Seq:
			return 1
		}
		return 0
	})
	return out
}

// dependent returns a committed checkpoint other than m whose chain holds m, or nil.
func (e *Engine) dependent(m *Manifest) *Manifest {
	for _, c := range e.committed {
		if c.Seq != m.Seq && c.DependsOn(m.Seq) {
			return c
		}
	}
	return nil
}

// sourceOf returns where this rank's data of committed checkpoint m is,
// as the manifest says (Task set when it lives only in an L4 container).
func sourceOf(env *Env, m *Manifest) (Source, error) {
	f, ok := m.DataFile(env.Rank)
	if !ok {
		return Source{}, fmt.Errorf("%w: checkpoint %s lists no data file for rank %d", ErrMissingFile, m.Dir(), env.Rank)
	}
	s := Source{Store: env.Store(f.Where), Name: f.Name, Size: f.Size, Digest: f.Digest}
	if f.Attrs[AttrInContainer] != "" {
		ff := f
		s.Store, s.Task = env.Global, &ff
	}
	return s, nil
}

// Source returns where this rank reads its data of committed checkpoint
// m, with the sources of every layer of its chain for a differential one
// ([Source.Chain]). Nothing is read or verified. Local.
func (e *Engine) Source(m *Manifest) (Source, error) {
	src, err := sourceOf(e.env, m)
	if err != nil {
		return Source{}, err
	}
	if m.DCP == nil {
		return src, nil
	}
	for _, s := range m.DCP.Chain {
		x := e.committedSeq(s)
		if x == nil {
			return Source{}, fmt.Errorf("%w: checkpoint %s depends on %s, which is not committed", ErrMissingLayer, m.Dir(), CheckpointDir(s))
		}
		xs, err := sourceOf(e.env, x)
		if err != nil {
			return Source{}, err
		}
		src.Chain = append(src.Chain, xs)
	}
	return src, nil
}

// OpenSource opens the data of src for reading: the data file (or the L4
// task holding it), or, for a differential checkpoint, the image of its
// chain (fileformat.OpenImage: every layer opened, the links checked).
// A source holding its verified [Source.Image] is served from memory.
// The caller closes the result, which closes every layer.
func OpenSource(src Source) (vfd.File, error) {
	open1 := func(s Source) (vfd.File, error) {
		if s.Image != nil {
			return vfd.BytesFile(s.Store.Path(s.Name)+" (verified image in memory)", s.Image), nil
		}
		if s.Task != nil {
			return OpenTask(s.Store, *s.Task)
		}
		f, err := s.Store.Driver.Open(s.Store.Path(s.Name), vfd.ReadOnly)
		if err != nil {
			return nil, &CorruptionError{Path: s.Store.Path(s.Name), Rank: -1, Err: fmt.Errorf("%w: %w", ErrMissingFile, err)}
		}
		return f, nil
	}
	if len(src.Chain) == 0 {
		return open1(src)
	}
	var layers []vfd.File
	closeAll := func() error {
		var errs []error
		for _, f := range layers {
			errs = append(errs, f.Close())
		}
		return errors.Join(errs...)
	}
	for _, s := range append(slices.Clone(src.Chain), src) {
		f, err := open1(s)
		if err != nil {
			return nil, errors.Join(err, closeAll())
		}
		layers = append(layers, f)
	}
	img, err := fileformat.OpenImage(layers)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%w: %w", ErrDigestMismatch, err), closeAll())
	}
	return img, nil
}

// recoverChain recovers differential checkpoint m: every layer of its
// chain with its own level (oldest first), then m's own files, then the
// image's links are checked on every rank. Collective; the error is
// identical on every rank.
func (e *Engine) recoverChain(m *Manifest, what string) (Source, error) {
	// The layers are read from storage: a chain's images could add up to
	// more than Env.ImageLimit, and the image is assembled from them.
	env := *e.env
	env.ImageLimit = 0
	var chain []Source
	for _, s := range m.DCP.Chain {
		x := e.committedSeq(s)
		if x == nil {
			return Source{}, fmt.Errorf("%s: %w: it depends on checkpoint %s, which is not committed", what, ErrMissingLayer, CheckpointDir(s))
		}
		l, ok := e.levels[x.Level]
		if !ok {
			return Source{}, fmt.Errorf("%s: layer %s: %w", what, x.Dir(), ErrLevelUnavailable)
		}
		src, lerr := l.Recover(&env, x)
		if err := e.agree(lerr, fmt.Sprintf("recover %s (id %d, %v), a layer %s depends on", x.Dir(), x.ID, x.Level, what)); err != nil {
			return Source{}, err
		}
		chain = append(chain, src)
	}
	l := e.levels[m.Level]
	src, lerr := l.Recover(&env, m)
	if err := e.agree(lerr, "recover "+what); err != nil {
		return Source{}, err
	}
	src.Chain = chain
	// Every layer verified: the chain's links (parent checksums, clean
	// blocks held by the layer before) and the image's metadata.
	f, lerr := OpenSource(src)
	if lerr == nil {
		own, _ := m.DataFile(e.env.Rank)
		want, derr := imageDigest(own)
		if img, ok := f.(*fileformat.Image); ok && (derr != nil || Digest(img.Checksum()) != want) {
			lerr = &CorruptionError{Path: src.Store.Path(src.Name), Rank: e.env.Rank,
				Err: fmt.Errorf("%w: the chain's image has checksum %s, the manifest says %s", ErrDigestMismatch, Digest(img.Checksum()), own.Attrs[AttrImage])}
		}
		lerr = errors.Join(lerr, f.Close())
	}
	if err := e.agree(lerr, "open the image of "+what); err != nil {
		return Source{}, err
	}
	return src, nil
}

// ImageWrite returns a [WriteFunc] that writes the full FTI-FF image of
// src — a data file, or a differential checkpoint's chain — checking
// every block against the image's hash as it copies. With
// [Engine.Checkpoint] it compacts a chain into a full checkpoint, or
// flushes a differential checkpoint to L4 (keep_last_ckpt).
func ImageWrite(src Source) WriteFunc {
	return func(f vfd.File) (int64, Digest, bool, error) {
		in, err := OpenSource(src)
		if err != nil {
			return 0, Digest{}, false, err
		}
		defer in.Close()
		r, err := fileformat.Open(in)
		if err != nil {
			return 0, Digest{}, false, vfd.WrapPath(err, "image of", src.Name)
		}
		n, err := r.CopyTo(f)
		return n, Digest{}, false, err
	}
}

// Compact writes committed checkpoint m's image as a new full checkpoint
// at level lvl with m's id ([ImageWrite]); once it is committed,
// retention drops m and its chain as it would any superseded checkpoint.
// lvl is m's level, or L1 with [RaiseLater] (m's level) in opts, for a
// caller that raises it afterwards. c, when not nil, replaces the
// environment's communicator, as for [Engine.Raise]: a background
// post-processing compacts a chain that reached its length limit this
// way, over its private communicator, while no other method of the
// engine is called. Collective over c.
func (e *Engine) Compact(m *Manifest, lvl ID, c comm.Comm, opts ...CheckpointOption) (*Manifest, Stats, error) {
	if c != nil {
		e.Wait()
		defer e.useComm(c)()
	}
	src, serr := e.Source(m)
	write := ImageWrite(src)
	if serr != nil {
		write = func(vfd.File) (int64, Digest, bool, error) { return 0, Digest{}, false, serr }
	}
	return e.Checkpoint(m.ID, lvl, write, opts...)
}
