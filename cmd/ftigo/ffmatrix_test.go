package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// snapshotRun returns every file under dir/local by path.
func snapshotRun(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	require.NoError(t, filepath.Walk(filepath.Join(dir, "local"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = b
		return err
	}))
	return files
}

// restoreRun writes files back under a fresh dir/local (what snapshotRun
// took of it), rooted at dir instead of from.
func restoreRun(t *testing.T, from, dir string, files map[string][]byte) map[string][]byte {
	t.Helper()
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local")))
	out := map[string][]byte{}
	for p, b := range files {
		q := filepath.Join(dir, strings.TrimPrefix(p, from))
		require.NoError(t, os.MkdirAll(filepath.Dir(q), 0o755))
		require.NoError(t, os.WriteFile(q, b, 0o644))
		out[q] = b
	}
	return out
}

// ffRegions returns an offset in each region of the FTI-FF file b
// (header, data, metadata, file block), or in the start, middle and end
// of a file of another kind (parity).
func ffRegions(b []byte) map[string]int64 {
	rd, err := fileformat.Open(vfd.BytesFile("x", b))
	if err != nil {
		n := int64(len(b))
		return map[string]int64{"first byte": 0, "middle": n / 2, "last byte": n - 1}
	}
	s := rd.Summary()
	metaOff := int64(fileformat.HeaderSize)
	for _, c := range s.Chunks {
		metaOff = max(metaOff, c.Fptr+c.ContainerSize)
	}
	return map[string]int64{
		"header":     9,
		"data":       int64(fileformat.HeaderSize) + (metaOff-int64(fileformat.HeaderSize))/2,
		"metadata":   metaOff + 3,
		"file block": s.FileSize - int64(fileformat.FBSize) + 40,
	}
}

// restartRun restarts the run in dir as makeRunAt wrote it and returns
// each rank's error, nil for a rank that recovered exactly the data of
// the last checkpoint.
func restartRun(t *testing.T, dir string) []error {
	t.Helper()
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, 4, true
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	errs := make([]error, 4)
	_ = comm.Run(4, func(c comm.Comm) error {
		r := c.Rank()
		errs[r] = func() error {
			rt, err := ckpt.Init(cfg, c)
			if err != nil {
				return err
			}
			defer rt.Close()
			if rt.Status() != ckpt.Restart {
				return fmt.Errorf("rank %d: status %v, want a restart", r, rt.Status())
			}
			var data []float64
			if err := ckpt.Protect(rt, 1, &data); err != nil {
				return err
			}
			if err := rt.Recover(); err != nil {
				return err
			}
			if len(data) != 5000+100*r {
				return fmt.Errorf("rank %d: %d values restored", r, len(data))
			}
			for i, v := range data {
				if v != float64(r*100000+i) {
					return fmt.Errorf("rank %d: value %d is %v", r, i, v)
				}
			}
			return nil
		}()
		return nil
	})
	return errs
}

// TestVerifyRebuildCorruptByteAndLostNode: in an L2 or L3 checkpoint of
// FTI-FF files (entries recording the FTI-FF checksum), a flipped byte in
// any region of any file, with one node lost as well, is reported by
// ftigo verify naming the file; ftigo rebuild then restores every file
// bit for bit when the redundancy allows it (L3 always; L2 unless the
// flipped file is the other copy of a rank of the lost node) and
// otherwise fails and leaves no file with other bytes than it had. A
// restart from the same damage restores every rank's values exactly when
// rebuild can, and otherwise fails on every rank (never starts fresh).
func TestVerifyRebuildCorruptByteAndLostNode(t *testing.T) {
	for _, lvl := range []int{2, 3} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			src := makeRunAt(t, 1, lvl)
			orig := snapshotRun(t, src)
			require.Len(t, orig, 8)
			names := make([]string, 0, len(orig))
			for p := range orig {
				names = append(names, strings.TrimPrefix(p, src))
			}
			dir := t.TempDir()
			require.NoError(t, os.CopyFS(filepath.Join(dir, "meta"), os.DirFS(filepath.Join(src, "meta"))))
			if _, err := os.Stat(filepath.Join(src, "global")); err == nil {
				require.NoError(t, os.CopyFS(filepath.Join(dir, "global"), os.DirFS(filepath.Join(src, "global"))))
			}
			node := func(name string) int {
				var n int
				i := strings.Index(name, "node")
				_, err := fmt.Sscanf(name[i:], "node%04d", &n)
				require.NoError(t, err)
				return n
			}
			for _, victim := range names {
				for region, off := range ffRegions(orig[src+victim]) {
					for lost := range 4 {
						if lost == node(victim) {
							continue
						}
						want := restoreRun(t, src, dir, orig)
						p := dir + victim
						b := bytes.Clone(want[p])
						b[off] ^= 0x20
						require.NoError(t, os.WriteFile(p, b, 0o644))
						require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", fmt.Sprintf("node%04d", lost))))
						what := fmt.Sprintf("%s byte %d (%s), node %d lost", victim, off, region, lost)
						code, out, _ := ftigo("verify", dir)
						require.Equal(t, 1, code, what)
						require.Contains(t, out, "FAIL "+p, what)
						// L2: the partner copy of rank r is on node r+1; a
						// rank is lost when its data and copy both are.
						base := filepath.Base(victim)
						var of int
						recoverable := true
						if lvl == 2 {
							if strings.HasPrefix(base, "data") {
								_, err := fmt.Sscanf(base, "data%06d.fti", &of)
								require.NoError(t, err)
								recoverable = lost != (of+1)%4
							} else {
								_, err := fmt.Sscanf(base, "partner%06d.fti", &of)
								require.NoError(t, err)
								recoverable = lost != of
							}
						}
						// The same damage, restarted from.
						rdir := t.TempDir()
						require.NoError(t, os.CopyFS(rdir, os.DirFS(dir)))
						rerrs := restartRun(t, rdir)
						for r, err := range rerrs {
							if recoverable {
								require.NoError(t, err, "%s: restart of rank %d", what, r)
							} else {
								require.Error(t, err, "%s: restart of rank %d", what, r)
								require.NotContains(t, err.Error(), "want a restart", what)
							}
						}
						code, out, errs := ftigo("rebuild", dir)
						if !recoverable {
							require.Equal(t, 1, code, what+"\n"+out+errs)
							for q, wb := range want {
								got, err := os.ReadFile(q)
								if err != nil {
									continue // lost, or removed as damaged
								}
								if q == p {
									wb = b
								}
								require.True(t, bytes.Equal(wb, got), "%s: %s changed by a failed rebuild", what, q)
							}
							continue
						}
						require.Equal(t, 0, code, what+"\n"+out+errs)
						require.Contains(t, out, "8/8 files verified", what)
						for q, wb := range want {
							got, err := os.ReadFile(q)
							require.NoError(t, err, what)
							require.True(t, bytes.Equal(wb, got), "%s: %s bit for bit", what, q)
						}
					}
				}
			}
		})
	}
}

