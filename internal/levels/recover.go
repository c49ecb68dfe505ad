package levels

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/vfd"
)

// Recovery: the ladder from the newest committed checkpoint down.

// Recover walks the committed checkpoints newest first and returns the
// first one every rank can recover, with this rank's data source. Every
// digest is verified by the level on the way. The checkpoints passed
// over are remembered ([Engine.Skipped]): retention and
// [Engine.Recoverable] no longer treat them as the newest. When none is
// recoverable the error (identical on every rank) wraps [ErrNoCheckpoint]
// or [ErrUnrecoverable] and names each failure. Collective.
func (e *Engine) Recover() (*Manifest, Source, error) {
	defer e.dropPreload() // a verification started ahead and not used
	e.waitRemoval()       // the intent marker written ahead may still be syncing
	e.skipped = nil
	if len(e.committed) == 0 {
		return nil, Source{}, ErrNoCheckpoint
	}
	var errs []error
	for i := len(e.committed) - 1; i >= 0; i-- {
		m := e.committed[i]
		a := e.alt[m.Seq]
		// With two disagreeing copies, files that match neither are
		// left for the other attempt (see Env.tentative).
		e.env.tentative = a != nil
		src, err := e.RecoverOne(m)
		if a != nil {
			// The copies disagree: the other one may be this run's.
			if err != nil {
				var aerr error
				if src, aerr = e.RecoverOne(a); aerr == nil {
					m, err = a, nil
					e.committed[i] = a
				} else {
					err = fmt.Errorf("%w; with the other manifest copy: %w", err, aerr)
				}
			}
			if err == nil {
				e.settleCopies(m)
				delete(e.alt, m.Seq)
			}
		}
		e.env.tentative = false
		if err == nil {
			return m, src, nil
		}
		if e.unrecoverable == nil {
			e.unrecoverable = map[uint64]bool{}
		}
		e.unrecoverable[m.Seq] = true
		e.skipped = append(e.skipped, Skipped{Manifest: m, Err: err})
		if e.env.Rank == 0 { // the error is the same everywhere: log it once
			e.env.Logger.Warn("checkpoint not recoverable, trying an older one",
				zap.Uint64("seq", m.Seq), zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", m.Level), zap.Error(err))
		}
		errs = append(errs, err)
	}
	return nil, Source{}, joinedError(ErrUnrecoverable, errs)
}

// settleCopies makes both manifest copies of m hold m once recovery
// chose it among two disagreeing copies (rank 0): the other copy is kept
// as *.broken and rewritten. Failures are logged; the next Open sees the
// disagreement again.
func (e *Engine) settleCopies(m *Manifest) {
	env := e.env
	if env.Rank != 0 {
		return
	}
	raw, err := m.Marshal()
	if err != nil {
		return
	}
	for _, c := range []struct {
		d    vfd.Driver
		name string
	}{{env.Meta.Driver, env.Meta.Path(ManifestName(m.Seq))}, {env.Global.Driver, env.Global.Path(ReplicaName(m.Seq))}} {
		old, rerr := vfd.ReadFileLimit(c.d, c.name, MaxManifestSize)
		if rerr == nil && bytes.Equal(old, raw) {
			continue
		}
		err := c.d.Rename(c.name, c.name+BrokenSuffix)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			err = vfd.WriteFileAtomic(c.d, c.name, raw)
		}
		if err != nil {
			env.Logger.Warn("manifest copies disagree; rewriting the one recovery did not use failed", zap.String("path", c.name), zap.Error(err))
			continue
		}
		env.Logger.Warn(fmt.Sprintf("manifest copy %s described another checkpoint than the one recovered (another run's?); kept as %s and rewritten", c.name, c.name+BrokenSuffix))
	}
}

// joinedError returns an error that matches head and every one of errs
// with errors.Is, with the message "head: e1; e2; ...".
func joinedError(head error, errs []error) error {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return &multiError{msg: head.Error() + ": " + strings.Join(msgs, "; "), errs: append([]error{head}, errs...)}
}

type multiError struct {
	msg  string
	errs []error
}

func (m *multiError) Error() string   { return m.msg }
func (m *multiError) Unwrap() []error { return m.errs }

// RecoverOne checks and rebuilds committed checkpoint m on every rank.
// Collective; the error is identical on every rank.
//
// A checkpoint of another shape (another rank count, or ranks placed on
// other nodes: [Engine.OtherShape]) is recovered by a verification pass
// of its own (reshape.go) when Config.NodeStore is set: the Source is
// then empty and [Engine.Reshaped] says where each old rank's data is.
func (e *Engine) RecoverOne(m *Manifest) (Source, error) {
	what := fmt.Sprintf("checkpoint %s (id %d, %v)", m.Dir(), m.ID, m.Level)
	e.reshape = nil
	if m.Ranks != e.env.Comm.Size() {
		return Source{}, e.recoverReshaped(m, what)
	}
	l, ok := e.levels[m.Level]
	if !ok {
		return Source{}, fmt.Errorf("%s: %w", what, ErrLevelUnavailable)
	}
	if m.DCP != nil {
		return e.recoverChain(m, what)
	}
	h5, err := e.h5Views(m)
	if err != nil {
		return Source{}, fmt.Errorf("%s: %w", what, err)
	}
	src, lerr := l.Recover(e.env, m)
	if h5 {
		e.env.h5view, e.env.h5err = nil, nil
	}
	if err := e.agree(lerr, "recover "+what); err != nil {
		if e.cfg.NodeStore != nil && e.OtherShape(m) {
			// Ranks moved between nodes: read the files where they are.
			if rerr := e.recoverReshaped(m, what); rerr != nil {
				return Source{}, fmt.Errorf("%w; read where the files are: %w", err, rerr)
			}
			return Source{}, nil
		}
		return Source{}, err
	}
	return src, nil
}
