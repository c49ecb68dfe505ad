package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dhdf"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/gsd"
	"github.com/ftigo/ftigo/vfd"
)

// Variable and global dataset ids of the job. The field is one global
// dataset, "temperature" (ny × nx), each rank's band of rows a subset of
// it, so a relaunch on any number of ranks recovers it; the iteration
// counter is the one element of dataset "iteration", held by rank 0 (the
// others map zero elements) and broadcast after a restart.
const (
	varIter  = 0
	varField = 1
	dsField  = 0
	dsIter   = 1
)

// jobResult is what one launch of the job reports back.
type jobResult struct {
	Root        bool // rank 0 of the solver's communicator: it holds Field
	Status      ckpt.Status
	RestartID   int64
	RestartLvl  int
	OldRanks    int // ranks that wrote the checkpoint it restarted from
	StartIter   int64
	Checkpoints []ckptRecord
	Field       []float64 // final field, on completion
	// Stopped: a stop (a signal, the halt file, the time left) made the
	// job take a final checkpoint, Final, and end before the last
	// iteration; Field is then nil.
	Stopped bool
	Final   ckptRecord
}

// ckptRecord is one checkpoint taken by the job.
type ckptRecord struct {
	ID       int64
	Level    int
	Iter     int64
	Bytes    int64 // protected bytes over all ranks
	Duration time.Duration
}

// events receives progress lines; the orchestrator reads them from the
// child's standard output to decide when to kill it.
type events struct {
	mu sync.Mutex
	w  io.Writer
}

func (e *events) emit(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.w, "EVENT "+format+"\n", args...)
}

func (e *events) printf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.w, format, args...)
}

// areas returns the run's storage directories under dir.
func areas(dir string) (local, global, meta string) {
	return filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
}

// jobConfig builds the checkpoint configuration of the job: node_size
// ranks per node, every node in one group, the three areas under dir.
func jobConfig(o *options) (ckpt.Config, error) {
	var cfg ckpt.Config
	if o.config != "" {
		c, err := ckpt.LoadConfig(vfd.Sec2{}, o.config)
		if err != nil {
			return cfg, err
		}
		cfg = c
	} else {
		cfg = ckpt.DefaultConfig()
		cfg.NodeSize = o.ranks / o.nodes
		cfg.GroupSize = o.nodes
		cfg.LocalTest = true
	}
	local, global, meta := areas(o.dir)
	if cfg.CkptDir == "" {
		cfg.CkptDir = local
	}
	if cfg.GlblDir == "" {
		cfg.GlblDir = global
	}
	if cfg.MetaDir == "" {
		cfg.MetaDir = meta
	}
	if o.heads {
		cfg.Head = true
	}
	if o.async || o.heads {
		cfg.Async = [5]bool{2: true, 3: true, 4: true}
	}
	if o.snapshot {
		cfg.Snapshot = true
	}
	if o.walltime > 0 {
		cfg.Policy.Walltime = o.walltime
	}
	if o.stopGrace > 0 {
		cfg.Policy.StopGrace = o.stopGrace
	}
	switch {
	case o.keepLastSet:
		cfg.KeepLastCkpt = o.keepLast
	case o.config == "":
		// Finalize keeps the last checkpoint, at L4, instead of deleting
		// every one: ftigo inspect and verify have something to show.
		cfg.KeepLastCkpt = true
	}
	return cfg, nil
}

