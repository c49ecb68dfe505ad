package main

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
)

// TestSetCompression: FTI_SetCompression with FTI's modes stores a
// double field with zstd (a fraction of its bytes), as float, or with 8
// mantissa bits; the restart reads each back (exactly for zstd, within
// the recorded bound otherwise); FTI's fpzip, an unknown mode and an
// unprotected id fail with FTI_NSCS.
func TestSetCompression(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 2, "compression = zstd")
	log := &syncBuffer{}
	alloc := &goAllocator{}
	field := func() []float64 {
		x := make([]float64, 4096)
		for i := range x {
			x[i] = float64(i/256) + math.Sqrt(float64(i%7))
		}
		return x
	}
	session(t, 2, cfg, log, alloc, func(l *library, c comm.Comm) error {
		a, b, d := field(), field(), field()
		return errors.Join(
			expect("protect a", l.protect(0, ptr(a), int64(len(a)), typeDouble), codeSuccess),
			expect("protect b", l.protect(1, ptr(b), int64(len(b)), typeDouble), codeSuccess),
			expect("protect d", l.protect(2, ptr(d), int64(len(d)), typeDouble), codeSuccess),
			expect("zstd", l.setCompression(0, cpcZstd, 0, cpcTypeNone), codeSuccess),
			expect("single", l.setCompression(1, cpcFloat, 0, cpcTypeNone), codeSuccess),
			expect("strip", l.setCompression(2, cpcStrip, 8, cpcTypePrecision), codeSuccess),
			expect("fpzip", l.setCompression(0, cpcFpzip, 10, cpcTypePrecision), codeFailure),
			expect("unknown", l.setCompression(0, 99, 0, cpcTypeNone), codeFailure),
			expect("accuracy", l.setCompression(0, cpcStrip, 8, cpcTypeAccuracy), codeFailure),
			expect("unprotected", l.setCompression(7, cpcZstd, 0, cpcTypeNone), codeFailure),
			expect("checkpoint L2", l.checkpoint(1, 2), codeCheckpoint),
		)
	})
	session(t, 2, cfg, log, alloc, func(l *library, c comm.Comm) error {
		a, b, d := make([]float64, 4096), make([]float64, 4096), make([]float64, 4096)
		errs := []error{
			expect("protect a", l.protect(0, ptr(a), int64(len(a)), typeDouble), codeSuccess),
			expect("protect b", l.protect(1, ptr(b), int64(len(b)), typeDouble), codeSuccess),
			expect("protect d", l.protect(2, ptr(d), int64(len(d)), typeDouble), codeSuccess),
			expect("recover", l.recover("FTI_Recover"), codeSuccess),
			expect("stored size is the logical size", int(l.storedSize(0)), 8*4096),
		}
		want := field()
		ia, err := l.rt.StoredInfo(0)
		errs = append(errs, err)
		if ia.Codec != fileformat.CodecZstd || ia.Stored*4 > ia.Size || !ia.Exact() {
			errs = append(errs, errors.New("zstd variable not stored compressed and exact"))
		}
		for id, got := range [][]float64{a, b, d} {
			info, err := l.rt.StoredInfo(id)
			errs = append(errs, err)
			for i := range want {
				if e := math.Abs(got[i] - want[i]); e > info.Bound.Abs {
					errs = append(errs, errors.New("value beyond the recorded bound"))
					break
				}
			}
			if id > 0 && (info.Exact() || info.Bound.Abs == 0) {
				errs = append(errs, errors.New("lossy variable reported exact"))
			}
		}
		return errors.Join(errs...)
	})
	assert.Contains(t, log.String(), "FTI_SetCompression: variable 0: compression mode 1 (fpzip, zfp) is not offered")
	assert.Contains(t, log.String(), "restored with lossy compression (mantissa:8)")
}
