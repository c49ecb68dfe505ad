package ckpt

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestReshapeL2L3LostNodeAndFlippedByte: a checkpoint of 4 ranks at L2 or
// L3 (FTI-FF checksums recorded) loses node 1 and has a data byte of
// rank 3 flipped; a restart on 3 or 6 ranks recovers every element bit
// for bit (rank 1's data from its copy or rebuilt from parity, rank 3's
// from its copy on node 0 or rebuilt from parity).
func TestReshapeL2L3LostNodeAndFlippedByte(t *testing.T) {
	for _, lvl := range []int{2, 3} {
		for _, m := range []int{3, 6} {
			t.Run(fmt.Sprintf("L%d/4-to-%d", lvl, m), func(t *testing.T) {
				root := t.TempDir()
				cfg := testConfig(root, 1)
				cfg.GroupSize = 4
				require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
					if _, _, _, err := reshapeWriter(r, 2); err != nil {
						return err
					}
					return r.Checkpoint(7, lvl)
				}))
				require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(cfg.NodeDir(1, runOf(t, cfg)))))
				files, err := filepath.Glob(filepath.Join(cfg.NodeDir(3, runOf(t, cfg)), "ckpt*", "data*.fti"))
				require.NoError(t, err)
				require.Len(t, files, 1)
				require.NoError(t, flipData(files[0], 1))
				cfg.GroupSize = 1
				require.NoError(t, world(t, m, cfg, nil, func(r *Runtime) error {
					return reshapeReader(r, 2, 4, false)
				}))
			})
		}
	}
}
