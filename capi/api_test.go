package main

// In-process tests of the C API's logic: the library type behind every
// FTI_* entry point, driven over goroutine ranks with Go memory standing
// in for C memory (the cgo layer adds only argument conversion).

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// syncBuffer is a log sink shared by the ranks of a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// goAllocator stands in for C's realloc over Go memory that the test
// keeps alive.
type goAllocator struct {
	mu    sync.Mutex
	alive [][]byte
}

func (a *goAllocator) realloc(p unsafe.Pointer, n uintptr) unsafe.Pointer {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := make([]byte, n)
	for _, old := range a.alive {
		if len(old) > 0 && unsafe.Pointer(&old[0]) == p {
			copy(b, old)
		}
	}
	a.alive = append(a.alive, b)
	return unsafe.Pointer(&b[0])
}

// session runs fn on n in-process ranks, each with its own library
// initialised from cfgPath.
func session(t *testing.T, n int, cfgPath string, log *syncBuffer, alloc *goAllocator, fn func(l *library, c comm.Comm) error) {
	t.Helper()
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		l := newLibrary(log, log, lp64)
		l.realloc = alloc.realloc
		if rc := l.init(cfgPath, c); rc != codeSuccess {
			return fmt.Errorf("rank %d: init returned %d", c.Rank(), rc)
		}
		defer func() { endRuntime(l.rt) }()
		return fn(l, c)
	}))
}

func testConfig(t *testing.T, dir string, groupSize int, extra string) string {
	t.Helper()
	p := filepath.Join(dir, "config.fti")
	cfg := fmt.Sprintf("[basic]\nnode_size = 1\ngroup_size = %d\nckpt_dir = %s\nglbl_dir = %s\nmeta_dir = %s\nverbosity = 1\n%s\n[advanced]\nlocal_test = 1\nblock_size = 16\n",
		groupSize, filepath.Join(dir, "l"), filepath.Join(dir, "g"), filepath.Join(dir, "m"), extra)
	require.NoError(t, os.WriteFile(p, []byte(cfg), 0o644))
	return p
}

func ptr[T any](s []T) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }

func TestMapLevel(t *testing.T) {
	for _, tc := range []struct {
		in, out int
		ok      bool
		msg     string
	}{
		{1, 1, true, ""}, {2, 2, true, ""}, {3, 3, true, ""}, {4, 4, true, ""},
		{5, 1, true, "setting to level 1"}, {6, 2, true, "setting to level 2"}, {7, 3, true, "setting to level 3"},
		{8, 8, true, ""}, {9, 9, true, ""},
		{0, 0, false, "Invalid level id 0"}, {-3, 0, false, "Invalid level id -3"}, {10, 0, false, "Invalid level id 10"},
	} {
		out, msg, ok := mapLevel(tc.in)
		assert.Equal(t, tc.out, out, "level %d", tc.in)
		assert.Equal(t, tc.ok, ok, "level %d", tc.in)
		if tc.msg == "" {
			assert.Empty(t, msg)
		} else {
			assert.Contains(t, msg, tc.msg)
		}
	}
}

