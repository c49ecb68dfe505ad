package vfd

import (
	"io"
	"io/fs"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// LogOption configures a [Log] driver.
type LogOption func(*Log)

// WithLogLevel sets the level at which successful operations are logged
// (default Debug). Failed operations are logged at Warn.
func WithLogLevel(l zapcore.Level) LogOption { return func(d *Log) { d.level = l } }

// WithLogClock sets the clock used to time operations (default time.Now).
func WithLogClock(now func() time.Time) LogOption { return func(d *Log) { d.now = now } }

// Log wraps a driver and traces every operation on it and on its files
// with zap, after HDF5's log driver: the op, the path, offset and size
// for reads, writes, writeback hints and truncates, the memory type of typed transfers,
// the duration and the error. It also keeps counters, read with
// [Log.Stats]. It is safe for concurrent use.
type Log struct {
	inner Driver
	lg    *zap.Logger
	level zapcore.Level
	now   func() time.Time

	ops    [numOpKinds]atomic.Int64
	errs   atomic.Int64
	rbytes atomic.Int64
	wbytes atomic.Int64
	nanos  atomic.Int64
}

// NewLog wraps inner; a nil logger logs nothing but still counts.
func NewLog(inner Driver, lg *zap.Logger, opts ...LogOption) *Log {
	if lg == nil {
		lg = zap.NewNop()
	}
	d := &Log{inner: inner, lg: lg, level: zapcore.DebugLevel, now: time.Now}
	for _, o := range opts {
		o(d)
	}
	return d
}

// LogStats are the counters of a [Log] driver.
type LogStats struct {
	Ops          map[OpKind]int64 // operations started, by kind (kinds never seen are absent)
	Errors       int64            // operations that returned an error (io.EOF on reads excluded)
	BytesRead    int64            // bytes returned by reads
	BytesWritten int64            // bytes accepted by writes
	Time         time.Duration    // total time spent in operations
}

// Stats returns a snapshot of the counters.
func (d *Log) Stats() LogStats {
	s := LogStats{Ops: map[OpKind]int64{}, Errors: d.errs.Load(), BytesRead: d.rbytes.Load(), BytesWritten: d.wbytes.Load(), Time: time.Duration(d.nanos.Load())}
	for k := range d.ops {
		if n := d.ops[k].Load(); n > 0 {
			s.Ops[OpKind(k)] = n
		}
	}
	return s
}

// Name returns "log".
func (d *Log) Name() string { return "log" }

// Inner returns the wrapped driver.
func (d *Log) Inner() Driver { return d.inner }

// done counts and logs one finished operation.
func (d *Log) done(op Op, start time.Time, n int, err error, extra ...zap.Field) {
	dur := d.now().Sub(start)
	d.ops[op.Kind].Add(1)
	d.nanos.Add(int64(dur))
	switch op.Kind {
	case OpRead:
		d.rbytes.Add(int64(n))
	case OpWrite:
		d.wbytes.Add(int64(n))
	}
	failed := err != nil && !(op.Kind == OpRead && err == io.EOF)
	if failed {
		d.errs.Add(1)
	}
	lvl := d.level
	if failed {
		lvl = zapcore.WarnLevel
	}
	ce := d.lg.Check(lvl, "vfd op")
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 9)
	fields = append(fields, zap.Stringer("op", op.Kind), zap.String("path", op.Path))
	if op.NewPath != "" {
		fields = append(fields, zap.String("new-path", op.NewPath))
	}
	switch op.Kind {
	case OpRead, OpWrite:
		fields = append(fields, zap.Int64("offset", op.Off), zap.Int("size", op.Len), zap.Int("done", n), zap.Stringer("mem-type", op.Type))
	case OpTruncate:
		fields = append(fields, zap.Int64("size", op.Off))
	case OpWriteback, OpDropCache:
		fields = append(fields, zap.Int64("offset", op.Off), zap.Int("size", op.Len))
	}
	fields = append(fields, zap.Duration("duration", dur))
	fields = append(fields, extra...)
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	ce.Write(fields...)
}

// Open opens name through the inner driver.
func (d *Log) Open(name string, flag Flag) (File, error) {
	start := d.now()
	f, err := d.inner.Open(name, flag)
	d.done(Op{Kind: OpOpen, Path: name}, start, 0, err, zap.Uint8("flag", uint8(flag)))
	if err != nil {
		return nil, err
	}
	return &logFile{d: d, f: f}, nil
}

// Remove removes name through the inner driver.
func (d *Log) Remove(name string) error {
	start := d.now()
	err := d.inner.Remove(name)
	d.done(Op{Kind: OpRemove, Path: name}, start, 0, err)
	return err
}

