package ckpt

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
)

// TestCompressionRatioInManifest: a compressed checkpoint's manifest
// holds the ranks' summed logical and stored bytes (as each rank's file
// records them), rank 0's info line shows their ratio, and a dCP
// layer's counts are its dirty blocks. An uncompressed run's manifest
// has no such field and its line no note.
func TestCompressionRatioInManifest(t *testing.T) {
	for _, comp := range []bool{true, false} {
		t.Run(fmt.Sprintf("zstd=%v", comp), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 2)
			cfg.EnableDCP, cfg.DCPBlockSize, cfg.DCPStackSize = true, 4096, 10
			if comp {
				cfg.Compression = fileformat.CodecZstd
			}
			obs, logs := observer.New(zapcore.InfoLevel)
			var mu sync.Mutex
			var logical, stored int64
			var ms [2]*levels.Manifest
			require.NoError(t, world(t, 4, cfg, []Option{WithLogger(zap.New(obs))}, func(r *Runtime) error {
				s := makeCompState(r.c.Rank(), 1)
				if err := s.protect(r); err != nil {
					return err
				}
				if err := r.Checkpoint(1, 1); err != nil {
					return err
				}
				var l, st int64
				for _, id := range r.order {
					info, err := r.StoredInfo(id)
					if err != nil {
						return err
					}
					l, st = l+info.Size, st+info.Stored
				}
				ms0 := r.last
				s.Noise[5] ^= 1 // one block of 4 KiB changes
				if err := r.Checkpoint(2, 5); err != nil {
					return err
				}
				mu.Lock()
				logical, stored = logical+l, stored+st
				ms[0], ms[1] = ms0, r.last
				mu.Unlock()
				return nil
			}))
			lines := logs.FilterMessageSnippet("Ckpt. ID").All()
			require.Len(t, lines, 2)
			if !comp {
				assert.Nil(t, ms[0].Compressed)
				assert.Nil(t, ms[1].Compressed)
				for _, l := range lines {
					assert.NotContains(t, l.Message, "compressed")
				}
				return
			}
			require.NotNil(t, ms[0].Compressed)
			assert.Equal(t, levels.Compressed{Logical: logical, Stored: stored}, *ms[0].Compressed)
			assert.Less(t, stored, logical)
			assert.Contains(t, lines[0].Message, fmt.Sprintf(", compressed %.1fx", float64(logical)/float64(stored)))
			assert.Equal(t, ms[0].Compressed.Ratio(), lines[0].ContextMap()["compression-ratio"])
			// The layer wrote one noise block per rank, stored raw.
			require.NotNil(t, ms[1].DCP)
			require.NotNil(t, ms[1].Compressed)
			assert.Equal(t, levels.Compressed{Logical: ms[1].DCP.Written, Stored: ms[1].DCP.Written}, *ms[1].Compressed)
			assert.Equal(t, int64(4*4096), ms[1].DCP.Written)
			assert.Contains(t, lines[1].Message, ", compressed 1.0x")
			// What was written reads back from storage (the root).
			raw, err := os.ReadFile(filepath.Join(cfg.MetaDir, levels.ManifestName(ms[0].Seq)))
			require.NoError(t, err)
			back, err := levels.ParseManifest("m", raw)
			require.NoError(t, err)
			assert.Equal(t, ms[0].Compressed, back.Compressed)
		})
	}
}
