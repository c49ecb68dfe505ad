package ckpt

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// Runs. A run is a job and its relaunches, FTI's execution. Its id is
// FTI's exec_id: the start time and a random part. The run owns its
// directories, glbl_dir/<run> and ckpt_dir/node%04d/<run>, and meta_dir,
// which names it (levels.RunFile). Every manifest records it. So jobs
// that share glbl_dir and ckpt_dir never see each other's files.
//
// FTI writes the exec_id back into config.fti, so that the relaunch
// reuses it. ftigo keeps it in meta_dir instead and never writes the
// user's configuration. [Config.Run] ([restart] exec_id with failure =
// 1 or 2) names a run to restart explicitly.
//
// A meta_dir written before runs existed holds checkpoints and no run
// file. Its run keeps the empty id and the flat directories, glbl_dir
// and ckpt_dir/node%04d, until it has no checkpoint left.

// GlobalDir returns the directory of run in glbl_dir: where its L4
// checkpoints and its manifest replicas are.
func (c Config) GlobalDir(run string) string { return levels.RunDir(c.GlblDir, run) }

// NodeDir returns the directory of run in node n's part of ckpt_dir
// (ckpt_dir/node%04d/<run>).
func (c Config) NodeDir(n int, run string) string {
	return levels.RunDir(path.Join(c.CkptDir, fmt.Sprintf("node%04d", n)), run)
}

// runClaim is what rank 0 holds of the run: its id and its locks.
type runClaim struct {
	run string
	// how is how the run was found: "new", "meta" (meta_dir names it),
	// "taken" (cfg.Run names it, taken over) or "legacy".
	how  string
	meta io.Closer // meta_dir's lock
	dir  io.Closer // the run directory's lock in glbl_dir
}

// Close releases the locks.
func (c *runClaim) Close() error {
	if c == nil {
		return nil
	}
	var err error
	for _, l := range []*io.Closer{&c.dir, &c.meta} {
		if *l != nil {
			err = errors.Join(err, (*l).Close())
			*l = nil
		}
	}
	return err
}