// TestRebuildMixedManifest: an L2 run directory whose manifest records
// the FTI-FF checksum for the data files and the BLAKE3 of their bytes
// for the partner copies (or the reverse): verify passes, a flipped byte
// in any file is reported, and rebuild restores a lost node bit for bit.
func TestRebuildMixedManifest(t *testing.T) {
	for _, dataFTIFF := range []bool{true, false} {
		t.Run(fmt.Sprintf("data ftiff %v", dataFTIFF), func(t *testing.T) {
			dir := makeRunAt(t, 1, 2)
			orig := snapshotRun(t, dir)
			byName := map[string][]byte{}
			for p, b := range orig {
				byName[filepath.Base(p)] = b
			}
			ms, err := filepath.Glob(filepath.Join(dir, "meta", "*.manifest"))
			require.NoError(t, err)
			reps, err := filepath.Glob(filepath.Join(globalRunDir(t, dir), levels.ReplicaDir, "*.manifest"))
			require.NoError(t, err)
			require.Len(t, ms, 1)
			require.Len(t, reps, 1)
			scanned, err := levels.ScanManifests(levels.Store{Driver: vfd.Sec2{}, Dir: filepath.Join(dir, "meta")})
			require.NoError(t, err)
			require.Len(t, scanned, 1)
			m := scanned[0].M
			require.NotNil(t, m, "%v", scanned[0].Err)
			changed := 0
			for r := range m.Files {
				for i := range m.Files[r] {
					f := &m.Files[r][i]
					require.Equal(t, levels.DigestFTIFF, f.Attrs[levels.AttrDigest], "%s", f.Name)
					if (f.Role == levels.RoleData) == dataFTIFF {
						continue
					}
					b, ok := byName[filepath.Base(f.Name)]
					require.True(t, ok, f.Name)
					f.Attrs, f.Digest = nil, levels.Digest(blake3.Sum256(b))
					changed++
				}
			}
			require.Equal(t, 4, changed)
			require.NoError(t, levels.RewriteManifest(levels.Store{Driver: vfd.Sec2{}, Dir: filepath.Join(dir, "meta")},
				levels.Store{Driver: vfd.Sec2{}, Dir: globalRunDir(t, dir)}, m))

			code, out, errs := ftigo("verify", dir)
			require.Equal(t, 0, code, out+errs)
			require.Contains(t, out, "8/8 files verified")
			for _, lost := range []int{1, 2} {
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", fmt.Sprintf("node%04d", lost))))
				code, out, errs = ftigo("rebuild", dir)
				require.Equal(t, 0, code, out+errs)
				require.Contains(t, out, "8/8 files verified")
				for p, want := range orig {
					got, err := os.ReadFile(p)
					require.NoError(t, err, "node %d lost: %s", lost, p)
					require.True(t, bytes.Equal(want, got), "node %d lost: %s bit for bit", lost, p)
				}
			}
			for p, want := range orig {
				b := bytes.Clone(want)
				b[len(b)/2] ^= 0x01
				require.NoError(t, os.WriteFile(p, b, 0o644))
				code, out, _ = ftigo("verify", dir)
				require.Equal(t, 1, code, p)
				require.Contains(t, out, "FAIL "+p)
				require.NoError(t, os.WriteFile(p, want, 0o644))
			}
		})
	}
}