func TestTypeTable(t *testing.T) {
	tt := newTypeTable(lp64)
	want := []struct {
		size int
		elem fileformat.ElemType
	}{
		{1, fileformat.Int8}, {2, fileformat.Int16}, {4, fileformat.Int32}, {8, fileformat.Int64},
		{1, fileformat.Uint8}, {2, fileformat.Uint16}, {4, fileformat.Uint32}, {8, fileformat.Uint64},
		{4, fileformat.Float32}, {8, fileformat.Float64}, {16, fileformat.Struct},
	}
	for id, w := range want {
		ct, err := tt.get(id)
		require.NoError(t, err)
		assert.Equal(t, w.size, ct.size, basicNames[id])
		assert.Equal(t, w.elem, ct.elem, basicNames[id])
	}
	// A 32-bit long is recorded as int32.
	ilp32 := newTypeTable(cSizes{Short: 2, Int: 4, Long: 4, LongDouble: 12})
	ct, _ := ilp32.get(typeLong)
	assert.Equal(t, fileformat.Int32, ct.elem)
	ct, _ = ilp32.get(typeLongDouble)
	assert.Equal(t, 12, ct.size)

	comp, err := tt.add("particle", 32, true)
	require.NoError(t, err)
	assert.Equal(t, numBasicTypes, comp.id)
	opaque, err := tt.add("", 24, false)
	require.NoError(t, err)
	assert.Equal(t, "Type12", opaque.name)
	for _, tc := range []struct {
		name   string
		id     int
		ft     int
		offset int64
		dims   []int64
		ok     bool
	}{
		{"x", comp.id, typeDouble, 0, []int64{3}, true},
		{"id", comp.id, typeInt, 24, nil, true},
		{"", comp.id, typeChar, 28, nil, true},
		{"tail", comp.id, typeInt, 29, nil, false}, // 29+4 > 32
		{"neg", comp.id, typeInt, -1, nil, false},  // negative offset
		{"m", comp.id, typeShort, 0, []int64{2, 2}, true},
		{"z", comp.id, typeShort, 0, []int64{2, 0}, false},
		{"deep", comp.id, typeChar, 0, make([]int64, 33), false},
		{"none", comp.id, typeChar, 0, []int64{}, false},
		{"f", opaque.id, typeInt, 0, nil, false},  // not composite
		{"f", typeDouble, typeInt, 0, nil, false}, // basic
		{"f", 99, typeInt, 0, nil, false},         // no such type
		{"f", comp.id, 99, 0, nil, false},         // no such field type
	} {
		err := tt.addField(tc.id, tc.name, tc.ft, tc.offset, tc.dims)
		if tc.ok {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorIs(t, err, errType, "%s on %d", tc.name, tc.id)
		}
	}
	assert.Equal(t, "T2", comp.fields[2].name, "unnamed fields are T<index>, as in FTI")
	for range maxTypes - len(tt.types) {
		_, err := tt.add("", 1, false)
		require.NoError(t, err)
	}
	_, err = tt.add("", 1, false)
	assert.ErrorIs(t, err, errType, "at most 64 types")
	_, err = newTypeTable(lp64).add("", 0, false)
	assert.ErrorIs(t, err, errType)
}

// TestPrintPriorities: FTI_Print's priorities map onto the shared FTI
// logger (ckpt.NewFTILogger): information from rank 0 only, warnings and
// errors on stderr from every rank, nothing for an unknown priority.
func TestPrintPriorities(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, rank := range []int{0, 1} {
		l := ckpt.NewFTILogger(1, &out, &errOut).With(zap.Int("rank", rank))
		printAt(l, prioDebug, "dbg")
		printAt(l, prioInfo, "info")
		printAt(l, prioDCP, "dcp")
		printAt(l, prioWarn, "warn")
		printAt(l, prioError, "err")
		printAt(l, 42, "unknown priority")
	}
	assert.Equal(t, "[FTI Debug - 000000] : dbg\n[ FTI  Information ] : info\n[ FTI  Information ] : dcp\n[FTI Debug - 000001] : dbg\n", out.String())
	assert.Equal(t, "[ FTI Warning 000000 ] : warn\n[ FTI Error - 000000 ] : err\n[ FTI Warning 000001 ] : warn\n[ FTI Error - 000001 ] : err\n", errOut.String())
	out.Reset()
	q := ckpt.NewFTILogger(4, &out, &out)
	printAt(q, prioWarn, "quiet")
	assert.Empty(t, out.String(), "verbosity 4 prints errors only")
}

