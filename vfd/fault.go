package vfd

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// OpKind names a kind of operation seen by [Fault] and [Log].
type OpKind uint8

// The operation kinds. Size on a file counts as OpStat. OpWriteback is
// [StartWriteback] on a file and OpDropCache [DropCache]; they came last
// so the values of the others did not change.
const (
	OpOpen OpKind = iota
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpClose
	OpRemove
	OpRemoveAll
	OpRename
	OpStat
	OpReadDir
	OpMkdir
	OpSyncDir
	OpWriteback
	OpDropCache
	numOpKinds
)

var opKindNames = [numOpKinds]string{"open", "read", "write", "sync", "truncate", "close", "remove", "removeall", "rename", "stat", "readdir", "mkdir", "syncdir", "writeback", "dropcache"}

// String returns the lowercase name of k.
func (k OpKind) String() string {
	if k < numOpKinds {
		return opKindNames[k]
	}
	return fmt.Sprintf("opkind(%d)", uint8(k))
}

// Op describes one operation about to run through a [Fault] driver.
type Op struct {
	Kind    OpKind
	Path    string  // the file or directory name (for Rename, the old name)
	NewPath string  // for Rename, the new name
	Off     int64   // for Read, Write, Writeback and DropCache, the offset; for Truncate, the new size
	Len     int     // for Read and Write, the buffer length; for Writeback and DropCache, the range length (0: to the end)
	Type    MemType // for Write and Read, the memory-type hint (MemDefault without one)
	// Index is the position of this op among all ops of the Fault, from
	// 0; -1 for a Writeback or DropCache op unless [Fault.NumberWriteback]
	// is on.
	Index int
}

// Injector decides whether an operation fails. MaybeError is called for
// every operation, in order, before it runs; a non-nil error makes the
// operation fail with it (wrapped so it matches [ErrInjected]). Injectors
// run under the Fault's lock, one op at a time, so they may keep state
// without locking.
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to [Injector].
type InjectorFunc func(op Op) error

// MaybeError calls fn(op).
func (fn InjectorFunc) MaybeError(op Op) error { return fn(op) }

// ErrInjected is matched by every error a [Fault] driver injects.
var ErrInjected = errors.New("vfd: injected fault")

// InjectedError is the error a [Fault] driver returns for an injected
// failure. It matches [ErrInjected] and unwraps to the chosen error (for
// example syscall.ENOSPC), so errors.Is works with both.
type InjectedError struct {
	Op  Op
	Err error // the chosen error; nil means just ErrInjected
	// Torn is, for a short write, how many bytes were written before
	// the failure; -1 when the op did not run at all.
	Torn int
}

// Error says what was injected: "no space left on device (injected
// fault, op #14, after 10 of 4096 bytes)", or "injected fault, op #14"
// without a chosen error. A Fault driver returns it
// inside the *fs.PathError the operation would return, which names the
// operation and the path, once.
func (e *InjectedError) Error() string {
	d := []string{"injected fault"}
	if e.Op.Index >= 0 {
		d = append(d, fmt.Sprintf("op #%d", e.Op.Index))
	}
	if e.Torn >= 0 {
		d = append(d, fmt.Sprintf("after %d of %d bytes", e.Torn, e.Op.Len))
	}
	if e.Err == nil {
		return strings.Join(d, ", ")
	}
	return fmt.Sprintf("%v (%s)", e.Err, strings.Join(d, ", "))
}

// Is reports whether target is ErrInjected.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// Unwrap returns the chosen error.
func (e *InjectedError) Unwrap() error { return e.Err }

// OnNth fails the n-th operation of kind (counting from 0) with err, once.
func OnNth(kind OpKind, n int, err error) Injector {
	seen := 0
	return InjectorFunc(func(op Op) error {
		if op.Kind != kind {
			return nil
		}
		seen++
		if seen-1 == n {
			return orInjected(err)
		}
		return nil
	})
}

// OnIndex fails the operation whose [Op.Index] is i with err, once.
// Unnumbered ops (Index -1) never match.
func OnIndex(i int, err error) Injector {
	return InjectorFunc(func(op Op) error {
		if op.Index >= 0 && op.Index == i {
			return orInjected(err)
		}
		return nil
	})
}

// OnPath fails every operation of the given kinds (all kinds when kinds
// is empty) whose path matches glob (path.Match syntax) with err. A glob
// without a slash is also matched against the last element of the path;
// for Rename, either name may match.
func OnPath(glob string, kinds []OpKind, err error) Injector {
	return InjectorFunc(func(op Op) error {
		if len(kinds) > 0 && !slices.Contains(kinds, op.Kind) {
			return nil
		}
		if globMatch(glob, op.Path) || (op.NewPath != "" && globMatch(glob, op.NewPath)) {
			return orInjected(err)
		}
		return nil
	})
}

func globMatch(glob, name string) bool {
	if ok, _ := path.Match(glob, name); ok {
		return true
	}
	if !slices.Contains([]byte(glob), '/') {
		ok, _ := path.Match(glob, path.Base(name))
		return ok
	}
	return false
}

