package main

import (
	"go.uber.org/zap"
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

// The C API prints through ckpt.NewFTILogger, the Go runtime's default
// logger, so that C and Go programs print the same lines. Its loggers
// carry the rank fields ckpt adds ("rank", and "app-rank" with
// head = 1): information is printed by rank 0 only, as FTI does.

// printAt logs msg at FTI priority prio (FTI_Print). Unknown priorities
// print nothing.
func printAt(l *zap.Logger, prio int, msg string) {
	switch prio {
	case prioDebug:
		l.Debug(msg)
	case prioInfo, prioDCP:
		l.Info(msg)
	case prioWarn:
		l.Warn(msg)
	case prioError:
		l.Error(msg)
	}
}