// TestLifecycleInProcess drives a whole session over in-process ranks:
// protect, checkpoint, a restart that recovers by name with a grown
// variable reallocated, and the codes of the calls around it.
func TestLifecycleInProcess(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 2, "")
	log := &syncBuffer{}
	alloc := &goAllocator{}
	const n = 2
	session(t, n, cfg, log, alloc, func(l *library, c comm.Comm) error {
		r := c.Rank()
		counts := make([]int32, 5+r)
		for i := range counts {
			counts[i] = int32(100*r + i)
		}
		grid := []float64{1.5, 2.5, float64(r)}
		id := l.setIDFromString("counts", false)
		errs := []error{
			expect("setID", id, 0),
			expect("protect counts", l.protect(id, ptr(counts), int64(len(counts)), typeInt), codeSuccess),
			expect("protect grid", l.protect(3, ptr(grid), 3, typeDouble), codeSuccess),
			expect("checkpoint L2", l.checkpoint(1, 2), codeCheckpoint),
			expect("stored size", int(l.storedSize(id)), 4*len(counts)),
			expect("status", l.statusCode(), 0),
			expect("realloc fresh", boolCode(l.reallocVar(id, ptr(counts)) == ptr(counts)), 1),
		}
		return errors.Join(errs...)
	})
	session(t, n, cfg, log, alloc, func(l *library, c comm.Comm) error {
		r := c.Rank()
		id := l.getIDFromString("counts", false)
		one := unsafe.Slice((*int32)(alloc.realloc(nil, 4)), 1) // C's malloc
		one[0] = -7
		grid := make([]float64, 3)
		errs := []error{
			expect("status", l.statusCode(), 1),
			expect("getID", id, 0),
			expect("getID unknown", l.getIDFromString("nope", false), -1),
			expect("stored size before protect", int(l.storedSize(0)), 4*(5+r)),
			expect("protect one", l.protect(0, ptr(one), 1, typeInt), codeSuccess),
			expect("protect grid", l.protect(3, ptr(grid), 3, typeDouble), codeSuccess),
			expect("recover size mismatch", l.recover("FTI_Recover"), codeNoRecovery),
			expect("untouched", int(one[0]), -7),
		}
		p := l.reallocVar(0, ptr(one))
		counts := unsafe.Slice((*int32)(p), 5+r)
		errs = append(errs,
			expect("realloc moved", boolCode(p != ptr(one)), 1),
			expect("realloc kept data", int(counts[0]), -7),
			expect("snapshot recovers", l.snapshot(), codeSuccess),
			expect("status after", l.statusCode(), 0),
			expect("counts", int(counts[4+r]), 100*r+4+r),
			expect("grid", int(grid[2]), r),
			expect("checkpoint", l.checkpoint(2, 1), codeCheckpoint),
			expect("finalize", l.finalize(), codeSuccess),
			expect("finalize twice", l.finalize(), codeFailure),
			expect("protect after finalize", l.protect(0, ptr(one), 1, typeInt), codeFailure),
		)
		return errors.Join(errs...)
	})
	assert.Contains(t, log.String(), "Cannot recover ")
	assert.Contains(t, log.String(), "FTI_Protect: FTI is finalized")
	assert.Contains(t, log.String(), "Variable ID 3 to protect (3 x FTI_DBLE)")
}

// TestReallocOtherPointer: FTI_Realloc reallocates the pointer it is
// given, even when another one was protected, and re-protects the result.
func TestReallocOtherPointer(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 1, "")
	log := &syncBuffer{}
	alloc := &goAllocator{}
	session(t, 1, cfg, log, alloc, func(l *library, c comm.Comm) error {
		x := []float64{1, 2, 3, 4}
		return errors.Join(
			expect("protect", l.protect(0, ptr(x), 4, typeDouble), codeSuccess),
			expect("checkpoint", l.checkpoint(1, 1), codeCheckpoint))
	})
	session(t, 1, cfg, log, alloc, func(l *library, c comm.Comm) error {
		protected := make([]float64, 4)
		other := alloc.realloc(nil, 8) // C's malloc of one double
		if rc := l.protect(0, ptr(protected), 4, typeDouble); rc != codeSuccess {
			return fmt.Errorf("protect: %d", rc)
		}
		p := l.reallocVar(0, other)
		if p == other || p == ptr(protected) {
			return errors.New("realloc did not reallocate the given pointer")
		}
		if err := expect("recover", l.recover("FTI_Recover"), codeSuccess); err != nil {
			return err
		}
		got := unsafe.Slice((*float64)(p), 4)
		if got[3] != 4 || protected[3] != 0 {
			return fmt.Errorf("recovered into %v, the old memory holds %v", got, protected)
		}
		return nil
	})
}

// TestUnrecoverableInit: a restart whose checkpoint is gone on every
// copy leaves the session failed (FTI_NREC), refusing everything without
// deleting anything, until FTI_Finalize releases it.
func TestUnrecoverableInit(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 1, "")
	log := &syncBuffer{}
	alloc := &goAllocator{}
	session(t, 2, cfg, log, alloc, func(l *library, c comm.Comm) error {
		x := []int64{int64(c.Rank())}
		return errors.Join(
			expect("protect", l.protect(0, ptr(x), 1, typeLong), codeSuccess),
			expect("checkpoint", l.checkpoint(1, 1), codeCheckpoint))
	})
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "l", "node0001")))
	require.NoError(t, comm.Run(2, func(c comm.Comm) error {
		l := newLibrary(log, log, lp64)
		x := []int64{9}
		return errors.Join(
			expect("init", l.init(cfg, c), codeNoRecovery),
			expect("init again", l.init(cfg, c), codeFailure),
			expect("protect", l.protect(0, ptr(x), 1, typeLong), codeFailure),
			expect("checkpoint", l.checkpoint(2, 1), codeFailure),
			expect("recover", l.recover("FTI_Recover"), codeNoRecovery),
			expect("status", l.statusCode(), 0),
			expect("finalize", l.finalize(), codeFailure),
			expect("state", int(l.state), int(stateNone)))
	}))
	assert.Contains(t, log.String(), "no checkpoint can be recovered on every rank")
	_, err := os.Stat(filepath.Join(dir, "l", "node0000"))
	assert.NoError(t, err, "nothing deleted")
}

