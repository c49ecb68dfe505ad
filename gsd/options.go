package gsd

import (
	"time"

	"go.uber.org/zap"
)

// Option configures a [Writer] made by [Create] or [OpenAppend], or a
// [Reader] made by [Open] or [NewReader] (which use only [WithMaxRead]).
type Option func(*options)

// defaultMaxRead is the largest read of chunk data a Reader makes by default.
const defaultMaxRead = 4 << 30

type options struct {
	logger    *zap.Logger
	clock     func() time.Time
	sync      bool
	ordered   bool // with sync: skip the fsync after the index entries
	maxBytes  int64
	interval  time.Duration
	indexCap  uint64
	bufSize   int
	overwrite bool
	maxRead   int64 // readers: largest chunk read at once
}

func defaultOptions() options {
	return options{logger: zap.NewNop(), clock: time.Now, sync: true, bufSize: 1 << 20, maxRead: defaultMaxRead}
}

func buildOptions(opts []Option) options {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	return o
}

// WithLogger sets the logger (nil means no logging).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock sets the clock the buffered mode's interval is measured with.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// WithSync switches durability: with true (the default) a commit fsyncs
// the data before writing the index entries that reference it and fsyncs
// again after them, so a committed frame survives a power loss. With false
// the order of writes is the same but nothing is fsynced; a killed process
// still leaves a valid file, a power loss may not.
func WithSync(on bool) Option { return func(o *options) { o.sync, o.ordered = on, false } }

// WithOrderedSync keeps one fsync per commit, between the data and the
// index entries, as the reference library does since 2.8.1: a power loss
// still leaves a valid file with every frame but possibly the last one
// committed (it becomes durable with the next commit or Close, which
// fsyncs). It is faster than the default when frames are small.
func WithOrderedSync() Option { return func(o *options) { o.sync, o.ordered = true, true } }

// WithBuffered turns on the buffered mode: EndFrame commits only when at
// least maxBytes of chunk data are uncommitted, or interval has passed
// since the last commit (a zero value disables that bound). [Writer.Flush]
// and [Writer.Close] commit too. Frames not yet committed are lost if the
// process dies. The default is to commit at every EndFrame.
func WithBuffered(maxBytes int64, interval time.Duration) Option {
	return func(o *options) { o.maxBytes, o.interval = maxBytes, interval }
}

// WithIndexCapacity pre-allocates room for n index entries (expected
// frames × chunks per frame) in a new file, saving relocations of the
// index on long runs.
func WithIndexCapacity(n uint64) Option { return func(o *options) { o.indexCap = n } }

// WithWriteBuffer sets the size of the buffer that gathers small chunks
// into larger writes (default 1 MiB; 0 writes every chunk directly).
// Chunks of at least this size are written directly.
func WithWriteBuffer(n int) Option { return func(o *options) { o.bufSize = max(n, 0) } }

// WithOverwrite lets [Create] replace an existing file (the reference
// library's behaviour); without it Create fails with fs.ErrExist.
func WithOverwrite() Option { return func(o *options) { o.overwrite = true } }

// WithMaxRead bounds the bytes a [Reader] reads (and allocates) in one
// call of ReadChunk, ReadRows and their raw forms (default 4 GiB; 0 or
// less keeps the default). A larger request fails with ErrTooLarge; read
// a large chunk in row ranges instead. It guards against a damaged or
// hostile entry whose size, though inside the file, is far larger than
// what the caller meant to hold in memory.
func WithMaxRead(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.maxRead = n
		}
	}
}
