package ckpt

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The fields the runtime's logger carries on every line. rank is the
// rank in the communicator given to Init (FTI's world rank). app-rank is
// the rank among the application ranks, present with head = 1 only
// (FTI's FTI_COMM_WORLD rank). head marks a head rank's lines.
const (
	fieldRank    = "rank"
	fieldAppRank = "app-rank"
	fieldHead    = "head"
)

// verbosityLevel is the zap level of FTI's verbosity v: 1 debug, 2 info,
// 3 warnings, 4 errors only.
func verbosityLevel(v int) zapcore.Level {
	return zapcore.Level(min(max(v, 1), 4) - 2)
}

// NewFTILogger returns a logger that prints one line per entry in FTI's
// manner, at FTI's verbosity (1 debug, 2 info, 3 warnings, 4 errors
// only). It is the runtime's logger when [WithLogger] is not given, and
// the C API's. The lines:
//
//	[ FTI  Information ] : message (key=value, ...)      stdout, application rank 0 only
//	[FTI Debug - 000003] : message (key=value, ...)      stdout, every rank
//	[ FTI Warning 000003 ] : message (key=value, ...)    stderr, every rank
//	[ FTI Error - 000003 ] : message (key=value, ...)    stderr, every rank
//
// The number is the rank (the "rank" field the runtime adds). An
// information line is printed when its "app-rank" field (with head = 1)
// or else its "rank" field is 0, as FTI prints them from rank 0 of
// FTI_COMM_WORLD. FTI prints its warnings on stdout; ftigo puts them on
// stderr, beside the errors, so that they reach a user whose stdout
// goes to a file. The checkpoint, restart and recovery lines ("Ckpt. ID
// ...", "This is a restart ...", "Recovered ...") carry their figures in
// the text, as FTI's do, and no fields. Each line is written with one
// Write call; the logger is safe for concurrent use.
func NewFTILogger(verbosity int, stdout, stderr io.Writer) *zap.Logger {
	return zap.New(&ftiCore{
		LevelEnabler: verbosityLevel(verbosity),
		out:          &ftiOut{stdout: stdout, stderr: stderr},
		rank:         -1, appRank: -1,
	})
}

// ftiOut is the destination an ftiCore and its children share.
type ftiOut struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
}

// ftiCore is the zapcore.Core behind NewFTILogger.
type ftiCore struct {
	zapcore.LevelEnabler
	out           *ftiOut
	rank, appRank int // -1: not known
	fields        []zapcore.Field
}

// takeRank reads the rank fields into c and reports whether f was one.
func (c *ftiCore) takeRank(f zapcore.Field) bool {
	if f.Type != zapcore.Int64Type && f.Type != zapcore.Int32Type {
		return false
	}
	switch f.Key {
	case fieldRank:
		c.rank = int(f.Integer)
	case fieldAppRank:
		c.appRank = int(f.Integer)
	default:
		return false
	}
	return true
}

func (c *ftiCore) With(fs []zapcore.Field) zapcore.Core {
	cp := *c
	cp.fields = append([]zapcore.Field(nil), c.fields...)
	for _, f := range fs {
		if !cp.takeRank(f) {
			cp.fields = append(cp.fields, f)
		}
	}
	return &cp
}

func (c *ftiCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *ftiCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	line := *c
	rest := make([]zapcore.Field, 0, len(c.fields)+len(fs))
	rest = append(rest, c.fields...)
	for _, f := range fs {
		if !line.takeRank(f) {
			rest = append(rest, f)
		}
	}
	tag := max(line.rank, 0)
	var b strings.Builder
	w := c.out.stdout
	switch {
	case e.Level >= zapcore.ErrorLevel:
		fmt.Fprintf(&b, "[ FTI Error - %06d ] : ", tag)
		w = c.out.stderr
	case e.Level == zapcore.WarnLevel:
		fmt.Fprintf(&b, "[ FTI Warning %06d ] : ", tag)
		w = c.out.stderr
	case e.Level == zapcore.InfoLevel:
		gate := line.appRank
		if gate < 0 {
			gate = line.rank
		}
		if gate > 0 {
			return nil // FTI prints information from rank 0 only
		}
		b.WriteString("[ FTI  Information ] : ")
	default:
		fmt.Fprintf(&b, "[FTI Debug - %06d] : ", tag)
	}
	b.WriteString(e.Message)
	if e.Level == zapcore.InfoLevel && plainLine(e.Message) {
		rest = nil // the figures are in the text, as in FTI's line
	}
	writeFields(&b, rest)
	b.WriteByte('\n')
	if w == nil {
		return nil
	}
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	_, err := io.WriteString(w, b.String())
	return err
}

// plainPrefixes start the information lines that carry all their
// figures in the text, as FTI's do: checkpoints, restarts, recoveries.
var plainPrefixes = []string{"Ckpt. ID", "This is a restart", "Recovered "}

// plainLine reports whether msg is printed without its fields.
func plainLine(msg string) bool {
	for _, p := range plainPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// writeFields appends " (k=v, ...)" for fs, each key once (a later
// field of the same key wins, in the place of the first).
func writeFields(b *strings.Builder, fs []zapcore.Field) {
	enc := zapcore.NewMapObjectEncoder()
	var keys []string
	for _, f := range fs {
		if _, seen := enc.Fields[f.Key]; !seen {
			keys = append(keys, f.Key)
		}
		f.AddTo(enc)
	}
	if len(keys) == 0 {
		return
	}
	b.WriteString(" (")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%s=%v", k, enc.Fields[k])
	}
	b.WriteString(")")
}

func (c *ftiCore) Sync() error { return nil }

// atVerbosity returns l filtered at FTI's verbosity v. A logger already
// stricter than that stays as it is (zap.IncreaseLevel would complain).
func atVerbosity(l *zap.Logger, v int) *zap.Logger {
	lvl := verbosityLevel(v)
	if lvl <= zapcore.DebugLevel {
		return l
	}
	return l.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		if nc, err := zapcore.NewIncreaseLevelCore(core, lvl); err == nil {
			return nc
		}
		return core
	}))
}

// rankLogger returns base with this rank's fields: rank (in the
// communicator given to Init) and, with head = 1, app-rank (among the
// application ranks).
func rankLogger(base *zap.Logger, rank, appRank int) *zap.Logger {
	if appRank < 0 {
		return base.With(zap.Int(fieldRank, rank))
	}
	return base.With(zap.Int(fieldRank, rank), zap.Int(fieldAppRank, appRank))
}

// Logger returns the logger the runtime logs with, carrying this rank's
// fields ("rank", and "app-rank" with head = 1), for a program that
// wants its own lines beside the runtime's (a nil runtime: zap.NewNop).
func (r *Runtime) Logger() *zap.Logger {
	if r == nil || r.log == nil {
		return zap.NewNop()
	}
	return r.log
}