// TestNamesAcrossRestart: FTI_setIDFromString allocates ids that do not
// collide with protected, reserved or stored ones, and a restart finds
// the stored names.
func TestNamesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 1, "")
	log := &syncBuffer{}
	alloc := &goAllocator{}
	session(t, 1, cfg, log, alloc, func(l *library, c comm.Comm) error {
		a, b := []byte("a"), []byte("b")
		return errors.Join(
			expect("protect 0", l.protect(0, ptr(a), 1, typeChar), codeSuccess),
			expect("setID rho", l.setIDFromString("rho", false), 1),
			expect("setID rho again", l.setIDFromString("rho", false), 1),
			expect("protect rho", l.protect(1, ptr(b), 1, typeChar), codeSuccess),
			expect("name a protected id", l.setIDFromString("u", false), 2),
			expect("null", l.setIDFromString("", true), codeFailure),
			expect("long", l.setIDFromString(strings.Repeat("x", 256), false), codeFailure),
			expect("checkpoint", l.checkpoint(1, 1), codeCheckpoint))
	})
	session(t, 1, cfg, log, alloc, func(l *library, c comm.Comm) error {
		return errors.Join(
			expect("stored name", l.getIDFromString("rho", false), 1),
			expect("reserved but never protected", l.getIDFromString("u", false), -1),
			expect("new name skips stored ids", l.setIDFromString("v", false), 2))
	})
}

// endRuntime ends a runtime left without Finalize, as a killed job's:
// through Close where the runtime has it (it then also releases what it
// holds, such as a lock on meta_dir), else by waiting for its background
// work.
func endRuntime(rt *ckpt.Runtime) {
	if rt == nil {
		return
	}
	if c, ok := any(rt).(interface{ Close() error }); ok {
		c.Close()
		return
	}
	rt.Wait()
}

func expect(what string, got, want int) error {
	if got != want {
		return fmt.Errorf("%s: got %d, want %d", what, got, want)
	}
	return nil
}

func boolCode(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRestartStatuses: FTI_Status is 2 after a clean end with
// keep_last_ckpt, and a checkpoint taken before FTI_Recover on a restart
// supersedes the restart data, so FTI_Snapshot goes on checkpointing.
func TestRestartStatuses(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 1, "keep_last_ckpt = 1")
	log := &syncBuffer{}
	alloc := &goAllocator{}
	x := make([][]float64, 2)
	for r := range x {
		x[r] = []float64{float64(r), 2}
	}
	first := func(l *library, c comm.Comm) error {
		return errors.Join(
			expect("protect", l.protect(0, ptr(x[c.Rank()]), 2, typeDouble), codeSuccess),
			expect("checkpoint", l.checkpoint(1, 1), codeCheckpoint),
			expect("finalize", l.finalize(), codeSuccess))
	}
	session(t, 2, cfg, log, alloc, first)
	session(t, 2, cfg, log, alloc, func(l *library, c comm.Comm) error {
		y := make([]float64, 2)
		err := errors.Join(
			expect("status kept", l.statusCode(), 2),
			expect("protect", l.protect(0, ptr(y), 2, typeDouble), codeSuccess),
			expect("checkpoint before recover", l.checkpoint(2, 1), codeCheckpoint),
			expect("status", l.statusCode(), 0),
			expect("snapshot", l.snapshot(), codeSuccess))
		if y[1] != 0 {
			err = errors.Join(err, fmt.Errorf("y = %v: nothing may be recovered over a variable checkpointed since", y))
		}
		return err
	})
}

