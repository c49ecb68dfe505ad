package levels

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// TestL2L3MixedFileKinds: one L2 or L3 checkpoint whose ranks write
// files of every kind a level meets (an FTI-FF file with hashes, one
// written without hashes, an FTI-FF file with no variable, raw bytes
// with no digest, an empty raw file, raw bytes hashed by the writer)
// records the FTI-FF checksum only for the hashed FTI-FF files; after
// the loss of any one node every rank recovers its file bit for bit. The
// same when the checkpoint is committed at L1 and raised to L2 or L3.
func TestL2L3MixedFileKinds(t *testing.T) {
	tmp := t.TempDir()
	ff := func(r int, vars []fileformat.Var, opts ...fileformat.Option) []byte {
		p := path.Join(tmp, fmt.Sprintf("f%d", r))
		m, err := vfd.Sec2{}.Open(p, vfd.ReadWrite|vfd.OCreate)
		require.NoError(t, err)
		defer m.Close()
		_, _, err = fileformat.Write(m, fileformat.Meta{CkptID: 1, Rank: int32(r)}, vars, nil, opts...)
		require.NoError(t, err)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		return b
	}
	kinds := []struct {
		name  string
		ftiff bool // recorded with the FTI-FF checksum
		bytes func(r int) []byte
		known bool // the write returns the digest itself
	}{
		{"FTI-FF", true, func(r int) []byte {
			return ff(r, []fileformat.Var{{ID: 1, Name: "a", Type: fileformat.Uint8, Data: payload(r, 1, 7000)}})
		}, false},
		{"FTI-FF without hashes", false, func(r int) []byte {
			return ff(r, []fileformat.Var{{ID: 1, Name: "a", Type: fileformat.Uint8, Data: payload(r, 1, 5000)}}, fileformat.WithoutHash())
		}, false},
		{"FTI-FF with no variable", true, func(r int) []byte { return ff(r, nil) }, false},
		{"raw", false, func(r int) []byte { return payload(r, 1, 3333) }, false},
		{"empty raw", false, func(r int) []byte { return nil }, false},
		{"raw hashed by the writer", false, func(r int) []byte { return payload(r, 1, 4444) }, true},
	}
	for _, lvl := range []ID{L2, L3} {
		// Each group of 4 ranks gets 4 of the kinds, rotated, so that
		// every kind sits on every node of a run.
		for shift := range kinds {
			for _, raised := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/shift %d/raised %v", lvl, shift, raised), func(t *testing.T) {
					w := newFFWorld(t)
					kindOf := func(r int) int { return (r + shift) % len(kinds) }
					files := make([][]byte, 4)
					for r := range 4 {
						files[r] = kinds[kindOf(r)].bytes(r)
					}
					var m *Manifest
					require.NoError(t, w.run(func(e *Engine) error {
						r := e.env.Rank
						k := kinds[kindOf(r)]
						write := func(f vfd.File) (int64, Digest, bool, error) {
							if k.known {
								return writeBytes(files[r])(f)
							}
							_, err := f.WriteAt(files[r], 0)
							return int64(len(files[r])), Digest{}, false, err
						}
						at := lvl
						if raised {
							at = L1
						}
						mm, _, err := e.Checkpoint(1, at, write)
						if err == nil && raised {
							// raised to lvl after its L1 commit (async)
							priv, serr := e.env.Comm.Split(0, r)
							if serr != nil {
								return serr
							}
							defer priv.Close()
							mm, _, err = e.Raise(mm, lvl, priv)
						}
						if r == 0 {
							m = mm
						}
						return err
					}))
					require.Equal(t, lvl, m.Level)
					m = fullOf(t, m)
					for r := range 4 {
						d, ok := m.DataFile(r)
						require.True(t, ok)
						assert.Equal(t, kinds[kindOf(r)].ftiff, d.Attrs[AttrDigest] == DigestFTIFF, "rank %d (%s)", r, kinds[kindOf(r)].name)
					}
					dir := make([]map[string][]byte, 4)
					for n := range 4 {
						dir[n] = map[string][]byte{}
						p := path.Join(w.nodeDir(n), CheckpointDir(1))
						ents, err := os.ReadDir(p)
						require.NoError(t, err)
						for _, e := range ents {
							b, err := os.ReadFile(path.Join(p, e.Name()))
							require.NoError(t, err)
							dir[n][e.Name()] = b
						}
					}
					for lost := range 4 {
						for n := range 4 {
							p := path.Join(w.nodeDir(n), CheckpointDir(1))
							require.NoError(t, os.RemoveAll(p))
							require.NoError(t, os.MkdirAll(p, 0o755))
							if n == lost {
								continue
							}
							for name, b := range dir[n] {
								require.NoError(t, os.WriteFile(path.Join(p, name), b, 0o644))
							}
						}
						// Offline (ftigo rebuild) first, on a copy of the
						// damaged node directories, then online.
						if !raised {
							off := t.TempDir()
							for n := range 4 {
								require.NoError(t, os.CopyFS(path.Join(off, fmt.Sprintf("n%d", n)), os.DirFS(w.nodeDir(n))))
							}
							local := func(n int) Store { return Store{vfd.Sec2{}, path.Join(off, fmt.Sprintf("n%d", n))} }
							var rb OfflineRebuilder = Partner2{}
							if lvl == L3 {
								rb = RS3{}
							}
							_, err := rb.RebuildOffline(m, w.topo, local, partner.Options{BlockSize: 512})
							require.NoError(t, err, "offline, node %d lost", lost)
							for r, fs := range m.Files {
								for _, f := range fs {
									require.NoError(t, VerifyFile(local(w.topo.NodeOf(r)), f), "offline, node %d lost: rank %d %s", lost, r, f.Name)
								}
							}
						}
						ids, got, errs := w.recoverFiles()
						for r := range 4 {
							require.NoError(t, errs[r], "node %d lost: rank %d (%s)", lost, r, kinds[kindOf(r)].name)
							assert.Equal(t, int64(1), ids[r])
							assert.True(t, bytes.Equal(files[r], got[r]), "node %d lost: rank %d (%s)", lost, r, kinds[kindOf(r)].name)
						}
						for n := range 4 {
							for name, b := range dir[n] {
								got, err := os.ReadFile(path.Join(w.nodeDir(n), CheckpointDir(1), name))
								require.NoError(t, err, "node %d lost: %s on node %d restored", lost, name, n)
								assert.True(t, bytes.Equal(b, got), "node %d lost: %s on node %d bit for bit", lost, name, n)
							}
						}
					}
				})
			}
		}
	}
}
