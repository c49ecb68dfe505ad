package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procMeter measures this process over one operation: its time, CPU,
// allocations, peak heap and stacks, and the most files it held open.
// A goroutine samples the heap every couple of milliseconds and the open
// files every 20 ms, without allocating.
type procMeter struct {
	t0     time.Time
	cpu0   cpuTimes
	alloc0 int64
	base   int64

	mu          sync.Mutex
	peak, files int64
	done        chan struct{}
	wg          sync.WaitGroup
}

// memNow returns the bytes of live and not yet collected heap objects
// plus goroutine stacks, and the bytes allocated since the process
// started; s is the reader's own sample buffer (metrics.Read fills it).
func memNow(s []metrics.Sample) (inUse, allocs int64) {
	metrics.Read(s)
	val := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	return val(0) + val(1), val(2)
}

func memSamples() []metrics.Sample {
	return []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
}

func startProcMeter() *procMeter {
	p := &procMeter{done: make(chan struct{})}
	s := memSamples()
	p.base, p.alloc0 = memNow(s)
	p.peak = p.base
	p.t0, p.cpu0 = time.Now(), processCPU()
	p.wg.Add(1)
	go p.sample(s)
	return p
}

func (p *procMeter) sample(s []metrics.Sample) {
	defer p.wg.Done()
	fc := newFileCounter()
	tk := time.NewTicker(2 * time.Millisecond)
	defer tk.Stop()
	for i := 0; ; i++ {
		inUse, _ := memNow(s)
		var files int64 = -1
		if i%10 == 0 {
			files = fc.count()
		}
		p.mu.Lock()
		p.peak, p.files = max(p.peak, inUse), max(p.files, files)
		p.mu.Unlock()
		select {
		case <-p.done:
			return
		case <-tk.C:
		}
	}
}

// stop ends the measurement and writes its figures into s.
func (p *procMeter) stop(s *share) {
	s.wall, s.cpu = time.Since(p.t0), processCPU().sub(p.cpu0).total()
	close(p.done)
	p.wg.Wait()
	inUse, allocs := memNow(memSamples())
	p.peak = max(p.peak, inUse)
	s.alloc, s.peak, s.files = allocs-p.alloc0, p.peak-p.base, max(p.files, 0)
	s.rss = maxRSS()
}

// maxRSS is the process's largest resident set so far, in bytes.
func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Maxrss) << 10 // KiB on Linux
}

// filesPerRank is how many files a rank of the in-process world may hold
// open at once, with room to spare, in a checkpoint or a restart of the
// scale sweep; fileMargin covers the rest of the process.
const (
	filesPerRank = 4
	fileMargin   = 1024
)

// prepareProcess makes room in this process for ranks goroutine ranks:
// Go's limit on OS threads (every rank may be blocked in a system call at
// once) and, when the ranks' files are real files (files), the limit on
// open files (RLIMIT_NOFILE), raised as far as this user may (root with
// CAP_SYS_RESOURCE may raise the hard limit up to fs.nr_open). When the
// files may not fit, it returns a note saying so and what to do.
func prepareProcess(ranks int, files bool) (note string) {
	if threads := 2*ranks + 1000; threads > 10000 {
		debug.SetMaxThreads(threads)
	}
	if !files {
		return ""
	}
	need := uint64(filesPerRank*ranks + fileMargin)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= need {
		return ""
	}
	want := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
		return ""
	}
	if lim.Max > lim.Cur {
		want = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	return fmt.Sprintf("%d in-process ranks may hold up to %d files open at once (%d a rank, %d for the rest); "+
		"the open files limit is %d (hard limit %d) and this user cannot raise it: if a point fails with %q, "+
		"raise the hard limit (ulimit -Hn %d as root, nofile in limits.conf) or keep the files in memory (--storage memory)",
		ranks, need, filesPerRank, fileMargin, lim.Cur, lim.Max, syscall.EMFILE.Error(), need)
}

// openFilesHint adds to err, when it is the open files limit, what to do.
func openFilesHint(err error) error {
	if err == nil || !errorsIsEMFILE(err) {
		return err
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return fmt.Errorf("%w (the open files limit is %d: raise it with ulimit -n, keep the files in memory with --storage memory, or measure fewer ranks)", err, lim.Cur)
}

// errorsIsEMFILE says whether err is running out of file descriptors,
// also when an agreement between ranks carried it as text.
func errorsIsEMFILE(err error) bool {
	return errors.Is(err, syscall.EMFILE) || strings.Contains(err.Error(), syscall.EMFILE.Error())
}