// TestConfigKeysAsFTI: head = 1 needs node_size >= 2 (refused on every
// rank otherwise); without local_test, ranks are grouped into nodes by
// host name as FTI does, so node_size must match the ranks per host.
func TestConfigKeysAsFTI(t *testing.T) {
	dir := t.TempDir()
	log := &syncBuffer{}
	alloc := &goAllocator{}
	cfg := testConfig(t, dir, 1, "head = 1")
	require.NoError(t, comm.Run(2, func(c comm.Comm) error {
		l := newLibrary(log, log, lp64)
		return expect("init with head = 1 and node_size 1", l.init(cfg, c), codeFailure)
	}))
	assert.Contains(t, log.String(), "head = 1 with node_size 1")

	host := filepath.Join(dir, "host.fti")
	write := func(nodeSize int) {
		body := fmt.Sprintf("[basic]\nnode_size = %d\ngroup_size = 1\nckpt_dir = %s\nglbl_dir = %s\nmeta_dir = %s\n[advanced]\nlocal_test = 0\n",
			nodeSize, filepath.Join(dir, "hl"), filepath.Join(dir, "hg"), filepath.Join(dir, "hm"))
		require.NoError(t, os.WriteFile(host, []byte(body), 0o644))
	}
	write(2) // both in-process ranks run on this host: one node of 2
	session(t, 2, host, log, alloc, func(l *library, c comm.Comm) error {
		conf := l.getConfig()
		var runErr error
		if _, err := os.Stat(l.cfg.GlobalDir(conf.run)); conf.run == "" || conf.run != l.rt.Run() || err != nil {
			runErr = fmt.Errorf("FTI_GetConfig's run id %q: want the run %q naming glbl_dir's run directory", conf.run, l.rt.Run())
		}
		return errors.Join(runErr, expect("nodes", conf.nbNodes, 1), expect("node size", conf.nodeSize, 2),
			expect("finalize", l.finalize(), codeSuccess))
	})
	write(1) // 2 ranks on one host but node_size 1: refused everywhere
	require.NoError(t, comm.Run(2, func(c comm.Comm) error {
		l := newLibrary(log, log, lp64)
		return expect("init", l.init(host, c), codeFailure)
	}))
	assert.Contains(t, log.String(), "node_size")
}

// TestLevelsAgreed: a bad level on one rank, or levels that differ,
// fail on every rank without leaving any waiting; then the ranks go on.
func TestLevelsAgreed(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 2, "")
	log := &syncBuffer{}
	session(t, 2, cfg, log, &goAllocator{}, func(l *library, c comm.Comm) error {
		x := []float64{1}
		pick := func(a, b int) int {
			if c.Rank() == 0 {
				return a
			}
			return b
		}
		return errors.Join(
			expect("protect", l.protect(0, ptr(x), 1, typeDouble), codeSuccess),
			expect("1 and 9", l.checkpoint(1, pick(1, 9)), codeFailure),
			expect("1 and 2", l.checkpoint(1, pick(1, 2)), codeFailure),
			expect("0 and 0", l.checkpoint(1, 0), codeFailure),
			expect("ids differ", l.checkpoint(pick(1, 2), 1), codeFailure),
			expect("5 and 1: both L1", l.checkpoint(1, pick(5, 1)), codeCheckpoint),
			expect("then L2", l.checkpoint(2, 2), codeCheckpoint),
			expect("9 without h5_single_file_enable", l.checkpoint(3, 9), codeFailure))
	})
	assert.Contains(t, log.String(), "ranks passed different ids or levels (here id 1, level 9)")
	// The runtime logs a failed checkpoint once, on rank 0, with its error.
	assert.Equal(t, 1, strings.Count(log.String(), "[ FTI Error - 000000 ] : Ckpt. ID 3 (level 9) failed (ckpt-id=3, ckpt-level=9, "+
		"error=ckpt: checkpoint level 9 (FTI_L4_H5_SINGLE): level not available: set h5_single_file_enable = 1)\n"), log.String())
}

// TestCheckpointL4DCP: FTI_Checkpoint(id, FTI_L4_DCP) takes a differential
// L4 checkpoint with enable_dcp (FTI's dCP share line in the log), and a
// whole one with FTI's warning without it; both restore.
func TestCheckpointL4DCP(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("enable_dcp=%v", on), func(t *testing.T) {
			dir := t.TempDir()
			extra := "enable_dcp = 0"
			if on {
				extra = "enable_dcp = 1\ndcp_block_size = 512"
			}
			cfg := testConfig(t, dir, 2, extra)
			log := &syncBuffer{}
			session(t, 2, cfg, log, &goAllocator{}, func(l *library, c comm.Comm) error {
				x := make([]float64, 1024)
				for i := range x {
					x[i] = float64(i + c.Rank())
				}
				if err := errors.Join(
					expect("protect", l.protect(0, ptr(x), int64(len(x)), typeDouble), codeSuccess),
					expect("L4", l.checkpoint(1, 4), codeCheckpoint)); err != nil {
					return err
				}
				x[0] = -1 // one 512-byte block of 16 changes
				return expect("L4 dCP", l.checkpoint(2, 8), codeCheckpoint)
			})
			if on {
				assert.Contains(t, log.String(), "dCP share: 6.25%")
			} else {
				assert.Contains(t, log.String(), "dCP is disabled")
			}
			session(t, 2, cfg, log, &goAllocator{}, func(l *library, c comm.Comm) error {
				x := make([]float64, 1024)
				if err := errors.Join(
					expect("protect", l.protect(0, ptr(x), int64(len(x)), typeDouble), codeSuccess),
					expect("recover", l.recover("FTI_Recover"), codeSuccess)); err != nil {
					return err
				}
				for i := range x {
					want := float64(i + c.Rank())
					if i == 0 {
						want = -1
					}
					if x[i] != want {
						return fmt.Errorf("rank %d: x[%d] = %v, want %v", c.Rank(), i, x[i], want)
					}
				}
				return nil
			})
		})
	}
}

