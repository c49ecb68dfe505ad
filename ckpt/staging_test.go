package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

func stageBytes(rank, i int) []byte {
	b := make([]byte, 1000*i+rank+1)
	for k := range b {
		b[k] = byte(k*i + rank)
	}
	return b
}

// TestStaging queues many copies per rank into the staging area and out
// to global storage (relative and absolute destinations), waits for them
// in another order than queued, checks every copy byte for byte with no
// tmp file left, a copy to a read-only destination failing with nothing
// left there, and the staging directory removed at Finalize; without
// enable_staging every call fails with ErrStaging.
func TestStaging(t *testing.T) {
	core := vfd.NewCore()
	cfg := testConfig("/", 2)
	cfg.EnableStaging = true
	readOnly := vfd.NewFault(core, vfd.OnPath("/global/ro/*", []vfd.OpKind{vfd.OpOpen}, fs.ErrPermission))
	const n = 12
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDrivers(core, readOnly, core), WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		if st, err := r.StageStatus(0); st != StageUnknown || err != nil {
			return fmt.Errorf("status of a request never made: %v, %v", st, err)
		}
		dir, err := r.StageDir()
		if err != nil {
			return err
		}
		if want := path.Join(cfg.NodeDir(c.Rank()/2, r.Run()), "stage"); dir != want {
			return fmt.Errorf("stage dir %s, want %s", dir, want)
		}
		var ids []int
		for i := range n {
			src := path.Join(dir, fmt.Sprintf("out-%d-%d", c.Rank(), i))
			if err := vfd.WriteFileAtomic(core, src, stageBytes(c.Rank(), i)); err != nil {
				return err
			}
			dst := fmt.Sprintf("results/r%d/f%d", c.Rank(), i) // inside glbl_dir
			if i%2 == 1 {
				dst = fmt.Sprintf("/elsewhere/r%d/f%d", c.Rank(), i)
			}
			id, err := r.SendFile(src, dst)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		bad, err := r.SendFile(path.Join(dir, fmt.Sprintf("out-%d-0", c.Rank())), fmt.Sprintf("/global/ro/f%d", c.Rank()))
		if err != nil {
			return err
		}
		missing, err := r.SendFile(path.Join(dir, "no-such-file"), "results/never")
		if err != nil {
			return err
		}
		for k := len(ids) - 1; k >= 0; k-- {
			if err := r.StageWait(ids[k]); err != nil {
				return err
			}
			if st, err := r.StageStatus(ids[k]); st != StageDone || err != nil {
				return fmt.Errorf("request %d: %v, %v", ids[k], st, err)
			}
		}
		for _, id := range []int{bad, missing} {
			werr := r.StageWait(id)
			st, serr := r.StageStatus(id)
			if werr == nil || st != StageFailed || serr == nil || serr.Error() != werr.Error() {
				return fmt.Errorf("request %d should fail: %v, %v, %v", id, werr, st, serr)
			}
		}
		if err := r.StageWait(99); !errors.Is(err, ErrStaging) {
			return fmt.Errorf("wait for an unknown request: %v", err)
		}
		return r.Finalize()
	}, comm.WithTimeout(30*time.Second)))
	for rank := range 4 {
		for i := range n {
			dst := fmt.Sprintf("/global/results/r%d/f%d", rank, i)
			if i%2 == 1 {
				dst = fmt.Sprintf("/elsewhere/r%d/f%d", rank, i)
			}
			b, err := vfd.ReadFile(core, dst)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(stageBytes(rank, i), b), "%s", dst)
			_, err = core.Stat(dst + ".tmp")
			assert.ErrorIs(t, err, fs.ErrNotExist)
		}
		_, err := core.Stat(fmt.Sprintf("/global/ro/f%d", rank))
		assert.ErrorIs(t, err, fs.ErrNotExist)
		_, err = core.Stat(fmt.Sprintf("/global/ro/f%d.tmp", rank))
		assert.ErrorIs(t, err, fs.ErrNotExist)
	}
	for node := range 2 {
		// The run kept no checkpoint: its directory went at Finalize,
		// and the stage directory inside it first.
		ents, err := core.ReadDir(fmt.Sprintf("/local/node%04d", node))
		require.NoError(t, err)
		assert.Empty(t, ents, "stage dir and run dir removed at Finalize")
	}

	cfg.EnableStaging = false
	require.NoError(t, comm.Run(2, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		_, e1 := r.StageDir()
		_, e2 := r.SendFile("/a", "/b")
		_, e3 := r.StageStatus(0)
		e4 := r.StageWait(0)
		for _, e := range []error{e1, e2, e3, e4} {
			if !errors.Is(e, ErrStaging) {
				return fmt.Errorf("without enable_staging: %v", e)
			}
		}
		return nil
	}))
}

// TestStagingCrash crashes at every file operation of a staged copy:
// afterwards the destination is absent or complete, never partial.
func TestStagingCrash(t *testing.T) {
	cfg := testConfig("/", 1)
	cfg.EnableStaging = true
	cfg.TransferSize = 8 << 20
	data := bytes.Repeat([]byte("staged bytes "), 1<<20) // 13 MiB: two pieces
	for k := 0; ; k++ {
		core := vfd.NewCore()
		inj := &crashInjector{core: core, crash: true, k: k}
		inj.base.Store(-1)
		fault := vfd.NewFault(core, inj)
		require.NoError(t, comm.Run(1, func(c comm.Comm) error {
			r, err := Init(cfg, c, WithDrivers(core, fault, core), WithLogger(zap.NewNop()))
			if err != nil {
				return err
			}
			defer r.Close()
			dir, err := r.StageDir()
			if err != nil {
				return err
			}
			if err := vfd.WriteFileAtomic(core, path.Join(dir, "big"), data); err != nil {
				return err
			}
			inj.base.Store(int64(fault.Ops()))
			id, err := r.SendFile(path.Join(dir, "big"), "big")
			if err != nil {
				return err
			}
			_ = r.StageWait(id)
			return nil
		}))
		if !inj.hit {
			t.Logf("%d operations per staged copy", k)
			break
		}
		b, err := vfd.ReadFile(inj.clone, "/global/big")
		if err != nil {
			require.ErrorIs(t, err, fs.ErrNotExist, "op %d", k)
			continue
		}
		require.True(t, bytes.Equal(data, b), "op %d: a partial copy at the destination", k)
	}
}