// claimRun locks meta_dir, decides the run, locks its directory in
// glbl_dir and records it in meta_dir. It runs in one process: rank 0
// of Init, or the offline tool.
func claimRun(cfg Config, o options, now time.Time, log *zap.Logger) (_ *runClaim, err error) {
	meta := levels.Store{Driver: o.meta, Dir: cfg.MetaDir}
	cl := &runClaim{}
	defer func() {
		if err != nil {
			_ = cl.Close() // the locks taken so far
		}
	}()
	if err := o.meta.MkdirAll(cfg.MetaDir, 0o755); err != nil {
		return nil, err
	}
	metaLock := meta.Path(levels.LockName)
	l, who, err := lockFile(o.meta, metaLock, thisHolder(now, ""))
	switch {
	case err == nil:
		cl.meta = l
	case errors.Is(err, vfd.ErrUnsupported):
		log.Warn("meta_dir cannot be locked through this driver: nothing stops another job from using it at the same time",
			zap.String("meta_dir", cfg.MetaDir), zap.Error(err))
	case errors.Is(err, vfd.ErrLocked):
		return nil, inUse("meta_dir "+cfg.MetaDir, who, "wait for it to end (Finalize or Close), or give this job its own meta_dir")
	default:
		return nil, err
	}
	run, how, err := resolveRun(cfg, o, meta, now)
	if err != nil {
		return nil, err
	}
	cl.run, cl.how = run, how
	gdir := cfg.GlobalDir(run)
	if err := o.global.MkdirAll(gdir, 0o755); err != nil {
		return nil, err
	}
	if name := path.Join(gdir, levels.LockName); path.Clean(name) != path.Clean(metaLock) {
		l, who, err := lockFile(o.global, name, thisHolder(now, absPath(cfg.MetaDir)))
		switch {
		case err == nil:
			cl.dir = l
		case errors.Is(err, vfd.ErrUnsupported):
			log.Debug("the run's directory in glbl_dir cannot be locked through this driver", zap.String("dir", gdir), zap.Error(err))
		case errors.Is(err, vfd.ErrLocked):
			return nil, inUse(runName(run)+" in glbl_dir "+gdir, who, "wait for it to end, or restart another run")
		default:
			return nil, err
		}
	}
	if how == "new" || how == "taken" {
		if err := levels.WriteRun(meta, run); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// absPath is p made absolute, or p when that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// runName names run in messages.
func runName(run string) string {
	if run == "" {
		return "the run from before run ids"
	}
	return "run " + run
}

// resolveRun decides which run the job is (see runClaim.how): the one
// meta_dir names, the run from before run ids whose checkpoints
// meta_dir holds, the run cfg.Run names (taken over), or a new one.
func resolveRun(cfg Config, o options, meta levels.Store, now time.Time) (run, how string, err error) {
	id, ok, err := levels.ReadRun(meta)
	if err != nil {
		return "", "", err
	}
	if ok {
		if cfg.Run != "" && cfg.Run != id {
			return "", "", cfgErr("the configuration names run %s ([restart] exec_id), but meta_dir %s belongs to run %s: restart run %s with its own meta_dir, or remove exec_id",
				cfg.Run, cfg.MetaDir, id, cfg.Run)
		}
		return id, "meta", nil
	}
	legacy, err := levels.HoldsCheckpoints(meta)
	if err != nil {
		return "", "", err
	}
	if legacy {
		if cfg.Run != "" {
			return "", "", cfgErr("meta_dir %s holds the checkpoints of a run from before run ids, so it cannot restart run %s ([restart] exec_id): give that job its own meta_dir",
				cfg.MetaDir, cfg.Run)
		}
		return "", "legacy", nil
	}
	if cfg.Run != "" {
		return cfg.Run, "taken", takeOver(cfg, o)
	}
	for range 4 {
		if run, err = levels.NewRunID(now, rand.Reader); err != nil {
			return "", "", err
		}
		if _, err := o.global.Stat(cfg.GlobalDir(run)); errors.Is(err, fs.ErrNotExist) {
			return run, "new", nil
		}
	}
	return "", "", fmt.Errorf("ckpt: no new run id free in glbl_dir %s", cfg.GlblDir)
}

// takeOver checks that the job may take run cfg.Run over into its
// meta_dir, which names no run: glbl_dir holds the run, and the
// meta_dir that last held it (recorded in its lock in glbl_dir) is gone
// or no longer names it. A run has one meta_dir: two would commit
// different checkpoints under the same numbers in the same directories.
func takeOver(cfg Config, o options) error {
	gdir := cfg.GlobalDir(cfg.Run)
	repl := path.Join(gdir, levels.ReplicaDir)
	if st, err := o.global.Stat(repl); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: restart of run %s asked ([restart] exec_id), but glbl_dir %s holds no such run (no %s)",
			ErrUnrecoverable, cfg.Run, cfg.GlblDir, repl)
	}
	raw, err := vfd.ReadFileLimit(o.global, path.Join(gdir, levels.LockName), maxHolderSize)
	var last holder
	if err != nil || json.Unmarshal(raw, &last) != nil || last.Meta == "" || last.Meta == absPath(cfg.MetaDir) {
		return nil
	}
	if id, ok, err := levels.ReadRun(levels.Store{Driver: o.meta, Dir: last.Meta}); err == nil && ok && id == cfg.Run {
		return cfgErr("run %s belongs to meta_dir %s, which still names it (recorded in %s): relaunch it with that meta_dir; a run has one meta_dir, and a new one takes a run over only once the old one is lost",
			cfg.Run, last.Meta, path.Join(gdir, levels.LockName))
	}
	return nil
}