// TestGlobalDatasetsInProcess drives the dataset entry points over
// in-process ranks: 3 ranks checkpoint a global dataset at L1; 2 ranks
// restart from it (status 1), find the variable by name, learn the shape
// with FTI_RecoverDatasetDimension, take a level-9 checkpoint that leaves
// the restart pending, recover every element and take another level-9
// checkpoint; 3 ranks restart from that file (status 3).
func TestGlobalDatasetsInProcess(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 1, "h5_single_file_enable = 1")
	log := &syncBuffer{}
	const n = 10
	value := func(i int64) float64 { return float64(i)*1.5 - 3 }
	part := func(c comm.Comm) (int64, int64) {
		first := int64(n * c.Rank() / c.Size())
		return first, int64(n*(c.Rank()+1)/c.Size()) - first
	}
	// declare defines the dataset; on a restart (shape 1) with the shape
	// the checkpoint recorded.
	declare := func(l *library, c comm.Comm, x []float64, shape int64) error {
		first, cnt := part(c)
		g, full := l.initGroup("g", false, -1)
		errs := []error{
			expect("initGroup", g, 1), expect("fullName", boolCode(full == "/g"), 1),
			expect("protect", l.protect(0, ptr(x), cnt, typeDouble), codeSuccess),
			expect("define", l.defineGlobalDataset(7, []int64{shape}, "x", false, g, typeDouble), codeSuccess),
		}
		if shape == 1 {
			errs = append(errs, expect("dimension", l.recoverDatasetDimension(7), codeSuccess))
		}
		errs = append(errs, expect("subset", l.addSubset(0, 1, []int64{first}, []int64{cnt}, 7, false), codeSuccess))
		return errors.Join(errs...)
	}
	check := func(c comm.Comm, x []float64) error {
		first, _ := part(c)
		for i, v := range x {
			if v != value(first+int64(i)) {
				return fmt.Errorf("rank %d element %d: %v, want %v", c.Rank(), first+int64(i), v, value(first+int64(i)))
			}
		}
		return nil
	}
	session(t, 3, cfg, log, &goAllocator{}, func(l *library, c comm.Comm) error {
		first, cnt := part(c)
		x := make([]float64, cnt)
		for i := range x {
			x[i] = value(first + int64(i))
		}
		return errors.Join(
			expect("name", l.setIDFromString("field", false), 0),
			declare(l, c, x, n),
			expect("rank", l.datasetRank(7), 1),
			expect("L1", l.checkpoint(1, 1), codeCheckpoint))
	})
	// A restart that declares another shape fails on every rank and keeps
	// the restart data.
	session(t, 2, cfg, log, &goAllocator{}, func(l *library, c comm.Comm) error {
		x := make([]float64, 6)
		return errors.Join(
			expect("a new name skips the stored ids", l.setIDFromString("fresh", false), 1),
			expect("protect", l.protect(0, ptr(x), 6, typeDouble), codeSuccess),
			expect("define 2-D", l.defineGlobalDataset(7, []int64{1, 1}, "g/x", false, -1, typeDouble), codeSuccess),
			expect("dimension/rank mismatch", l.recoverDatasetDimension(7), codeFailure),
			expect("update to 12", l.updateGlobalDataset(7, []int64{12}), codeSuccess),
			expect("subset", l.addSubset(0, 1, []int64{int64(6 * c.Rank())}, []int64{6}, 7, false), codeSuccess),
			expect("recover/shape differs", l.recover("FTI_Recover"), codeNoRecovery),
			expect("status kept", l.statusCode(), 1))
	})
	session(t, 2, cfg, log, &goAllocator{}, func(l *library, c comm.Comm) error {
		_, cnt := part(c)
		x := make([]float64, cnt)
		errs := []error{
			expect("status", l.statusCode(), 1),
			expect("name after reshape", l.getIDFromString("field", false), 0),
			declare(l, c, x, 1),
			expect("span", boolCode(slices.Equal(l.datasetSpan(7, 1), []int64{n})), 1),
			expect("dimension/unknown", l.recoverDatasetDimension(99), codeFailure),
			expect("recoverVar/not protected", l.recoverVar(5), codeNoRecovery),
			expect("level 9", l.checkpoint(2, 9), codeCheckpoint),
			expect("status after level 9", l.statusCode(), 1),
			expect("recover", l.recover("FTI_Recover"), codeSuccess),
			expect("status after recover", l.statusCode(), 0),
			expect("dimension/recovered", l.recoverDatasetDimension(7), codeFailure),
			expect("level 9 of the recovered data", l.checkpoint(3, 9), codeCheckpoint),
		}
		return errors.Join(append(errs, check(c, x))...)
	})
	session(t, 3, cfg, log, &goAllocator{}, func(l *library, c comm.Comm) error {
		_, cnt := part(c)
		x := make([]float64, cnt)
		return errors.Join(
			expect("status", l.statusCode(), 3),
			declare(l, c, x, n),
			expect("recoverVar", l.recoverVar(0), codeSuccess),
			check(c, x))
	})
	assert.Contains(t, log.String(), "written by 3 ranks, redistributed on 2")
	assert.Contains(t, log.String(), "FTI_RecoverVar: variable 5 not recovered")
	assert.Contains(t, log.String(), `FTI_RecoverDatasetDimension: Rank mismatch: dataset 7 "g/x" has rank 2 here, rank 1 (shape [10]) in checkpoint`)
	assert.Contains(t, log.String(), "definition differs from the checkpoint")
}

