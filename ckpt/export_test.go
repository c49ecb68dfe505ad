package ckpt

import (
	"os"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/partner"
)

// Test hooks: what ckpt's tests reach that the exported API does not show.

// WithLevels registers level implementations after the built-in ones.
func WithLevels(ls ...levels.Level) Option { return withLevels(ls...) }

// Topology returns the run's topology (nil for a nil runtime).
func (r *Runtime) Topology() *partner.Topology {
	if r == nil {
		return nil
	}
	return r.topo
}

// recoveredManifest returns the manifest of the checkpoint this run
// restarted from (nil on a fresh run and for a nil runtime).
func (r *Runtime) recoveredManifest() *levels.Manifest {
	if r == nil {
		return nil
	}
	return r.from
}

// WithSignals makes the runtime read its stop signals from ch instead of
// catching them from the process.
func WithSignals(ch chan os.Signal) Option { return func(o *options) { o.signals = ch } }

// WithGetenv sets how the runtime reads the environment.
func WithGetenv(f func(string) string) Option { return func(o *options) { o.getenv = f } }
