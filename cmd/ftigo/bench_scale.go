package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// The scale sweep (ftigo bench --sweep-ranks, or --mpi) measures what one
// rank pays for Init, a checkpoint and a restart as the number of ranks
// grows: its CPU, the messages and bytes it receives, the metadata it
// decodes and the memory it takes. Storage should cost little there
// (tmpfs, a few KiB per rank), so what grows is ftigo's own protocol.

// scaleConfig is one point of a scale sweep.
type scaleConfig struct {
	ranks   int
	size    int64
	group   int
	levels  []int
	repeats int
	dir     string
	// mem, when set, holds every file in this process's memory (vfd's
	// in-memory driver) instead of in dir; nil: files in dir.
	mem vfd.Driver
	// decoded says the runtime counts the metadata it decodes.
	decoded bool
}

// driver is the driver of the point's storage.
func (sc scaleConfig) driver() vfd.Driver {
	if sc.mem != nil {
		return sc.mem
	}
	return vfd.Sec2{}
}

// options are the ckpt options of the point's runtimes: no log (a
// benchmark prints its own figures), and the in-memory driver if any.
func (sc scaleConfig) options() []ckpt.Option {
	opts := []ckpt.Option{ckpt.WithLogger(zap.NewNop())}
	if sc.mem != nil {
		opts = append(opts, ckpt.WithDriver(sc.mem))
	}
	return opts
}

// scaleWorld runs the ranks of a sweep point: goroutines of this process
// (inProcWorld) or the processes of an MPI job (bench_scale_mpi.go).
type scaleWorld interface {
	// run calls fn on every rank of a world of n ranks and returns the
	// first failure (on every process).
	run(n int, fn func(c comm.Comm) error) error
	// once runs fn in one place (this process, or rank 0 of an MPI job)
	// and returns its failure on every process.
	once(fn func() error) error
	// size is the fixed number of ranks of the world (an MPI job's
	// processes), or 0 when run takes any number.
	size() int
	// perProcess says every rank is a process of its own, which then
	// measures its own CPU and memory; otherwise rank 0 measures the one
	// process holding every rank.
	perProcess() bool
	// lead says this process reports the result.
	lead() bool
	// describe names the world in the result.
	describe() string
}

// inProcWorld is the in-process world: a goroutine per rank.
type inProcWorld struct{}

func (inProcWorld) run(n int, fn func(c comm.Comm) error) error { return comm.Run(n, fn) }
func (inProcWorld) once(fn func() error) error                  { return fn() }
func (inProcWorld) size() int                                   { return 0 }
func (inProcWorld) perProcess() bool                            { return false }
func (inProcWorld) lead() bool                                  { return true }
func (inProcWorld) describe() string {
	return fmt.Sprintf("in-process world (a goroutine per rank), GOMAXPROCS %d", runtime.GOMAXPROCS(0))
}

// share is what one rank measured of one operation: its own traffic and
// metadata work, and the figures of its process on a rank that measures
// it (rank 0 in process, every rank under MPI; zero elsewhere).
type share struct {
	counts  comm.Counts
	decoded int64
	wall    time.Duration
	cpu     time.Duration
	alloc   int64 // bytes the process allocated
	peak    int64 // peak heap and stacks over the start of the operation
	rss     int64 // the process's maximum resident set at the end
	files   int64 // the most files the process held open
}

// shareLen is the number of int64 a share travels as.
const shareLen = 12

func (s share) vec() []int64 {
	c := s.counts
	return []int64{c.Sent, c.Received, c.BytesSent, c.BytesReceived, c.Collectives, s.decoded,
		int64(s.wall), int64(s.cpu), s.alloc, s.peak, s.rss, s.files}
}

func shareOf(v []int64) share {
	return share{counts: comm.Counts{Sent: v[0], Received: v[1], BytesSent: v[2], BytesReceived: v[3], Collectives: v[4]},
		decoded: v[5], wall: time.Duration(v[6]), cpu: time.Duration(v[7]), alloc: v[8], peak: v[9], rss: v[10], files: v[11]}
}