// TestGroupsAndNamesInProcess: groups give datasets their paths and are
// renamed only while no dataset lives in them; FTI_DefineDataset checks
// a shape against the count and names the variable, as FTI_SetAttribute
// does; a dimension attribute is refused without changing anything.
func TestGroupsAndNamesInProcess(t *testing.T) {
	dir := t.TempDir()
	log := &syncBuffer{}
	session(t, 1, testConfig(t, dir, 1, ""), log, &goAllocator{}, func(l *library, c comm.Comm) error {
		x := make([]float64, 6)
		a, fullA := l.initGroup("a", false, -1)
		b, fullB := l.initGroup("b", false, a)
		dup, _ := l.initGroup("b", false, a)
		rc, fullB2 := l.renameGroup(b, "c", false)
		rootRC, _ := l.renameGroup(rootGroup, "x", false)
		errs := []error{
			expect("a", a, 1), expect("b", b, 2), expect("dup", dup, codeFailure),
			expect("fullA", boolCode(fullA == "/a"), 1), expect("fullB", boolCode(fullB == "/a/b"), 1),
			expect("rename", rc, codeSuccess), expect("renamed", boolCode(fullB2 == "/a/c"), 1),
			expect("rename root", rootRC, codeFailure),
			expect("protect", l.protect(3, ptr(x), 6, typeDouble), codeSuccess),
			expect("define", l.defineGlobalDataset(1, []int64{6}, "u", false, b, typeDouble), codeSuccess),
			expect("dataset path", boolCode(func() bool { d, _ := l.rt.GlobalDataset(1); return d.Name == "a/c/u" }()), 1),
		}
		rc, _ = l.renameGroup(a, "z", false)
		errs = append(errs,
			expect("rename a parent of a dataset", rc, codeFailure),
			expect("defineDataset/count", l.defineDataset(3, []int64{4, 2}, "v", false, -1), codeFailure),
			expect("defineDataset/negative", l.defineDataset(3, []int64{-2, -3}, "v", false, -1), codeFailure),
			expect("defineDataset", l.defineDataset(3, []int64{3, 2}, "v", false, a), codeSuccess),
			expect("name", l.getIDFromString("v", false), 3),
			expect("defineDataset/other name kept", l.defineDataset(3, nil, "w", false, -1), codeSuccess),
			expect("old name stays", l.getIDFromString("v", false), 3),
			expect("setAttribute/dims", l.setAttribute(3, "q", attrDim|attrName), codeFailure),
			expect("not named by a refused call", l.getIDFromString("q", false), -1),
			expect("setAttribute/name kept", l.setAttribute(3, "v", attrName), codeSuccess),
			expect("subset", l.addSubset(3, 1, []int64{0}, []int64{6}, 1, false), codeSuccess),
			expect("L1 with the dataset", l.checkpoint(1, 1), codeCheckpoint))
		return errors.Join(errs...)
	})
	assert.Contains(t, log.String(), `FTI_RenameGroup: group "/a" holds global dataset 1 already`)
	assert.Contains(t, log.String(), `FTI_DefineDataset: variable 3 keeps its name "v" (ftigo stores one name per variable); "w" is not recorded`)
}

