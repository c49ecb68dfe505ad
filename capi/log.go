package main

import (
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// FTI's message priorities (FTI_Print's second argument): FTI_DBUG 1,
// FTI_INFO 2, FTI_WARN 3, FTI_EROR 4, FTI_IDCP 5 (dCP statistics).
const (
	prioDebug = 1
	prioInfo  = 2
	prioWarn  = 3
	prioError = 4
	prioDCP   = 5
)

// ftiCore is a zap core that prints one line per entry in FTI's manner,
// so people and scripts used to FTI's output find their way:
//
//	[ FTI  Information ] : message (key=value, ...)      stdout
//	[ FTI Warning 000003 ] : message (key=value, ...)    stdout, every rank
//	[ FTI Error - 000003 ] : message (key=value, ...)    stderr, every rank
//	[FTI Debug - 000003] : message (key=value, ...)      stdout, every rank
//
// Info lines are printed by every rank that logs them; ckpt and the C
// API log information on rank 0 only, as FTI does.
type ftiCore struct {
	zapcore.LevelEnabler
	rank   int
	out    io.Writer
	errOut io.Writer
	fields []zapcore.Field
}

// newFTILogger returns a logger printing to out (errors to errOut) at
// FTI's verbosity v: 1 debug, 2 info, 3 warnings, 4 errors only.
func newFTILogger(rank, v int, out, errOut io.Writer) *zap.Logger {
	lvl := zapcore.Level(min(max(v, 1), 4) - 2)
	return zap.New(&ftiCore{LevelEnabler: lvl, rank: rank, out: out, errOut: errOut})
}

func (c *ftiCore) With(fs []zapcore.Field) zapcore.Core {
	cp := *c
	cp.fields = append(append([]zapcore.Field(nil), c.fields...), fs...)
	return &cp
}

func (c *ftiCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *ftiCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	var b strings.Builder
	w := c.out
	switch {
	case e.Level >= zapcore.ErrorLevel:
		fmt.Fprintf(&b, "[ FTI Error - %06d ] : ", c.rank)
		w = c.errOut
	case e.Level == zapcore.WarnLevel:
		fmt.Fprintf(&b, "[ FTI Warning %06d ] : ", c.rank)
	case e.Level == zapcore.InfoLevel:
		b.WriteString("[ FTI  Information ] : ")
	default:
		fmt.Fprintf(&b, "[FTI Debug - %06d] : ", c.rank)
	}
	b.WriteString(e.Message)
	all := append(append([]zapcore.Field(nil), c.fields...), fs...)
	if e.Level == zapcore.InfoLevel && strings.HasPrefix(e.Message, "Ckpt. ID") {
		all = nil // the checkpoint line carries its figures in the text, as FTI's does
	}
	enc := zapcore.NewMapObjectEncoder()
	var keys []string
	for _, f := range all {
		if f.Key == "rank" {
			continue // in the tag, or rank 0's information
		}
		if _, seen := enc.Fields[f.Key]; !seen {
			keys = append(keys, f.Key)
		}
		f.AddTo(enc)
	}
	if len(keys) > 0 {
		b.WriteString(" (")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s=%v", k, enc.Fields[k])
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (c *ftiCore) Sync() error { return nil }

// printAt logs msg at FTI priority prio (FTI_Print). Information and dCP
// messages are printed by rank 0 only, as FTI does; unknown priorities
// print nothing.
func printAt(l *zap.Logger, rank, prio int, msg string) {
	switch prio {
	case prioDebug:
		l.Debug(msg)
	case prioInfo, prioDCP:
		if rank == 0 {
			l.Info(msg)
		}
	case prioWarn:
		l.Warn(msg)
	case prioError:
		l.Error(msg)
	}
}
