package ckpt

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestKeepLastAfterRestoringL2L3: an L2 or L3 checkpoint of FTI-FF files
// (entries recording the FTI-FF checksum) loses a node and has a data
// byte flipped on another (L3: within its tolerance; L2: a rank whose
// copy survives), also with a rank whose variables are all empty on the
// lost node; the restart restores the data bit for bit (from the
// copies, or rebuilt from parity, and from memory when the image limit
// allows), Finalize with keep_last_ckpt flushes what it restored to L4,
// and after every node-local directory is erased the next run restarts
// from that L4 copy bit for bit.
func TestKeepLastAfterRestoringL2L3(t *testing.T) {
	for _, lvl := range []int{2, 3} {
		for _, tc := range []struct {
			image      bool
			lost, flip int
			emptyRank  int // a rank that protects only empty variables (-1: none)
		}{{false, 1, 3, -1}, {true, 1, 3, -1}, {true, 2, 0, 2}, {false, 2, 0, 2}} {
			image := tc.image
			size := func(r int) int {
				if r == tc.emptyRank {
					return 0
				}
				return 300 + r
			}
			t.Run(fmt.Sprintf("L%d image %v lost %d flip %d empty %d", lvl, image, tc.lost, tc.flip, tc.emptyRank), func(t *testing.T) {
				const n = 4
				root := t.TempDir()
				cfg := testConfig(root, 1)
				cfg.GroupSize, cfg.KeepLastCkpt = 4, true
				var opts []Option
				if !image {
					opts = []Option{WithRestartImage(0)}
				}
				require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
					s := makeState(r.c.Rank(), 1, size(r.c.Rank()))
					if err := s.protect(r); err != nil {
						return err
					}
					if err := r.Checkpoint(1, lvl); err != nil {
						return err
					}
					// The entries record the FTI-FF checksum.
					m := r.eng.Committed()[0]
					if f, _ := m.DataFile(r.c.Rank()); f.Attrs[levels.AttrDigest] != levels.DigestFTIFF {
						return fmt.Errorf("rank %d: data entry digest kind %q", r.c.Rank(), f.Attrs[levels.AttrDigest])
					}
					return nil // no Finalize
				}))
				require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(cfg.NodeDir(tc.lost, runOf(t, cfg)))))
				// The flipped rank's copy is on the next node, not lost.
				files, err := filepath.Glob(filepath.Join(cfg.NodeDir(tc.flip, runOf(t, cfg)), "ckpt*", "data*.fti"))
				require.NoError(t, err)
				require.Len(t, files, 1)
				require.NoError(t, flipData(files[0], 2))
				check := func(r *Runtime, status Status, level levels.ID) error {
					if m := r.recoveredManifest(); r.Status() != status || m == nil || m.ID != 1 || m.Level != level {
						return fmt.Errorf("rank %d: status %v from %+v", r.c.Rank(), r.Status(), r.Recovered())
					}
					s := &state{Map: &mapVar{}}
					if err := s.protect(r); err != nil {
						return err
					}
					if err := r.Recover(); err != nil {
						return err
					}
					if want := makeState(r.c.Rank(), 1, size(r.c.Rank())); !assert.ObjectsAreEqual(want, s) {
						return fmt.Errorf("rank %d: data differs", r.c.Rank())
					}
					return r.Finalize()
				}
				require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
					return check(r, Restart, levels.ID(lvl))
				}))
				require.NoError(t, vfd.Sec2{}.RemoveAll(cfg.CkptDir))
				require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
					return check(r, RestartKept, levels.L4)
				}))
			})
		}
	}
}