// TestHeads: with head = 1 on 2 nodes of 2 ranks, FTI_Init returns
// FTI_HEAD on the heads (keep_heads_alive = 1; without it fti.c ends the
// process) once the application ranks have finalized; the application
// ranks work on a communicator of their own (FTI_COMM_WORLD), and their
// L2 checkpoint is post-processed by the heads (inline_l2 = 0).
func TestHeads(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.fti")
	body := fmt.Sprintf("[basic]\nhead = 1\nkeep_heads_alive = %%d\nnode_size = 2\ngroup_size = 2\nckpt_dir = %s\nglbl_dir = %s\nmeta_dir = %s\nverbosity = 1\ninline_l2 = 0\nkeep_last_ckpt = 1\n[advanced]\nlocal_test = 1\nblock_size = 16\n",
		filepath.Join(dir, "l"), filepath.Join(dir, "g"), filepath.Join(dir, "m"))
	log := &syncBuffer{}
	for _, keep := range []int{1, 0} {
		require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf(body, keep)), 0o644))
		require.NoError(t, comm.Run(4, func(c comm.Comm) error {
			l := newLibrary(log, log, lp64)
			rc := l.init(p, c)
			if c.Rank()%2 == 0 {
				want := codeHead
				if keep == 0 {
					want = codeHeadExit
				}
				return expect(fmt.Sprintf("init on head rank %d", c.Rank()), rc, want)
			}
			if rc != codeSuccess {
				return fmt.Errorf("rank %d: init returned %d", c.Rank(), rc)
			}
			defer func() { endRuntime(l.rt) }()
			if l.comm.Size() != 2 || l.comm.Rank() != c.Rank()/2 {
				return fmt.Errorf("rank %d: application rank %d of %d", c.Rank(), l.comm.Rank(), l.comm.Size())
			}
			x := []float64{float64(c.Rank()), 2}
			return errors.Join(
				expect("protect", l.protect(0, ptr(x), 2, typeDouble), codeSuccess),
				expect("checkpoint", l.checkpoint(1, 2), codeCheckpoint),
				expect("finalize", l.finalize(), codeSuccess))
		}, comm.WithTimeout(60*time.Second)))
	}
	assert.Contains(t, log.String(), "post-processed by the heads")
}

// ftigo_should_exit: 0 before a stop; the halt file makes the next
// FTI_Checkpoint the final one on every rank, then 1; the relaunch
// restarts from it.
func TestShouldExitHalt(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 2, "")
	log := &syncBuffer{}
	alloc := &goAllocator{}
	assert.Equal(t, 0, (&library{}).shouldExit(), "before Init")
	session(t, 2, cfg, log, alloc, func(l *library, c comm.Comm) error {
		x := []int32{int32(c.Rank()) + 40}
		errs := []error{
			expect("protect", l.protect(0, ptr(x), 1, typeInt), codeSuccess),
			expect("checkpoint 1", l.checkpoint(1, 1), codeCheckpoint),
			expect("should exit before", l.shouldExit(), 0),
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			if err := ckpt.WriteHalt(vfd.Sec2{}, filepath.Join(dir, "m"), ckpt.HaltRequest{Reason: "capi test"}); err != nil {
				return err
			}
		}
		x[0] += 100
		errs = append(errs,
			expect("checkpoint 2", l.checkpoint(2, 1), codeCheckpoint),
			expect("should exit after", l.shouldExit(), 1))
		return errors.Join(errs...)
	})
	assert.Contains(t, log.String(), "capi test")
	session(t, 2, cfg, log, alloc, func(l *library, c comm.Comm) error {
		x := []int32{0}
		return errors.Join(
			expect("status", l.statusCode(), 1),
			expect("protect", l.protect(0, ptr(x), 1, typeInt), codeSuccess),
			expect("recover", l.recover("FTI_Recover"), codeSuccess),
			expect("final value", int(x[0]), c.Rank()+140),
			expect("should exit on relaunch", l.shouldExit(), 0))
	})
}
