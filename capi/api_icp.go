//lint:file-ignore U1000 the C entry points in capi.go (build tag mpi) are the only callers of some methods; staticcheck -tags mpi checks them

package main

import (
	"fmt"

	"go.uber.org/zap"
)

// unsupported logs why fn does not exist in ftigo and returns FTI_NSCS.
func (l *library) unsupported(fn, why string) int {
	l.logger().Warn(fn + " is not implemented by ftigo: " + why + "; returning FTI_NSCS")
	return codeFailure
}

// initICP is FTI_InitICP: it opens an incremental checkpoint (ckpt's
// BeginICP); with activate false it does nothing, and neither do the
// FTI_AddVarICP and FTI_FinalizeICP calls that follow, as in FTI.
// Collective. A level ftigo cannot take goes in as 0, which the runtime
// refuses on every rank after agreeing on the arguments.
func (l *library) initICP(id, level int, activate bool) int {
	const fn = "FTI_InitICP"
	if !l.ready(fn) {
		return codeFailure
	}
	lvl, msg, ok := mapLevel(level)
	if ok && msg != "" && activate {
		l.log.Warn(fn + ": " + msg)
	}
	if err := l.rt.BeginICP(int64(id), lvl, activate); err != nil {
		why := fmt.Sprintf("incremental checkpoint %d at level %d not started", id, level)
		if !ok {
			why += ": " + msg
		}
		return l.fail(fn, why, zap.Error(err))
	}
	return codeSuccess
}

// icpStep is FTI_AddVarICP (end false: writes variable varID now) and
// FTI_FinalizeICP (end true: completes and commits the checkpoint,
// collective; every protected variable must have been added).
func (l *library) icpStep(fn string, varID int, end bool) int {
	if !l.ready(fn) {
		return codeFailure
	}
	if !end {
		if err := l.rt.AddVarICP(varID); err != nil {
			return l.fail(fn, fmt.Sprintf("variable %d not written", varID), zap.Error(err))
		}
		return codeSuccess
	}
	if err := l.rt.FinalizeICP(); err != nil {
		return l.fail(fn, "incremental checkpoint not committed", zap.Error(err))
	}
	l.committed()
	return codeSuccess
}