// ShortWrite tears the n-th write (counting from 0): only the first keep
// bytes of the buffer reach the file (all but the last byte when keep is
// negative or not smaller than the buffer), then the write fails with err.
func ShortWrite(n, keep int, err error) Injector {
	seen := 0
	return InjectorFunc(func(op Op) error {
		if op.Kind != OpWrite {
			return nil
		}
		seen++
		if seen-1 != n {
			return nil
		}
		k := keep
		if k < 0 || k >= op.Len {
			k = max(op.Len-1, 0)
		}
		return &InjectedError{Op: op, Err: err, Torn: k}
	})
}

// Randomly fails each operation of the given kinds (all kinds when kinds
// is empty) with probability p and err, drawing from a generator seeded
// with seed: the same seed and the same sequence of operations fail the
// same ones.
func Randomly(p float64, seed uint64, err error, kinds ...OpKind) Injector {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return InjectorFunc(func(op Op) error {
		if len(kinds) > 0 && !slices.Contains(kinds, op.Kind) {
			return nil
		}
		if rng.Float64() < p {
			return orInjected(err)
		}
		return nil
	})
}

// Latency delays every operation of the given kinds (all kinds when kinds
// is empty) by d. It never fails an operation. Injectors run under the
// Fault's lock, so concurrent operations queue behind the delay, as on
// one slow device.
func Latency(d time.Duration, kinds ...OpKind) Injector {
	return InjectorFunc(func(op Op) error {
		if len(kinds) == 0 || slices.Contains(kinds, op.Kind) {
			time.Sleep(d)
		}
		return nil
	})
}

// CrashCloneAt returns an injector that stores c.CrashClone() in *dst
// just before the operation with Index k runs, for the "cut the power at
// op k" loop with a Fault over c. It never fails an operation; *dst stays
// nil when there is no op k.
func CrashCloneAt(c *Core, k int, dst **Core) Injector {
	return InjectorFunc(func(op Op) error {
		if op.Index >= 0 && op.Index == k {
			*dst = c.CrashClone()
		}
		return nil
	})
}

func orInjected(err error) error {
	if err == nil {
		return ErrInjected
	}
	return err
}

// Fault wraps a driver and fails chosen operations, for tests. Every
// operation on the driver and on the files it opens gets a global index
// (0, 1, 2, ... in the order the operations start) and is shown to each
// injector in turn; the first non-nil error wins and the operation does
// not run (a torn write from [ShortWrite] runs in part). With the same
// sequence of calls the same operations fail: Fault is deterministic.
//
// Writeback hints ([StartWriteback], kind OpWriteback; [DropCache], kind
// OpDropCache) are shown to the injectors like every op, so tests can
// fail them (OnNth(OpWriteback, ...), OnPath with that kind), but by
// default they take no global index
// (Index -1) and do not advance [Fault.Ops]. A hint changes neither the
// content nor what survives a crash: numbering it would shift the index
// of every later op whenever a writer starts or stops hinting (and the
// indices tests compute or record with it), and a "crash at op k" loop
// would gain steps whose crash state is the previous step's. Tests that
// want to fail hints pick them by kind or path, or number them with
// [Fault.NumberWriteback].
type Fault struct {
	inner           Driver
	mu              sync.Mutex
	injectors       []Injector
	ops             int
	injected        int
	numberWriteback bool
}

// NewFault wraps inner with injectors.
func NewFault(inner Driver, injectors ...Injector) *Fault {
	return &Fault{inner: inner, injectors: injectors}
}

// Name returns "fault".
func (d *Fault) Name() string { return "fault" }

// Inner returns the wrapped driver.
func (d *Fault) Inner() Driver { return d.inner }

// Ops returns how many operations have started so far; the next one gets
// this number as its Index.
func (d *Fault) Ops() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ops
}

// Injected returns how many operations have failed by injection.
func (d *Fault) Injected() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.injected
}

// NumberWriteback sets whether Writeback and DropCache ops take a global index (and
// count in [Fault.Ops]) like the others; off by default. Set it before
// the ops it should apply to.
func (d *Fault) NumberWriteback(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.numberWriteback = on
}

// Add appends injectors.
func (d *Fault) Add(injectors ...Injector) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.injectors = append(d.injectors, injectors...)
}

// check numbers op and asks the injectors; it returns nil or an
// *InjectedError.
func (d *Fault) check(op Op) *InjectedError {
	d.mu.Lock()
	defer d.mu.Unlock()
	if (op.Kind == OpWriteback || op.Kind == OpDropCache) && !d.numberWriteback {
		op.Index = -1
	} else {
		op.Index = d.ops
		d.ops++
	}
	for _, in := range d.injectors {
		err := in.MaybeError(op)
		if err == nil {
			continue
		}
		d.injected++
		var ie *InjectedError
		if errors.As(err, &ie) {
			ie.Op = op
			return ie
		}
		if err == ErrInjected {
			err = nil
		}
		return &InjectedError{Op: op, Err: err, Torn: -1}
	}
	return nil
}

