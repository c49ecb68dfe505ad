package ckpt

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/levels"
	"github.com/ftigo/ftigo/partner"
	"github.com/ftigo/ftigo/vfd"
)

// Status says how the run started.
type Status int

// Run statuses, with FTI_Status's numbers.
const (
	// Fresh is a first run: nothing to recover.
	Fresh Status = 0
	// Restart is a restart from the newest recoverable checkpoint.
	Restart Status = 1
	// RestartKept is a restart from the checkpoint the previous run kept at
	// Finalize (keep_last_ckpt).
	RestartKept Status = 2
)

// String returns "fresh", "restart" or "restart-kept".
func (s Status) String() string {
	switch s {
	case Fresh:
		return "fresh"
	case Restart:
		return "restart"
	case RestartKept:
		return "restart-kept"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Option configures [Init].
type Option func(*options)

type options struct {
	logger  *zap.Logger
	now     func() time.Time
	local   vfd.Driver
	global  vfd.Driver
	meta    vfd.Driver
	levels  []levels.Level
	nodeID  func(rank int) string
	policy  levels.Policy
	buffers *partner.Buffers
	// verifyAll makes Init verify every file of the checkpoint it
	// restarts from, even data that Recover would check while reading it
	// (RebuildOffline: nothing reads the data afterwards).
	verifyAll bool
}

// WithLogger sets the logger (nil: no logging).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock sets the clock used for timing and Snapshot intervals.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithDriver sets the driver of all three storage areas (default vfd.Sec2{}).
func WithDriver(d vfd.Driver) Option {
	return func(o *options) { o.local, o.global, o.meta = d, d, d }
}

// WithDrivers sets the drivers of the node-local, global and meta areas separately.
func WithDrivers(local, global, meta vfd.Driver) Option {
	return func(o *options) { o.local, o.global, o.meta = local, global, meta }
}

// WithLevels registers level implementations in place of the built-in
// ones (levels.Local1, Partner2, RS3, and Global4 with Inline: each rank
// writes its L4 data straight into its task of the global container, with
// no local copy); a later registration of the same level number wins, so
// WithLevels(levels.Global4{}) restores the local-then-copy L4.
func WithLevels(ls ...levels.Level) Option {
	return func(o *options) { o.levels = append(o.levels, ls...) }
}

// WithNodeID names the node of this rank (a host name). By default nodes
// are simulated (rank/node_size) under local_test, taken from the
// communicator when it implements comm.NodeIDer, and simulated otherwise.
func WithNodeID(f func(rank int) string) Option { return func(o *options) { o.nodeID = f } }

// WithBuffers shares one pool of L2/L3 transfer blocks between the ranks
// of a process (by default each Runtime has its own).
func WithBuffers(b *partner.Buffers) Option { return func(o *options) { o.buffers = b } }

// WithPolicy replaces the retention policy built from the configuration.
func WithPolicy(p levels.Policy) Option { return func(o *options) { o.policy = p } }

// Runtime is one rank's checkpoint runtime. Its collective methods (Init,
// Checkpoint, Snapshot, Recover, Finalize) must be called by every rank in
// the same order; Protect, RecoverVar and StoredSize are local. A Runtime
// is used by one goroutine (its rank's).
type Runtime struct {
	cfg    Config
	c      comm.Comm
	log    *zap.Logger
	now    func() time.Time
	topo   *partner.Topology
	env    *levels.Env
	eng    *levels.Engine
	status Status

	vars  map[int]*variable
	order []int // protect order

	recovered *levels.Manifest // readable by Recover until the next checkpoint
	from      *levels.Manifest // the checkpoint Init restarted from
	src       levels.Source
	stored    *storedFile // the recovered data file, opened lazily
	restored  bool        // Recover has run (Snapshot then ticks)
	lastID    int64
	// layout is the FTI-FF layout of the last committed checkpoint (or of
	// the recovered file), passed to the next fileformat.Write.
	layout *fileformat.Layout

	snap      snapState
	finalized bool
}

// Init starts the runtime on this rank: it validates cfg for the
// communicator's size, builds the topology (remapped onto replacement
// nodes on a restart), creates the directories, removes what a crashed
// run left half-written, and on a restart recovers the newest checkpoint
// every rank can read, rebuilding lost files from redundancy, before it
// returns. A restart whose checkpoints are all unrecoverable returns an
// error wrapping [ErrUnrecoverable]; Init never turns it into a fresh
// start. Collective; the status and any error are identical on every rank.
//
// Data is read and hashed once per restart. When every rank's data file
// of the newest checkpoint is in place as written (an L1 checkpoint),
// Init checks its size, header, metadata and file checksum against the
// manifest without reading the data, and [Runtime.Recover] checks every
// block against its hash as it reads it; should a block not match,
// Recover verifies every file and falls back to older checkpoints as
// Init otherwise does (see [Runtime.Recover]). Any other checkpoint is
// verified completely by Init.
func Init(cfg Config, c comm.Comm, opts ...Option) (*Runtime, error) {
	o := options{local: vfd.Sec2{}, global: vfd.Sec2{}, meta: vfd.Sec2{}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	if o.now == nil {
		o.now = time.Now
	}
	cfg = cfg.withDefaults()
	// verbosity: 1 debug, 2 info, 3 warnings, 4 errors.
	if lvl := zapcore.Level(min(max(cfg.Verbosity, 1), 4) - 2); lvl > zapcore.DebugLevel {
		o.logger = o.logger.WithOptions(zap.IncreaseLevel(lvl))
	}
	r := &Runtime{cfg: cfg, c: c, log: o.logger.With(zap.Int("rank", c.Rank())), now: o.now, vars: map[int]*variable{}}
	if c.Rank() == 0 {
		for _, w := range cfg.Warnings {
			r.log.Warn("config: " + w)
		}
	}
	if err := levels.Agree(c, cfg.Validate(c.Size()), "validate config"); err != nil {
		return nil, err
	}
	topo, err := r.buildTopology(o)
	if err != nil {
		return nil, err
	}
	r.topo = topo
	node := topo.NodeOf(c.Rank())
	r.env = &levels.Env{
		Comm: c, Topo: topo, Rank: c.Rank(),
		Local:        levels.Store{Driver: o.local, Dir: path.Join(cfg.CkptDir, topo.NodeDir(node))},
		Global:       levels.Store{Driver: o.global, Dir: cfg.GlblDir},
		Meta:         levels.Store{Driver: o.meta, Dir: cfg.MetaDir},
		BlockSize:    cfg.BlockSize,
		TransferSize: cfg.TransferSize,
		Logger:       r.log,
		Now:          o.now,
	}
	if o.buffers == nil {
		o.buffers = &partner.Buffers{}
	}
	ls := append([]levels.Level{levels.Local1{}, levels.Partner2{Buffers: o.buffers}, levels.RS3{M: cfg.L3Parity, Buffers: o.buffers}, levels.Global4{Inline: true}}, o.levels...)
	policy := o.policy
	if policy == nil {
		policy = levels.FTIPolicy{KeepL4: cfg.KeepL4Ckpt, KeepLast: cfg.KeepLast}
	}
	r.eng, err = levels.NewEngine(r.env, levels.Config{Levels: ls, Policy: policy})
	if err != nil {
		return nil, err
	}
	if err := r.eng.Open(); err != nil {
		return nil, fmt.Errorf("ckpt: open checkpoint store: %w", err)
	}
	committed := r.eng.Committed()
	if len(committed) == 0 {
		r.status = Fresh
		r.log.Debug("fresh run")
		return r, nil
	}
	var m *levels.Manifest
	var src levels.Source
	if o.verifyAll {
		m, src, err = r.eng.Recover()
	} else {
		m, src, _, err = r.eng.RecoverDeferred()
	}
	if err != nil {
		return nil, fmt.Errorf("ckpt: restart: %w", err)
	}
	r.restartFrom(m, src)
	if c.Rank() == 0 {
		r.log.Info("this is a restart", zap.Int64("ckpt-id", m.ID), zap.Stringer("level", m.Level),
			zap.String("dir", m.Dir()), zap.Stringer("status", r.status))
	}
	return r, nil
}

// restartFrom makes m, with this rank's data at src, the checkpoint the
// run restarts from.
func (r *Runtime) restartFrom(m *levels.Manifest, src levels.Source) {
	r.closeStored()
	r.recovered, r.from, r.src, r.lastID = m, m, src, m.ID
	// The next checkpoint continues the recovered file's layout.
	if st, err := r.openStored(); err == nil {
		r.layout = st.r.Layout()
	} else {
		r.log.Debug("recovered file's layout unreadable; the next checkpoint lays variables out afresh", zap.Error(err))
	}
	r.status = Restart
	if m.Kept {
		r.status = RestartKept
	}
}

// topologyFile is the node table's name in meta_dir.
//
// wire format: never change.
const topologyFile = "topology"

// buildTopology gathers every rank's node id, builds the topology and, on a
// restart, remaps it onto the node table saved in meta_dir so a
// replacement node takes a vanished node's place; rank 0 saves the table.
func (r *Runtime) buildTopology(o options) (*partner.Topology, error) {
	c, cfg := r.c, r.cfg
	id := fmt.Sprintf("node%04d", c.Rank()/cfg.NodeSize)
	switch {
	case o.nodeID != nil:
		id = o.nodeID(c.Rank())
	case cfg.LocalTest:
	default:
		if n, ok := c.(comm.NodeIDer); ok {
			id = n.NodeID()
		}
	}
	all, err := levels.GatherBytes(c, []byte(id))
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(all))
	for i, b := range all {
		ids[i] = string(b)
	}
	topo, err := partner.NewTopology(c.Size(), cfg.NodeSize, cfg.GroupSize, ids)
	if err := levels.Agree(c, err, "build topology"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	// The saved table, read by rank 0.
	meta := o.meta
	name := path.Join(cfg.MetaDir, topologyFile)
	var saved []byte
	var rerr error
	if c.Rank() == 0 {
		rerr = meta.MkdirAll(cfg.MetaDir, 0o755)
		if rerr == nil {
			saved, rerr = vfd.ReadFileLimit(meta, name, maxTopologySize)
			if errors.Is(rerr, fs.ErrNotExist) {
				saved, rerr = nil, nil
			}
		}
	}
	if err := levels.Agree(c, rerr, "read node table"); err != nil {
		return nil, err
	}
	saved, err = levels.BcastBytes(c, 0, saved)
	if err != nil {
		return nil, err
	}
	if len(saved) > 0 {
		table, err := partner.UnmarshalTable(saved)
		if err == nil {
			var re *partner.Topology
			re, err = topo.Remap(table)
			if err == nil {
				topo = re
			}
		}
		if err != nil {
			// A different machine layout: keep the fresh placement, the
			// recovery ladder decides what is usable.
			if c.Rank() == 0 {
				r.log.Warn("saved node table does not fit this run; using a fresh placement", zap.Error(err))
			}
		}
	}
	var werr error
	if c.Rank() == 0 {
		b, err := topo.Table().Marshal()
		if err == nil && string(b) != string(saved) {
			err = vfd.WriteFileAtomic(meta, name, b)
		}
		werr = err
	}
	if err := levels.Agree(c, werr, "save node table"); err != nil {
		return nil, err
	}
	return topo, nil
}

// Status reports how the run started.
func (r *Runtime) Status() Status { return r.status }

// Topology returns the run's topology.
func (r *Runtime) Topology() *partner.Topology { return r.topo }

// Recovered returns the manifest of the checkpoint this run restarted
// from, or nil on a fresh run.
func (r *Runtime) Recovered() *levels.Manifest { return r.from }

// Wait blocks until this rank's background deletion of superseded
// checkpoint files has finished. A job that ends without [Runtime.Finalize]
// (keeping every committed checkpoint for the next run, as after a kill)
// calls it before it exits; Checkpoint and Finalize wait by themselves.
// Local.
func (r *Runtime) Wait() { r.eng.Wait() }

func (r *Runtime) protect(v *variable) error {
	if r.finalized {
		return ErrFinalized
	}
	if v.id < 0 || v.id > r.cfg.MaxVarID {
		return fmt.Errorf("%w: %d (must be 0..max_var_id %d)", ErrBadID, v.id, r.cfg.MaxVarID)
	}
	if _, ok := r.vars[v.id]; !ok {
		r.order = append(r.order, v.id)
	}
	r.vars[v.id] = v
	return nil
}

// Unprotect removes a variable from future checkpoints.
func (r *Runtime) Unprotect(id int) {
	if _, ok := r.vars[id]; !ok {
		return
	}
	delete(r.vars, id)
	for i, x := range r.order {
		if x == id {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
}
