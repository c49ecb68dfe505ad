//lint:file-ignore U1000 the C entry points in capi.go (build tag mpi) are the only callers of some methods; staticcheck -tags mpi checks them

package main

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
)

// stageDir is FTI_GetStageDir: the node's staging directory (ckpt's
// StageDir; enable_staging = 1 needed).
func (l *library) stageDir() (string, int) {
	const fn = "FTI_GetStageDir"
	if !l.ready(fn) {
		return "", codeFailure
	}
	dir, err := l.rt.StageDir()
	if err != nil {
		return "", l.fail(fn, "no staging directory", zap.Error(err))
	}
	return dir, codeSuccess
}

// sendFile is FTI_SendFile: it queues a background copy of a node-local
// file to global storage and returns the request id.
func (l *library) sendFile(local, remote string, null bool) int {
	const fn = "FTI_SendFile"
	if !l.ready(fn) {
		return codeFailure
	}
	if null {
		return l.fail(fn, "NULL path")
	}
	id, err := l.rt.SendFile(local, remote)
	if err != nil {
		return l.fail(fn, fmt.Sprintf("%s -> %s not queued", local, remote), zap.Error(err))
	}
	return id
}

// stageStatus is FTI_GetStageStatus: FTI_SI_NINI .. FTI_SI_FAIL (the
// reason of a failure is logged once asked for).
func (l *library) stageStatus(id int) int {
	const fn = "FTI_GetStageStatus"
	if !l.ready(fn) {
		return codeFailure
	}
	st, err := l.rt.StageStatus(id)
	if errors.Is(err, ckpt.ErrStaging) {
		return l.fail(fn, "staging is not enabled", zap.Error(err))
	}
	if err != nil {
		l.logger().Warn(fn+": request failed", zap.Int("request", id), zap.Error(err))
	}
	return int(st)
}