// meter measures operations on one rank.
type meter struct {
	c comm.Comm
	// proc says this rank measures its process.
	proc bool
	// level labels the CPU profile samples (--cpuprofile).
	level int
}

// measure runs op between a barrier and an agreement on its outcome and
// returns this rank's share:
// its traffic and metadata work in op (work reads the decoded bytes so
// far), and on a measuring rank the process's time, CPU and memory.
func (m meter) measure(phase string, work func() int64, op func() error) (share, error) {
	var s share
	if m.proc {
		runtime.GC() // the garbage of what came before is not this operation's
	}
	if err := m.c.Barrier(); err != nil {
		return s, err
	}
	var pm *procMeter
	if m.proc {
		pm = startProcMeter()
	}
	before, d0 := comm.CountsOf(m.c), work()
	var err error
	pprof.Do(context.Background(), pprof.Labels("phase", phase, "level", strconv.Itoa(m.level)), func(context.Context) { err = op() })
	s.counts, s.decoded = comm.CountsOf(m.c).Sub(before), work()-d0
	// A fixed-size agreement ends it, on every rank whatever its own
	// outcome: a failure anywhere fails everywhere, and no process of an
	// MPI job is left waiting in a barrier.
	err = comm.Agree(m.c, err, phase)
	if pm != nil {
		pm.stop(&s)
	}
	return s, err
}

// gather sends this rank's shares to rank 0, which returns every rank's
// (shares[rank][i]); other ranks get nil.
func gather(c comm.Comm, mine ...share) ([][]share, error) {
	send := make([]int64, 0, len(mine)*shareLen)
	for _, s := range mine {
		send = append(send, s.vec()...)
	}
	var recv []int64
	if c.Rank() == 0 {
		recv = make([]int64, len(send)*c.Size())
	}
	if err := comm.Gather(c, 0, send, recv); err != nil {
		return nil, err
	}
	if c.Rank() != 0 {
		return nil, nil
	}
	out := make([][]share, c.Size())
	for r := range out {
		for i := range mine {
			off := (r*len(mine) + i) * shareLen
			out[r] = append(out[r], shareOf(recv[off:off+shareLen]))
		}
	}
	return out, nil
}

// metadataDecoded returns the metadata bytes rt's engine decoded so far,
// when the runtime counts them: a method Work() whose result is a struct
// with an int64 field Decoded (internal/levels.Work). It is looked up by
// reflection so that the bench builds and reports n/a where the counter
// does not exist yet, and picks it up once it does.
func metadataDecoded(rt any) (int64, bool) {
	v := reflect.ValueOf(rt)
	if !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return 0, hasDecodedCounter(reflect.TypeOf(rt))
	}
	m := v.MethodByName("Work")
	if !m.IsValid() || !decodedMethod(m.Type()) {
		return 0, false
	}
	w := m.Call(nil)[0]
	if w.Kind() == reflect.Pointer {
		if w.IsNil() {
			return 0, true
		}
		w = w.Elem()
	}
	return w.FieldByName("Decoded").Int(), true
}

// hasDecodedCounter says whether values of type t count decoded metadata
// (see [metadataDecoded]).
func hasDecodedCounter(t reflect.Type) bool {
	if t == nil {
		return false
	}
	m, ok := t.MethodByName("Work")
	if !ok {
		return false
	}
	// A method of the type carries its receiver as the first argument.
	in := make([]reflect.Type, 0, m.Type.NumIn())
	for i := 1; i < m.Type.NumIn(); i++ {
		in = append(in, m.Type.In(i))
	}
	out := []reflect.Type{}
	for i := range m.Type.NumOut() {
		out = append(out, m.Type.Out(i))
	}
	return decodedMethod(reflect.FuncOf(in, out, false))
}

