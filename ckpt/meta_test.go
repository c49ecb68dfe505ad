package ckpt

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestDamagedManifests: every way of damaging a checkpoint's manifest
// (a flipped byte, truncated, emptied, deleted, swapped with another
// checkpoint's) in one copy (primary in meta_dir, replica in
// glbl_dir/manifests) costs nothing: the restart uses the newest
// checkpoint, repairs the copy (keeping the damaged bytes as .broken),
// rank 0 logs a warning naming the file, and nothing is printed on
// standard error. In both copies the metadata is lost: Init fails on
// every rank with ErrMetadataLost naming the damaged copies and the
// surviving data files, prints nothing, and changes nothing on disk —
// with or without an older checkpoint to fall back to.
func TestDamagedManifests(t *testing.T) {
	const n = 4
	for _, older := range []bool{false, true} {
		for _, how := range []string{"flip", "truncate", "empty", "delete", "swap"} {
			for _, target := range []string{"primary", "replica", "both"} {
				if how == "swap" && !older {
					continue // one manifest: nothing to swap with
				}
				t.Run(fmt.Sprintf("older=%v/%s/%s", older, how, target), func(t *testing.T) {
					root := t.TempDir()
					cfg := testConfig(root, 1)
					cfg.GroupSize = 2
					require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
						x := []int64{int64(r.c.Rank()), 1}
						if err := Protect(r, 0, &x); err != nil {
							return err
						}
						if older {
							if err := r.Checkpoint(1, 4); err != nil {
								return err
							}
						}
						x[1] = 2
						return r.Checkpoint(2, 1)
					}))
					newest := uint64(1)
					if older {
						newest = 2
					}
					primary := func(seq uint64) string { return filepath.Join(root, "meta", levels.ManifestName(seq)) }
					replica := func(seq uint64) string { return filepath.Join(cfg.GlobalDir(runOf(t, cfg)), levels.ReplicaName(seq)) }
					var paths []string
					if target != "replica" {
						paths = append(paths, primary(newest))
					}
					if target != "primary" {
						paths = append(paths, replica(newest))
					}
					orig, err := vfd.ReadFile(vfd.Sec2{}, primary(newest))
					require.NoError(t, err)
					damaged := map[string][]byte{}
					for _, p := range paths {
						b := bytes.Clone(orig)
						switch how {
						case "flip":
							b[len(b)/2] ^= 0x04
						case "truncate":
							b = b[:len(b)/2]
						case "empty":
							b = []byte{}
						case "swap":
							other := strings.Replace(p, levels.ManifestName(newest), levels.ManifestName(1), 1)
							b, err = vfd.ReadFile(vfd.Sec2{}, other)
							require.NoError(t, err)
							require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, other, orig))
							damaged[other] = orig
						}
						if how == "delete" {
							require.NoError(t, vfd.Sec2{}.Remove(p))
							continue
						}
						require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, p, b))
						damaged[p] = b
					}
					before := tree(t, root)
					core, logs := observer.New(zapcore.WarnLevel)
					var stderr bytes.Buffer
					opts := []Option{WithLogger(zap.New(core)), WithWarnings(&stderr)}

					if target == "both" {
						errs := make([]error, n)
						require.NoError(t, comm.Run(n, func(c comm.Comm) error {
							r, err := Init(cfg, c, opts...)
							errs[c.Rank()] = err
							if r != nil {
								return errors.Join(fmt.Errorf("Init succeeded: %v", r.Status()), r.Close())
							}
							return nil
						}))
						for rank, err := range errs {
							require.ErrorIs(t, err, ErrMetadataLost, "rank %d", rank)
							assert.Equal(t, errs[0].Error(), err.Error(), "identical on every rank")
							for _, p := range paths {
								assert.Contains(t, err.Error(), p)
							}
							if how != "swap" {
								assert.Contains(t, err.Error(), fmt.Sprintf("%d of its files survive, such as %s", n,
									filepath.Join(cfg.NodeDir(0, runOf(t, cfg)), levels.CheckpointDir(newest), "data000000.fti")))
							}
							if how == "delete" {
								assert.Contains(t, err.Error(), "both copies are missing ("+primary(newest)+", "+replica(newest)+")")
							}
						}
						assert.Empty(t, stderr.String())
						assert.Equal(t, before, tree(t, root), "a refused restart changes nothing")
						return
					}

					require.NoError(t, comm.Run(n, func(c comm.Comm) error {
						r, err := Init(cfg, c, opts...)
						if err != nil {
							return err
						}
						defer r.Close()
						if r.Status() != Restart || r.Recovered().ID != 2 || r.Recovered().Seq != newest {
							return fmt.Errorf("status %v from %+v", r.Status(), r.Recovered())
						}
						var x []int64
						if err := Protect(r, 0, &x); err != nil {
							return err
						}
						if err := r.Recover(); err != nil {
							return err
						}
						if len(x) != 2 || x[0] != int64(c.Rank()) || x[1] != 2 {
							return fmt.Errorf("rank %d recovered %v", c.Rank(), x)
						}
						return nil
					}))
					assert.Empty(t, stderr.String(), "a repaired copy is no fallback")
					for _, seq := range []uint64{1, newest} {
						want, err := vfd.ReadFile(vfd.Sec2{}, primary(seq))
						require.NoError(t, err)
						got, err := vfd.ReadFile(vfd.Sec2{}, replica(seq))
						require.NoError(t, err)
						assert.Equal(t, want, got, "both copies of %d agree", seq)
						m, err := levels.ParseManifest("m", got)
						require.NoError(t, err)
						assert.Equal(t, seq, m.Seq)
					}
					for p, b := range damaged {
						kept, err := vfd.ReadFile(vfd.Sec2{}, p+levels.BrokenSuffix)
						require.NoError(t, err)
						assert.Equal(t, b, kept, "damaged bytes of %s kept", p)
						w := logs.FilterMessageSnippet(p).All()
						require.Len(t, w, 1, "one warning about %s: %v", p, logs.All())
						assert.Equal(t, int64(0), w[0].ContextMap()["rank"])
					}
					if how == "delete" {
						assert.Equal(t, 1, logs.FilterMessageSnippet("manifest copy missing, rewritten: "+paths[0]).Len())
					}
				})
			}
		}
	}
}