// RemoveAll removes name and its contents through the inner driver.
func (d *Log) RemoveAll(name string) error {
	start := d.now()
	err := d.inner.RemoveAll(name)
	d.done(Op{Kind: OpRemoveAll, Path: name}, start, 0, err)
	return err
}

// Rename renames through the inner driver.
func (d *Log) Rename(oldname, newname string) error {
	start := d.now()
	err := d.inner.Rename(oldname, newname)
	d.done(Op{Kind: OpRename, Path: oldname, NewPath: newname}, start, 0, err)
	return err
}

// Stat describes name through the inner driver.
func (d *Log) Stat(name string) (fs.FileInfo, error) {
	start := d.now()
	info, err := d.inner.Stat(name)
	d.done(Op{Kind: OpStat, Path: name}, start, 0, err)
	return info, err
}

// ReadDir lists a directory through the inner driver.
func (d *Log) ReadDir(name string) ([]fs.DirEntry, error) {
	start := d.now()
	ents, err := d.inner.ReadDir(name)
	d.done(Op{Kind: OpReadDir, Path: name}, start, 0, err, zap.Int("entries", len(ents)))
	return ents, err
}

// MkdirAll creates directories through the inner driver.
func (d *Log) MkdirAll(name string, perm fs.FileMode) error {
	start := d.now()
	err := d.inner.MkdirAll(name, perm)
	d.done(Op{Kind: OpMkdir, Path: name}, start, 0, err)
	return err
}

// SyncDir syncs a directory through the inner driver.
func (d *Log) SyncDir(name string) error {
	start := d.now()
	err := d.inner.SyncDir(name)
	d.done(Op{Kind: OpSyncDir, Path: name}, start, 0, err)
	return err
}

type logFile struct {
	d *Log
	f File
}

func (f *logFile) Name() string { return f.f.Name() }
func (f *logFile) Unwrap() File { return f.f }

func (f *logFile) ReadAt(p []byte, off int64) (int, error) {
	return f.ReadAtType(MemDefault, p, off)
}

func (f *logFile) ReadAtType(t MemType, p []byte, off int64) (int, error) {
	start := f.d.now()
	n, err := ReadAtType(f.f, t, p, off)
	f.d.done(Op{Kind: OpRead, Path: f.f.Name(), Off: off, Len: len(p), Type: t}, start, n, err)
	return n, err
}

func (f *logFile) WriteAt(p []byte, off int64) (int, error) {
	return f.WriteAtType(MemDefault, p, off)
}

func (f *logFile) WriteAtType(t MemType, p []byte, off int64) (int, error) {
	start := f.d.now()
	n, err := WriteAtType(f.f, t, p, off)
	f.d.done(Op{Kind: OpWrite, Path: f.f.Name(), Off: off, Len: len(p), Type: t}, start, n, err)
	return n, err
}

// StartWriteback passes the hint on, traces it (op "writeback", offset,
// size, 0 meaning to the end) and counts it under OpWriteback.
func (f *logFile) StartWriteback(off, n int64) error {
	start := f.d.now()
	err := StartWriteback(f.f, off, n)
	f.d.done(Op{Kind: OpWriteback, Path: f.f.Name(), Off: off, Len: int(n)}, start, 0, err)
	return err
}

// DropCache passes the hint on, traces it (op "dropcache", offset, size,
// 0 meaning to the end) and counts it under OpDropCache.
func (f *logFile) DropCache(off, n int64) error {
	start := f.d.now()
	err := DropCache(f.f, off, n)
	f.d.done(Op{Kind: OpDropCache, Path: f.f.Name(), Off: off, Len: int(n)}, start, 0, err)
	return err
}

func (f *logFile) Size() (int64, error) {
	start := f.d.now()
	n, err := f.f.Size()
	f.d.done(Op{Kind: OpStat, Path: f.f.Name()}, start, 0, err, zap.Int64("size", n))
	return n, err
}

func (f *logFile) Truncate(size int64) error {
	start := f.d.now()
	err := f.f.Truncate(size)
	f.d.done(Op{Kind: OpTruncate, Path: f.f.Name(), Off: size}, start, 0, err)
	return err
}

func (f *logFile) Sync() error {
	start := f.d.now()
	err := f.f.Sync()
	f.d.done(Op{Kind: OpSync, Path: f.f.Name()}, start, 0, err)
	return err
}

func (f *logFile) Close() error {
	start := f.d.now()
	err := f.f.Close()
	f.d.done(Op{Kind: OpClose, Path: f.f.Name()}, start, 0, err)
	return err
}