// runJob runs one launch of the solver on c: it initialises the
// checkpoint runtime (on a head rank, with -heads, that is all: Init
// returns ckpt.ErrHead once the application ranks finalized, and runJob
// returns a nil result after the event "head done"; the solver runs on
// the runtime's communicator, without the heads), recovers when this is
// a restart, iterates with checkpoints every o.ckptEvery iterations at
// the levels of o.levels in turn, writes trajectory frames, and at the end
// the HDF set, the image and the raw final field. Every rank calls it.
//
// A stop (a stop signal, the halt file, walltime or Slurm's job end)
// makes the job take a final checkpoint at the next iteration's check,
// report it ("EVENT final", and "final checkpoint N at Lk, exiting" on
// standard output), Close the runtime and return with Stopped: the next
// launch resumes from that checkpoint.
func runJob(c comm.Comm, o *options, ev *events, early *earlySignals, logger *zap.Logger) (*jobResult, error) {
	cfg, err := jobConfig(o)
	if err != nil {
		return nil, err
	}
	opts := []ckpt.Option{ckpt.WithLogger(logger)}
	if o.globalLatency > 0 || o.ioLatency > 0 {
		slow := func(d time.Duration) vfd.Driver {
			if d <= 0 {
				return vfd.Sec2{}
			}
			return vfd.NewFault(vfd.Sec2{}, vfd.Latency(d, vfd.OpWrite, vfd.OpSync))
		}
		opts = append(opts, ckpt.WithDrivers(slow(o.ioLatency), slow(o.ioLatency+o.globalLatency), slow(o.ioLatency)))
	}
	world := c
	rt, err := ckpt.Init(cfg, c, opts...)
	if err == nil {
		// The runtime catches the stop signals now: the ones held
		// since the job started are handed to it.
		err = early.release(rt.Comm())
	}
	if errors.Is(err, ckpt.ErrHead) {
		// A head: Init post-processed the node's checkpoints and returned
		// once the application ranks finalized. Nothing else to do.
		ev.emit("head done rank=%d", world.Rank())
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("init checkpointing: %w", err)
	}
	// The solver's communicator: the world without the heads (FTI's
	// FTI_COMM_WORLD), the world itself when there are none.
	c = rt.Comm()
	perNode := o.ranks / o.nodes
	if cfg.Head {
		perNode--
	}
	perNode = max(perNode, 1) // a -config node_size other than ranks/nodes
	b, err := NewBlock(o.nx, o.ny, c.Rank(), c.Size())
	if err != nil {
		return nil, err
	}
	// The protected variables: the band's rows without the halo (a view
	// into b.U, re-pointed after each step swaps the buffers) and, on
	// rank 0, the iteration counter.
	interior := b.Interior()
	iterVar := []int64{}
	if c.Rank() == 0 {
		iterVar = []int64{0}
	}
	if err := errors.Join(
		ckpt.Protect(rt, varIter, &iterVar, "iteration"),
		ckpt.Protect(rt, varField, &interior, "temperature"),
		ckpt.DefineDataset[float64](rt, dsField, "temperature", []int64{int64(o.ny), int64(o.nx)}),
		ckpt.DefineDataset[int64](rt, dsIter, "iteration", []int64{1}),
		rt.AddSubset(varField, dsField, []int64{int64(b.Row0), 0}, []int64{int64(b.Rows), int64(b.NX)}),
		rt.AddSubset(varIter, dsIter, []int64{0}, []int64{int64(len(iterVar))}),
	); err != nil {
		return nil, err
	}
	res := &jobResult{Status: rt.Status(), Root: c.Rank() == 0}
	var iter int64
	if rt.Status() != ckpt.Fresh {
		// Collective when the checkpoint was written by another number
		// of ranks: the bands are redistributed from the old ones.
		if err := rt.Recover(); err != nil {
			return nil, fmt.Errorf("recover: %w", err)
		}
		if len(interior) != b.Rows*b.NX {
			return nil, fmt.Errorf("recovered field has %d values, want %d", len(interior), b.Rows*b.NX)
		}
		copy(b.Interior(), interior) // a no-op unless Recover had to reallocate
		m := rt.Recovered()
		res.RestartID, res.RestartLvl, res.OldRanks = m.ID, int(m.Level), rt.OldRanks()
		local := int64(0)
		if len(iterVar) == 1 {
			local = iterVar[0]
		}
		if iter, err = comm.AllreduceValue(c, local, comm.Max); err != nil {
			return nil, err
		}
	}
	res.StartIter = iter
	if err := c.Barrier(); err != nil {
		return nil, err
	}
	if c.Rank() == 0 {
		// Files per node right after recovery: a lost node's count shows
		// what Init rebuilt onto it.
		// The node directories of the configuration's ckpt_dir.
		counts := make([]string, o.nodes)
		for n := range counts {
			counts[n] = strconv.Itoa(countFiles(filepath.Join(cfg.CkptDir, fmt.Sprintf("node%04d", n))))
		}
		ev.emit("start status=%s id=%d level=%d iter=%d oldranks=%d ranks=%d nodefiles=%s", res.Status, res.RestartID, res.RestartLvl, iter,
			res.OldRanks, c.Size(), strings.Join(counts, ","))
	}
	traj, err := openTrajectory(c, o, iter)
	if err != nil {
		return nil, err
	}
	defer traj.close()

	protected := int64(len(interior)*8 + len(iterVar)*8)
	var pending int64 // a snapshot-mode checkpoint not yet durable (0: none)
	lastID := res.RestartID
	for iter < int64(o.iters) {
		pending = snapshotDone(rt, c, ev, pending, false)
		if err := b.Exchange(c); err != nil {
			return nil, err
		}
		b.Step(o.alpha)
		iter++
		if o.frameEvery > 0 && iter%int64(o.frameEvery) == 0 {
			if err := traj.frame(c, b, iter, o.alpha); err != nil {
				return nil, err
			}
		}
		// A stop agreed by the ranks (checked at most every second,
		// one reduction) takes the final checkpoint now.
		stop, err := rt.NeedCheckpoint()
		if err != nil {
			return nil, err
		}
		regular := o.ckptEvery > 0 && iter%int64(o.ckptEvery) == 0 && len(o.levels) > 0 && iter < int64(o.iters)
		if regular || stop {
			// A final checkpoint between the regular ones takes the
			// next id; the runtime picks its level.
			id, level := max(lastID+1, 1), 1
			if o.ckptEvery > 0 {
				id = max(iter/int64(o.ckptEvery), id)
			}
			if regular {
				level = o.levels[int(iter/int64(o.ckptEvery)-1)%len(o.levels)]
			}
			interior = b.Interior() // Step swapped the buffers
			if len(iterVar) == 1 {
				iterVar[0] = iter
			}
			if c.Rank() == 0 {
				ev.emit("ckpt-begin id=%d level=%d iter=%d", id, level, iter)
			}
			// The previous snapshot is reported before this Checkpoint,
			// which would wait for it anyway.
			pending = snapshotDone(rt, c, ev, pending, true)
			t0 := time.Now()
			if err := rt.Checkpoint(id, level); err != nil {
				return nil, fmt.Errorf("checkpoint %d at L%d: %w", id, level, err)
			}
			d := time.Since(t0)
			total, err := c.AllreduceInt64(protected, comm.Sum)
			if err != nil {
				return nil, err
			}
			lastID = id
			if rt.ShouldExit() {
				level = rt.StopLevel()
			}
			rec := ckptRecord{ID: id, Level: level, Iter: iter, Bytes: total, Duration: d}
			res.Checkpoints = append(res.Checkpoints, rec)
			if c.Rank() == 0 {
				ev.emit("ckpt-end id=%d level=%d iter=%d bytes=%d ns=%d", id, level, iter, total, d.Nanoseconds())
			}
			if tm := rt.CheckpointTimes(); o.snapshot && tm.ID == id {
				pending = id
				if c.Rank() == 0 {
					ev.emit("ckpt-copied id=%d copy_ns=%d blocked_ns=%d wait_ns=%d", id, tm.Copy.Nanoseconds(), tm.Blocked.Nanoseconds(), tm.Wait.Nanoseconds())
				}
			}
			if rt.ShouldExit() {
				return stopJob(rt, c, ev, res, rec, pending)
			}
		}
	}
	snapshotDone(rt, c, ev, pending, true)
	field, err := GatherField(c, b)
	if err != nil {
		return nil, err
	}
	res.Field = field
	if err := writeHDFSet(c, o, b, perNode); err != nil {
		return nil, err
	}
	if err := rt.Finalize(); err != nil {
		return nil, fmt.Errorf("finalize: %w", err)
	}
	if c.Rank() == 0 {
		ev.emit("done iter=%d", iter)
	}
	return res, nil
}