// TestFallbackWarnsOnStandardError: when the newest checkpoint is
// unrecoverable (a data file missing or corrupt beyond redundancy) the
// restart falls back to an older one only with a warning that rank 0
// prints once on standard error (and logs) naming what was skipped and
// why, in words: "missing" for an absent file, "corrupt" for bad bytes.
func TestFallbackWarnsOnStandardError(t *testing.T) {
	const n = 4
	for _, how := range []string{"erase", "corrupt"} {
		t.Run(how, func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, 1)
			cfg.GroupSize = 2
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				x := []int64{int64(r.c.Rank()), 1}
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				if err := r.Checkpoint(1, 4); err != nil {
					return err
				}
				x[1] = 2
				return r.Checkpoint(2, 2)
			}))
			// Nodes 0 and 1 form a group: rank 1's file and its copy (on node 0) are gone.
			run := runOf(t, cfg)
			partner := filepath.Join(cfg.NodeDir(0, run), "ckpt00000002/partner000001.fti")
			for _, p := range []string{filepath.Join(cfg.NodeDir(1, run), "ckpt00000002/data000001.fti"), partner} {
				if how == "erase" {
					require.NoError(t, vfd.Sec2{}.Remove(p))
				} else {
					corruptFile(t, p)
				}
			}
			core, logs := observer.New(zapcore.WarnLevel)
			var stderr bytes.Buffer
			require.NoError(t, world(t, n, cfg, []Option{WithLogger(zap.New(core)), WithWarnings(&stderr)}, func(r *Runtime) error {
				if r.Status() != Restart || r.Recovered().ID != 1 {
					return fmt.Errorf("status %v from %+v", r.Status(), r.Recovered())
				}
				return nil
			}))
			out := stderr.String()
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			require.Len(t, lines, 2, "%q", out)
			assert.True(t, strings.HasPrefix(lines[0], "ftigo: warning: checkpoint 2 (L2, ckpt00000002) is unrecoverable and was skipped: "), lines[0])
			assert.Equal(t, "ftigo: warning: restarting from the older checkpoint 1 (L4, ckpt00000001)", lines[1])
			word, not := "missing", "corrupt"
			if how == "corrupt" {
				word, not = not, word
			}
			p := partner
			assert.Regexp(t, regexp.QuoteMeta(word)+` (file of rank 1|`+regexp.QuoteMeta(p)+` \(rank 1\))`, lines[0])
			assert.Equal(t, 1, strings.Count(lines[0], p), "the path once")
			assert.NotContains(t, lines[0], not+" ")
			// Logged once (rank 0), not by every rank.
			assert.Equal(t, 1, logs.FilterMessage("checkpoint not recoverable, trying an older one").Len())
			assert.Equal(t, 1, logs.FilterMessageSnippet("restarting from the older checkpoint 1 (L4)").Len())
		})
	}
}

// TestManifestCopyFromAnotherRun: one manifest copy replaced by the copy
// of the same name from another run (valid, same sequence number, other
// files and digests) costs nothing either. It records the other run, so
// start-up takes it as foreign: the restart uses this run's copy,
// restores this run's data bit for bit, and keeps the other run's copy as
// .broken. (Between manifests without run ids, which start-up cannot
// tell apart, recovery decides: levels'
// TestForeignManifestKeepsTheOtherCopysFiles.)
func TestManifestCopyFromAnotherRun(t *testing.T) {
	const n = 2
	cfg := testConfig("/", 1)
	cfg.GroupSize = 2
	commit := func(core *vfd.Core, v int) {
		require.NoError(t, comm.Run(n, func(c comm.Comm) error {
			r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
			if err != nil {
				return err
			}
			defer r.Close()
			x, ver := version(c.Rank(), v), []int64{int64(v)}
			return errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Checkpoint(int64(v), 2))
		}))
	}
	for _, which := range []string{"primary", "replica"} {
		t.Run(which, func(t *testing.T) {
			mine, other := vfd.NewCore(), vfd.NewCore()
			commit(mine, 1)
			commit(other, 5)
			name, from := filepath.Join(cfg.MetaDir, levels.ManifestName(1)), ""
			if which == "replica" {
				name = filepath.Join(cfg.GlobalDir(runOf(t, cfg, mine)), levels.ReplicaName(1))
				from = filepath.Join(cfg.GlobalDir(runOf(t, cfg, other)), levels.ReplicaName(1))
			}
			foreign, err := vfd.ReadFileLimit(other, cmp.Or(from, name), levels.MaxManifestSize)
			require.NoError(t, err)
			require.NoError(t, vfd.WriteFileAtomic(mine, name, foreign))

			got, err := recoverAll(t, n, cfg, mine)
			require.NoError(t, err, "the other copy is this run's: the restart must use it")
			assert.Equal(t, []int{1, 1}, got)
			kept, err := vfd.ReadFileLimit(mine, name+levels.BrokenSuffix, levels.MaxManifestSize)
			require.NoError(t, err, "the other run's copy is kept as .broken")
			assert.Equal(t, foreign, kept)
		})
	}
}