// decodedMethod says whether ft is func() S or func() *S with S a struct
// holding an int64 field Decoded.
func decodedMethod(ft reflect.Type) bool {
	if ft.NumIn() != 0 || ft.NumOut() != 1 {
		return false
	}
	r := ft.Out(0)
	if r.Kind() == reflect.Pointer {
		r = r.Elem()
	}
	if r.Kind() != reflect.Struct {
		return false
	}
	f, ok := r.FieldByName("Decoded")
	return ok && f.Type.Kind() == reflect.Int64
}

// scaleValue is element i of rank r's protected array in a scale sweep.
func scaleValue(r, i int) float64 { return float64(r) + float64(i)*1e-3 }

// scaleLevel takes one checkpoint at level with bc.ranks ranks in a fresh
// run directory, deletes the nodes the level is meant to survive, and
// restarts; every recovered element is checked. It returns every rank's
// shares on rank 0 of the lead process: init and checkpoint, then restart.
func scaleLevel(w scaleWorld, sc scaleConfig, level int, dir string) (initS, ckptS, restartS []share, err error) {
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, sc.group, true
	cfg.BlockSize = scaleBlockSize(sc.size)
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	elems := int(sc.size / 8)
	err = w.run(sc.ranks, func(c comm.Comm) error {
		j := newRankJob(w, c, level)
		defer j.close() // no Finalize: the job "dies" with its checkpoint committed
		v := make([]float64, elems)
		for i := range v {
			v[i] = scaleValue(c.Rank(), i)
		}
		si, err := j.measure("init", func() (err error) { j.rt, err = ckpt.Init(cfg, c, sc.options()...); return err })
		if err != nil {
			return err
		}
		if err := ckpt.Protect(j.rt, 1, &v); err != nil {
			return err
		}
		sk, err := j.measure("checkpoint", func() error { return j.rt.Checkpoint(1, level) })
		if err != nil {
			return err
		}
		all, err := gather(c, si, sk)
		if c.Rank() == 0 && err == nil {
			initS, ckptS = column(all, 0), column(all, 1)
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	d := sc.driver()
	err = w.once(func() error {
		for _, n := range lost(level, sc.ranks) {
			if err := d.RemoveAll(filepath.Join(cfg.CkptDir, fmt.Sprintf("node%04d", n))); err != nil {
				return err
			}
		}
		if level == 4 {
			return d.RemoveAll(cfg.CkptDir)
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	err = w.run(sc.ranks, func(c comm.Comm) error {
		j := newRankJob(w, c, level)
		defer j.close()
		v := make([]float64, elems)
		for i := range v {
			v[i] = math.NaN() // a restart that leaves v alone fails the check
		}
		sr, err := j.measure("restart", func() error {
			var err error
			if j.rt, err = ckpt.Init(cfg, c, sc.options()...); err != nil {
				return err
			}
			if err := ckpt.Protect(j.rt, 1, &v); err != nil {
				return err
			}
			return j.rt.Recover()
		})
		if err != nil {
			return err
		}
		want := make([]float64, elems)
		for i := range want {
			want[i] = scaleValue(c.Rank(), i)
		}
		if err := comm.Agree(c, checkRecovered(c.Rank(), v, want), "the recovered data"); err != nil {
			return err
		}
		all, err := gather(c, sr)
		if c.Rank() == 0 && err == nil {
			restartS = column(all, 0)
		}
		if err != nil {
			return err
		}
		return j.rt.Finalize()
	})
	return initS, ckptS, restartS, err
}

// scaleBlockSize is the block_size of a scale sweep: the bytes per rank
// rounded up to a power of two, 4 KiB to 1 MiB (FTI's default). The L2
// and L3 transfers hold whole blocks, whatever the size of the file, so
// that at 16,384 ranks in one process FTI's 1 MiB would take 32 GiB for
// a few KiB of data per rank.
func scaleBlockSize(size int64) int {
	b := 4 << 10
	for b < 1<<20 && int64(b) < size {
		b <<= 1
	}
	return b
}

// rankJob is one rank's part of a job of the sweep: its meter and its
// runtime once Init has made it.
type rankJob struct {
	m  meter
	rt *ckpt.Runtime
}

func newRankJob(w scaleWorld, c comm.Comm, level int) *rankJob {
	return &rankJob{m: meter{c: c, proc: w.perProcess() || c.Rank() == 0, level: level}}
}

// measure measures op on this rank, with the metadata its runtime decodes.
func (j *rankJob) measure(phase string, op func() error) (share, error) {
	return j.m.measure(phase, func() int64 { d, _ := metadataDecoded(j.rt); return d }, op)
}

// close closes the runtime, if Init made one: it releases meta_dir.
func (j *rankJob) close() {
	if j.rt != nil {
		j.rt.Close()
	}
}

// column returns every rank's i-th share.
func column(all [][]share, i int) []share {
	out := make([]share, len(all))
	for r := range all {
		out[r] = all[r][i]
	}
	return out
}

// measureScale measures every point of a scale sweep: for every size,
// the rank counts in increasing order; a point that needs more memory
// than the machine has to spare, or whose predicted time exceeds
// timeLimit (when positive), is skipped and listed, and so are the
// larger counts of its size.
func measureScale(w scaleWorld, rankCounts []int, sizes []int64, bf *benchFlags, dir string, tick func()) (*scaleResult, error) {
	res := &scaleResult{Kind: "scale", Rows: []scaleRow{}, Skipped: []string{}, LoadStart: loadAvg(), World: w.describe(),
		GroupSize: bf.groupSize, DecodedCounter: hasDecodedCounter(reflect.TypeFor[*ckpt.Runtime]())}
	rankCounts = slices.Sorted(slices.Values(rankCounts))
	avail := memAvailable()
	opsPerPoint := len(bf.levels) * bf.repeats
	for _, size := range sizes {
		var done []point
		var took []time.Duration
		stopped := ""
		for _, ranks := range rankCounts {
			why := stopped
			if why == "" {
				why = skipReason(ranks, size, avail, bf, done, took)
			}
			if why != "" {
				if stopped == "" {
					stopped = fmt.Sprintf("a smaller count of %s per rank was skipped", humanBytes(size))
				}
				res.Skipped = append(res.Skipped, fmt.Sprintf("%d ranks x %s: %s", ranks, humanBytes(size), why))
				for range opsPerPoint {
					tick()
				}
				continue
			}
			sc := scaleConfig{ranks: ranks, size: size, group: bf.groupSize, levels: bf.levels, repeats: bf.repeats, dir: dir, decoded: res.DecodedCounter}
			if bf.storage == storageMemory {
				sc.mem = vfd.NewCore() // each point starts empty
			}
			t0 := time.Now()
			rows, err := scalePoint(w, sc, tick)
			if err != nil {
				return nil, fmt.Errorf("%d ranks x %s: %w", ranks, humanBytes(size), err)
			}
			done, took = append(done, point{ranks, size}), append(took, time.Since(t0))
			res.Rows = append(res.Rows, rows...)
			runtime.GC()
		}
	}
	res.LoadEnd = loadAvg()
	res.Goals = scaleGoals(res.Rows)
	where := "files in " + dir
	if bf.storage == storageMemory {
		where = "files in memory (vfd's in-memory driver)"
	}
	res.Description = fmt.Sprintf("scale sweep: ranks %v, %s per rank, groups of %d, levels %v, %d repeats, %s, %s",
		rankCounts, (*sizesFlag)(&sizes).String(), bf.groupSize, bf.levels, bf.repeats, w.describe(), where)
	return res, nil
}

// skipReason says why the point (ranks, size) is not measured, or "":
// the memory its arrays need, or the time predicted from the points of
// the same size measured before (their growth with the rank count, at
// least linear).
func skipReason(ranks int, size int64, avail int64, bf *benchFlags, done []point, took []time.Duration) string {
	need := 2 * int64(ranks) * size // the protected arrays and those recovered into
	if avail > 0 && float64(need) > bf.maxMemFactor*float64(avail) {
		return fmt.Sprintf("needs %s of memory, %s available", humanBytes(need), humanBytes(avail))
	}
	if bf.timeLimit <= 0 || len(done) == 0 {
		return ""
	}
	n := len(done)
	last, lastN := took[n-1].Seconds(), float64(done[n-1].ranks)
	exp := 1.0
	if n >= 2 && took[n-2] > 0 && done[n-2].ranks < done[n-1].ranks {
		exp = max(1, math.Log(last/took[n-2].Seconds())/math.Log(lastN/float64(done[n-2].ranks)))
	}
	predicted := last * math.Pow(float64(ranks)/lastN, exp)
	if predicted > bf.timeLimit.Seconds() {
		return fmt.Sprintf("predicted to take %.0f s (%d ranks took %.1f s, growing as ranks^%.1f), over --time-limit %s",
			predicted, done[n-1].ranks, last, exp, bf.timeLimit)
	}
	return ""
}

// scalePoint measures one point: every level, repeats times, and returns
// its rows (on the lead process): Init, then per level the checkpoint
// and the restart.
func scalePoint(w scaleWorld, sc scaleConfig, tick func()) ([]scaleRow, error) {
	var inits [][]share
	ckpts, restarts := map[int][][]share{}, map[int][][]share{}
	for rep := range sc.repeats {
		for _, level := range sc.levels {
			run := filepath.Join(sc.dir, fmt.Sprintf("scale-%d-%d-L%d-%d", sc.ranks, sc.size, level, rep))
			is, cs, rs, err := scaleLevel(w, sc, level, run)
			if rmErr := w.once(func() error { return sc.driver().RemoveAll(run) }); err == nil {
				err = rmErr
			}
			if err != nil {
				return nil, fmt.Errorf("level %d: %w", level, err)
			}
			inits = append(inits, is)
			ckpts[level], restarts[level] = append(ckpts[level], cs), append(restarts[level], rs)
			tick()
		}
	}
	if !w.lead() {
		return nil, nil
	}
	rows := []scaleRow{scaleRowOf("init", 0, sc, inits)}
	for _, level := range sc.levels {
		rows = append(rows, scaleRowOf("checkpoint", level, sc, ckpts[level]), scaleRowOf("restart", level, sc, restarts[level]))
	}
	return rows, nil
}

// perRank is a figure over the ranks: its mean and its largest value.
type perRank struct {
	Mean float64 `json:"mean"`
	Max  int64   `json:"max"`
}

// scaleRow is one line of a scale sweep; the JSON names are stable (see
// docs/performance.md, "ftigo bench --sweep-ranks").
type scaleRow struct {
	Case      string `json:"case"`
	Kind      string `json:"kind"`  // "init", "checkpoint" or "restart"
	Level     int    `json:"level"` // 0 for Init
	Ranks     int    `json:"ranks"`
	GroupSize int    `json:"group_size"`
	BytesRank int64  `json:"bytes_per_rank"`
	// Samples is the number of measurements the figures are medians of.
	Samples int `json:"samples"`
	// Wall is rank 0's time from the barrier before to the agreement after.
	Wall stats `json:"wall"`
	// CPURank is the CPU time (user and system) of every process over
	// the operation, divided by the ranks; median over the samples.
	CPURank float64 `json:"cpu_per_rank_s"`
	// the traffic of a rank (comm.CountsOf) over the operation
	MsgsRecv    perRank `json:"messages_received_per_rank"`
	BytesRecv   perRank `json:"bytes_received_per_rank"`
	MsgsSent    perRank `json:"messages_sent_per_rank"`
	BytesSent   perRank `json:"bytes_sent_per_rank"`
	Collectives perRank `json:"collectives_per_rank"`
	// Decoded is the metadata a rank decoded, absent when the engine
	// does not count it.
	Decoded *perRank `json:"metadata_decoded_per_rank,omitempty"`
	// AllocRank is the bytes the processes allocated, divided by the
	// ranks; PeakHeapRank the growth of their heap and stacks at its
	// highest, sampled, over the start of the operation, divided by the
	// ranks. MaxRSS is the largest maximum resident set of a process at
	// the end of the operation (a high-water mark of its whole life).
	AllocRank    float64 `json:"alloc_bytes_per_rank"`
	PeakHeapRank float64 `json:"peak_heap_bytes_per_rank"`
	MaxRSS       int64   `json:"max_rss_bytes"`
	// OpenFiles is the most files a process held open at once, sampled.
	OpenFiles int64 `json:"open_files_peak"`
}

// scaleRowOf summarizes the samples of one operation: each is every
// rank's share of one measurement. Per-rank figures are medians over the
// samples of the mean and of the largest value over the ranks.
func scaleRowOf(kind string, level int, sc scaleConfig, samples [][]share) scaleRow {
	row := scaleRow{Kind: kind, Level: level, Ranks: sc.ranks, GroupSize: sc.group, BytesRank: sc.size, Samples: len(samples)}
	switch kind {
	case "init":
		row.Case = "Init"
	case "restart":
		row.Case = restartCase(level, sc.ranks)
	default:
		row.Case = fmt.Sprintf("L%d %s", level, kind)
	}
	var walls []time.Duration
	var cpu, alloc, peak []float64
	var rss, files []int64
	fig := make([][]perRank, 6)
	for _, ss := range samples {
		walls = append(walls, ss[0].wall)
		var c, a, p float64
		var r, f int64
		for _, s := range ss {
			c, a, p = c+s.cpu.Seconds(), a+float64(s.alloc), p+float64(s.peak)
			r, f = max(r, s.rss), max(f, s.files)
		}
		n := float64(len(ss))
		cpu, alloc, peak = append(cpu, c/n), append(alloc, a/n), append(peak, p/n)
		rss, files = append(rss, r), append(files, f)
		for i, get := range []func(share) int64{
			func(s share) int64 { return s.counts.Received }, func(s share) int64 { return s.counts.BytesReceived },
			func(s share) int64 { return s.counts.Sent }, func(s share) int64 { return s.counts.BytesSent },
			func(s share) int64 { return s.counts.Collectives }, func(s share) int64 { return s.decoded },
		} {
			fig[i] = append(fig[i], over(ss, get))
		}
	}
	row.Wall = summarize(walls)
	row.CPURank, row.AllocRank, row.PeakHeapRank = median(cpu), median(alloc), median(peak)
	row.MaxRSS, row.OpenFiles = int64(median(toFloat(rss))), int64(median(toFloat(files)))
	row.MsgsRecv, row.BytesRecv, row.MsgsSent, row.BytesSent, row.Collectives = medianPerRank(fig[0]), medianPerRank(fig[1]),
		medianPerRank(fig[2]), medianPerRank(fig[3]), medianPerRank(fig[4])
	if sc.decoded {
		d := medianPerRank(fig[5])
		row.Decoded = &d
	}
	return row
}

// over is the mean and the largest of get over every rank's share.
func over(ss []share, get func(share) int64) perRank {
	var sum, hi int64
	for _, s := range ss {
		v := get(s)
		sum, hi = sum+v, max(hi, v)
	}
	return perRank{Mean: float64(sum) / float64(len(ss)), Max: hi}
}

func medianPerRank(ps []perRank) perRank {
	means, maxes := make([]float64, len(ps)), make([]float64, len(ps))
	for i, p := range ps {
		means[i], maxes[i] = p.Mean, float64(p.Max)
	}
	return perRank{Mean: median(means), Max: int64(median(maxes))}
}

// median is the middle of vs (the mean of the two middle ones for an
// even count); 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func toFloat(vs []int64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = float64(v)
	}
	return out
}

// scaleResult is the result of a scale sweep.
type scaleResult struct {
	// Kind is "scale": it tells a saved scale sweep from the results of
	// the other measurements (--from).
	Kind        string      `json:"kind"`
	Rows        []scaleRow  `json:"rows"`
	Goals       []scaleGoal `json:"goals"`
	Description string      `json:"description"`
	World       string      `json:"world"`
	GroupSize   int         `json:"group_size"`
	// DecodedCounter says the engine counted the metadata it decoded.
	DecodedCounter bool       `json:"decoded_counter"`
	LoadStart      [3]float64 `json:"load_start"`
	LoadEnd        [3]float64 `json:"load_end"`
	Skipped        []string   `json:"skipped"`
}

// scaleGoal is the goal check of one operation at one size: its per-rank
// figures at the largest rank count measured over those at the smallest.
type scaleGoal struct {
	Case      string `json:"case"`
	Kind      string `json:"kind"`
	Level     int    `json:"level"`
	BytesRank int64  `json:"bytes_per_rank"`
	From      int    `json:"ranks_from"`
	To        int    `json:"ranks_to"`
	// the goal's figures: CPU and bytes received per rank (means)
	CPU   float64 `json:"cpu_per_rank_ratio"`
	Bytes float64 `json:"bytes_received_per_rank_ratio"`
	// for information: messages received (mean), bytes received by the
	// rank that received most, metadata decoded (mean; absent without
	// the counter)
	Msgs     float64  `json:"messages_received_per_rank_ratio"`
	BytesMax float64  `json:"bytes_received_max_ratio"`
	Decoded  *float64 `json:"metadata_decoded_per_rank_ratio,omitempty"`
	Goal     float64  `json:"goal"`
	Pass     bool     `json:"pass"`
}

// Goals of issue 28: at the largest count, a checkpoint's and a
// restart's CPU and bytes received per rank at most 1.5 times those at
// the smallest, Init's at most twice.
const (
	goalCkptRestart = 1.5
	goalInit        = 2.0
)

// ratio is b over a; 1 when both are zero, and -1 (undefined: shown
// "inf", never a pass) when only a is.
func ratio(a, b float64) float64 {
	switch {
	case a == 0 && b == 0:
		return 1
	case a == 0:
		return -1
	}
	return b / a
}

// within says whether ratio r is defined and at most goal.
func within(r, goal float64) bool { return r >= 0 && r <= goal }

// scaleGoals compares, per operation and size, the rows at the largest
// and at the smallest rank count (where both exist and differ).
func scaleGoals(rows []scaleRow) []scaleGoal {
	type key struct {
		kind  string
		level int
		size  int64
	}
	lo, hi := map[key]scaleRow{}, map[key]scaleRow{}
	var keys []key
	for _, r := range rows {
		k := key{r.Kind, r.Level, r.BytesRank}
		if _, ok := lo[k]; !ok {
			keys = append(keys, k)
			lo[k], hi[k] = r, r
		}
		if r.Ranks < lo[k].Ranks {
			lo[k] = r
		}
		if r.Ranks > hi[k].Ranks {
			hi[k] = r
		}
	}
	out := []scaleGoal{}
	for _, k := range keys {
		a, b := lo[k], hi[k]
		if a.Ranks == b.Ranks {
			continue
		}
		g := scaleGoal{Case: a.Case, Kind: k.kind, Level: k.level, BytesRank: k.size, From: a.Ranks, To: b.Ranks,
			CPU: ratio(a.CPURank, b.CPURank), Bytes: ratio(a.BytesRecv.Mean, b.BytesRecv.Mean),
			Msgs: ratio(a.MsgsRecv.Mean, b.MsgsRecv.Mean), BytesMax: ratio(float64(a.BytesRecv.Max), float64(b.BytesRecv.Max)),
			Goal: goalCkptRestart}
		if k.kind == "restart" {
			g.Case = fmt.Sprintf("L%d restart", k.level) // the lost nodes are the same at every count
		}
		if k.kind == "init" {
			g.Goal = goalInit
		}
		if a.Decoded != nil && b.Decoded != nil {
			d := ratio(a.Decoded.Mean, b.Decoded.Mean)
			g.Decoded = &d
		}
		g.Pass = within(g.CPU, g.Goal) && within(g.Bytes, g.Goal)
		out = append(out, g)
	}
	return out
}