// stopJob ends a launch after its final checkpoint rec: it waits for
// the checkpoint's background work (snapshot mode, async levels),
// reports it and closes the runtime, keeping every checkpoint.
func stopJob(rt *ckpt.Runtime, c comm.Comm, ev *events, res *jobResult, rec ckptRecord, pending int64) (*jobResult, error) {
	snapshotDone(rt, c, ev, pending, true)
	if err := rt.CheckpointWait(); err != nil {
		return nil, fmt.Errorf("final checkpoint %d at L%d: %w", rec.ID, rec.Level, err)
	}
	if err := rt.Close(); err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	if c.Rank() == 0 {
		why := strings.Join(strings.Fields(rt.StopReason()), " ")
		ev.emit("final id=%d level=%d iter=%d why=%s", rec.ID, rec.Level, rec.Iter, why)
		ev.printf("heat2d: final checkpoint %d at L%d (iteration %d), exiting (stopped by %s)\n", rec.ID, rec.Level, rec.Iter, why)
	}
	res.Stopped, res.Final = true, rec
	return res, nil
}

// trajectory is rank 0's GSD writer of the whole field (nil elsewhere).
type trajectory struct {
	w *gsd.Writer
}

const (
	gsdSchema    = "heat2d"
	gsdSchemaVer = gsd.Version(1 << 16)
)