func (d *Fault) fail(op Op) error {
	if ie := d.check(op); ie != nil {
		return pathErr(op.Kind.String(), op.Path, ie)
	}
	return nil
}

// Open opens name through the inner driver.
func (d *Fault) Open(name string, flag Flag) (File, error) {
	if err := d.fail(Op{Kind: OpOpen, Path: name}); err != nil {
		return nil, err
	}
	f, err := d.inner.Open(name, flag)
	if err != nil {
		return nil, err
	}
	return &faultFile{d: d, f: f}, nil
}

// Remove removes name unless an injector fails it.
func (d *Fault) Remove(name string) error {
	if err := d.fail(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return d.inner.Remove(name)
}

// RemoveAll removes name and its contents unless an injector fails it.
func (d *Fault) RemoveAll(name string) error {
	if err := d.fail(Op{Kind: OpRemoveAll, Path: name}); err != nil {
		return err
	}
	return d.inner.RemoveAll(name)
}

// Rename renames oldname to newname unless an injector fails it.
func (d *Fault) Rename(oldname, newname string) error {
	if err := d.fail(Op{Kind: OpRename, Path: oldname, NewPath: newname}); err != nil {
		return err
	}
	return d.inner.Rename(oldname, newname)
}

// Stat describes name unless an injector fails it.
func (d *Fault) Stat(name string) (fs.FileInfo, error) {
	if err := d.fail(Op{Kind: OpStat, Path: name}); err != nil {
		return nil, err
	}
	return d.inner.Stat(name)
}

// ReadDir lists name unless an injector fails it.
func (d *Fault) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := d.fail(Op{Kind: OpReadDir, Path: name}); err != nil {
		return nil, err
	}
	return d.inner.ReadDir(name)
}

// MkdirAll creates name and its parents unless an injector fails it.
func (d *Fault) MkdirAll(name string, perm fs.FileMode) error {
	if err := d.fail(Op{Kind: OpMkdir, Path: name}); err != nil {
		return err
	}
	return d.inner.MkdirAll(name, perm)
}

// SyncDir syncs the directory unless an injector fails it.
func (d *Fault) SyncDir(name string) error {
	if err := d.fail(Op{Kind: OpSyncDir, Path: name}); err != nil {
		return err
	}
	return d.inner.SyncDir(name)
}

type faultFile struct {
	d *Fault
	f File
}

func (f *faultFile) Name() string { return f.f.Name() }
func (f *faultFile) Unwrap() File { return f.f }

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	return f.ReadAtType(MemDefault, p, off)
}

func (f *faultFile) ReadAtType(t MemType, p []byte, off int64) (int, error) {
	if err := f.d.fail(Op{Kind: OpRead, Path: f.f.Name(), Off: off, Len: len(p), Type: t}); err != nil {
		return 0, err
	}
	return ReadAtType(f.f, t, p, off)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	return f.WriteAtType(MemDefault, p, off)
}

func (f *faultFile) WriteAtType(t MemType, p []byte, off int64) (int, error) {
	op := Op{Kind: OpWrite, Path: f.f.Name(), Off: off, Len: len(p), Type: t}
	ie := f.d.check(op)
	if ie == nil {
		return WriteAtType(f.f, t, p, off)
	}
	if ie.Torn <= 0 {
		return 0, pathErr("write", op.Path, ie)
	}
	n, err := WriteAtType(f.f, t, p[:ie.Torn], off)
	if err != nil {
		return n, err
	}
	return n, pathErr("write", op.Path, ie)
}

// StartWriteback passes the hint on unless an injector fails it.
func (f *faultFile) StartWriteback(off, n int64) error {
	if err := f.d.fail(Op{Kind: OpWriteback, Path: f.f.Name(), Off: off, Len: int(n)}); err != nil {
		return err
	}
	return StartWriteback(f.f, off, n)
}

// DropCache passes the hint on unless an injector fails it.
func (f *faultFile) DropCache(off, n int64) error {
	if err := f.d.fail(Op{Kind: OpDropCache, Path: f.f.Name(), Off: off, Len: int(n)}); err != nil {
		return err
	}
	return DropCache(f.f, off, n)
}

func (f *faultFile) Size() (int64, error) {
	if err := f.d.fail(Op{Kind: OpStat, Path: f.f.Name()}); err != nil {
		return 0, err
	}
	return f.f.Size()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.d.fail(Op{Kind: OpTruncate, Path: f.f.Name(), Off: size}); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *faultFile) Sync() error {
	if err := f.d.fail(Op{Kind: OpSync, Path: f.f.Name()}); err != nil {
		return err
	}
	return f.f.Sync()
}

// Close closes the inner file even when an injector fails the close, as
// close(2) releases the descriptor even when it reports an error.
func (f *faultFile) Close() error {
	if err := f.d.fail(Op{Kind: OpClose, Path: f.f.Name()}); err != nil {
		return errors.Join(err, f.f.Close())
	}
	return f.f.Close()
}