// Kinds of errors shareRun carries, so that errors.Is holds on every
// rank (index 0: none of them).
var runErrKinds = []error{nil, ErrLocked, ErrConfig, ErrUnrecoverable, levels.ErrBadRun}

// sharedErr is an error decided on rank 0, with the same text on every
// rank.
type sharedErr struct {
	msg  string
	kind error
}

func (e *sharedErr) Error() string { return e.msg }
func (e *sharedErr) Unwrap() error { return e.kind }

// takeRun claims the run on rank 0 (unless the caller holds it) and
// gives every rank its id or the same error. Collective.
func (r *Runtime) takeRun(o options) error {
	c := r.c
	var msg []byte
	if c.Rank() == 0 {
		cl, err := &runClaim{run: o.run}, error(nil)
		if !o.lockHeld {
			cl, err = claimRun(r.cfg, o, r.now(), r.log)
		}
		if err == nil {
			r.claim = cl
			msg = append([]byte{0}, cl.run...)
		} else {
			kind := 0
			for i, k := range runErrKinds[1:] {
				if errors.Is(err, k) {
					kind = i + 1
					break
				}
			}
			msg = append([]byte{byte(kind + 1)}, err.Error()...)
		}
	}
	msg, err := comm.BcastBytes(c, 0, msg)
	if err != nil {
		r.releaseLock()
		return fmt.Errorf("ckpt: claim the run: %w", err)
	}
	if len(msg) == 0 || msg[0] != 0 {
		e := &sharedErr{msg: string(msg[min(len(msg), 1):])}
		if len(msg) > 0 && int(msg[0])-1 < len(runErrKinds) {
			e.kind = runErrKinds[msg[0]-1]
		}
		if e.kind == nil {
			return fmt.Errorf("ckpt: %w", e)
		}
		return e
	}
	r.run = string(msg[1:])
	if c.Rank() == 0 && r.claim != nil {
		switch r.claim.how {
		case "legacy":
			r.log.Debug("meta_dir holds checkpoints from before run ids: this run keeps glbl_dir and ckpt_dir's node directories", zap.String("meta_dir", r.cfg.MetaDir))
		case "taken":
			r.log.Info("The execution ID is: "+r.run+" (taken over from glbl_dir: meta_dir names it now)", zap.String("meta_dir", r.cfg.MetaDir))
		default:
			r.log.Info("The execution ID is: " + r.run)
		}
	}
	return nil
}

// Run returns the id of this job's run (FTI's exec_id): "" for a run
// whose meta_dir was written before runs existed.
func (r *Runtime) Run() string {
	if r == nil {
		return ""
	}
	return r.run
}

// retireRun ends the run at Finalize when it keeps no checkpoint: its
// empty directories go, and meta_dir no longer names it, so the next
// start begins a new run (as FTI's next execution gets a new exec_id).
// Collective, after a barrier. Failures only leave empty directories
// behind: logged.
func (r *Runtime) retireRun() error {
	if r.run == "" || len(r.eng.Committed()) > 0 {
		return nil
	}
	var errs []error
	rmEmpty := func(d vfd.Driver, dir string) {
		if err := d.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if r.topo.LocalIndex(r.c.Rank()) == 0 {
		rmEmpty(r.env.Local.Driver, r.env.Local.Dir)
	}
	if r.c.Rank() == 0 {
		g := r.env.Global
		rmEmpty(g.Driver, g.Path(levels.ReplicaDir))
		if r.claim != nil && r.claim.dir != nil {
			rmEmpty(g.Driver, g.Path(levels.LockName))
		}
	}
	if err := r.c.Barrier(); err != nil {
		return err
	}
	if r.c.Rank() == 0 {
		rmEmpty(r.env.Global.Driver, r.env.Global.Dir)
		if err := levels.RemoveRun(r.env.Meta); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.log.Debug("removing the run's directories at Finalize", zap.Error(err))
	}
	return nil
}