// openTrajectory opens DIR/heat2d.gsd on rank 0: created on a fresh run;
// on a restart from iteration start, the frames the killed run wrote after
// start are dropped first so the file holds each step once. An empty file
// (a run killed while creating it with an older, non-atomic writer) is
// replaced by a fresh one (gsd.CreateOrAppend).
func openTrajectory(c comm.Comm, o *options, start int64) (*trajectory, error) {
	t := &trajectory{}
	if c.Rank() != 0 || o.frameEvery <= 0 {
		return t, nil
	}
	d := vfd.Sec2{}
	name := filepath.Join(o.dir, "heat2d.gsd")
	if _, err := d.Stat(name); err == nil {
		if err := truncateTrajectory(d, name, start); err != nil && !errors.Is(err, gsd.ErrEmpty) {
			return nil, err
		}
	}
	w, err := gsd.CreateOrAppend(d, name, "ftigo heat2d", gsdSchema, gsdSchemaVer)
	if err != nil {
		return nil, fmt.Errorf("open trajectory: %w", err)
	}
	t.w = w
	return t, nil
}

// truncateTrajectory rewrites name keeping only the frames whose step is at
// most last, with the write-temporary-then-rename protocol.
func truncateTrajectory(d vfd.Driver, name string, last int64) error {
	r, err := gsd.Open(d, name)
	if err != nil {
		return fmt.Errorf("open trajectory for restart: %w", err)
	}
	defer r.Close()
	keep := uint64(0)
	for f := uint64(0); f < r.NFrames(); f++ {
		raw, _, err := r.ReadChunkRaw(f, "step")
		if err != nil || len(raw) != 8 || int64(binary.LittleEndian.Uint64(raw)) > last {
			break
		}
		keep = f + 1
	}
	if keep == r.NFrames() {
		return nil
	}
	tmp := name + ".tmp"
	w, err := gsd.Create(d, tmp, r.Application(), gsdSchema, gsdSchemaVer, gsd.WithOverwrite())
	if err != nil {
		return err
	}
	for f := uint64(0); f < keep; f++ {
		for _, n := range r.ChunkNames("") {
			if !r.ChunkExists(f, n) {
				continue
			}
			raw, e, err := r.ReadChunkRaw(f, n)
			if err != nil {
				return errors.Join(err, w.Close())
			}
			if err := w.WriteRaw(n, e.Type, e.N, e.M, raw); err != nil {
				return errors.Join(err, w.Close())
			}
		}
		if err := w.EndFrame(); err != nil {
			return errors.Join(err, w.Close())
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := d.Rename(tmp, name); err != nil {
		return err
	}
	return d.SyncDir(filepath.Dir(name))
}

// frame gathers the field on rank 0 and appends it as one frame: the
// temperature as an ny × nx float64 chunk, the step and the time.
func (t *trajectory) frame(c comm.Comm, b *Block, step int64, alpha float64) error {
	field, err := GatherField(c, b)
	if err != nil || t.w == nil {
		return err
	}
	if err := gsd.WriteChunk(t.w, "temperature", field, uint64(b.NY), uint32(b.NX)); err != nil {
		return err
	}
	if err := gsd.WriteChunk(t.w, "step", []uint64{uint64(step)}, 1, 1); err != nil {
		return err
	}
	if err := gsd.WriteChunk(t.w, "time", []float64{float64(step) * alpha}, 1, 1); err != nil {
		return err
	}
	return t.w.EndFrame()
}

func (t *trajectory) close() {
	if t.w != nil {
		t.w.Close()
	}
}

// writeHDFSet writes the final field as the distributed HDF set DIR/field:
// each rank's band goes into its own associated file, rank 0 writes the
// main file with the virtual dataset that stitches them.
func writeHDFSet(c comm.Comm, o *options, b *Block, perNode int) error {
	w, err := dhdf.CreateParallel(c, filepath.Join(o.dir, "field"), dhdf.Options{HostName: fmt.Sprintf("node%04d", c.Rank()/perNode)})
	if err != nil {
		return fmt.Errorf("create HDF set: %w", err)
	}
	f64, _ := h5.TypeOf(float64(0))
	sds := dhdf.SDS{
		Name: "temperature",
		Type: f64,
		Dims: []uint64{uint64(b.NY), uint64(b.NX)},
		Attrs: []h5.Attribute{
			h5.MustAttr("alpha", o.alpha),
			h5.MustAttr("iterations", int64(o.iters)),
			h5.StringAttr("units", "arbitrary temperature units"),
		},
	}
	if err := w.DefineSDS(sds); err != nil {
		return errors.Join(err, w.Close())
	}
	data := float64Bytes(b.Interior())
	if err := w.WriteChunk("temperature", 0, fmt.Sprintf("rows_%05d", b.Row0), []uint64{uint64(b.Row0), 0}, []uint64{uint64(b.Rows), uint64(b.NX)}, data); err != nil {
		return errors.Join(err, w.Close())
	}
	return w.Close()
}

// fieldBytes encodes a field as little-endian float64s.
func fieldBytes(field []float64) []byte {
	out := make([]byte, 8*len(field))
	for i, v := range field {
		binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(v))
	}
	return out
}

// snapshotDone reports checkpoint pending (snapshot mode; 0: none) once
// durable on this rank, with its copy, background and durable times
// (rank 0: "EVENT ckpt-durable"), and returns what is still pending.
// With wait it waits for it. Local.
func snapshotDone(rt *ckpt.Runtime, c comm.Comm, ev *events, pending int64, wait bool) int64 {
	if pending == 0 {
		return 0
	}
	if wait {
		_ = rt.CheckpointWait() // a failure is Finalize's to report
	} else if done, _ := rt.CheckpointDone(); !done {
		return pending
	}
	tm := rt.CheckpointTimes()
	if c.Rank() == 0 && tm.ID == pending && tm.Durable {
		ev.emit("ckpt-durable id=%d copy_ns=%d background_ns=%d durable_ns=%d", pending, tm.Copy.Nanoseconds(), tm.Background.Nanoseconds(), tm.ToDurable.Nanoseconds())
	}
	return 0
}
