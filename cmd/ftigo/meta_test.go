package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/levels"
)

// TestVerifyInspectMetadata: verify and inspect check a run's metadata as
// a restart reads it. Each kind of damage to a manifest copy or the node
// table makes both exit 1 naming the file; the intact run exits 0.
func TestVerifyInspectMetadata(t *testing.T) {
	other := makeRun(t) // another run of the same job: its files are "foreign"
	primary := func(dir string) string { return filepath.Join(dir, "meta", "ckpt00000002.manifest") }
	replica := func(dir string) string {
		return filepath.Join(globalRunDir(t, dir), "manifests", "ckpt00000002.manifest")
	}
	topology := func(dir string) string { return filepath.Join(dir, "meta", "topology") }
	flip := func(name string) {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		b[len(b)/2] ^= 0x20
		require.NoError(t, os.WriteFile(name, b, 0o644))
	}
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, b, 0o644))
	}
	// copyManifest copies a manifest copy: its root and the parts beside it.
	copyManifest := func(from, to string) {
		copyFile(from, to)
		parts := strings.TrimSuffix(from, ".manifest") + levels.PartsSuffix
		ents, err := os.ReadDir(parts)
		require.NoError(t, err)
		for _, e := range ents {
			copyFile(filepath.Join(parts, e.Name()), filepath.Join(strings.TrimSuffix(to, ".manifest")+levels.PartsSuffix, e.Name()))
		}
	}
	cases := []struct {
		name   string
		dcp    bool                          // a run with three committed checkpoints (makeDCPRun)
		damage func(dir string) (bad string) // returns the file that must be named
		want   string                        // in the METADATA line
	}{
		{"intact", false, nil, ""},
		{"primary flipped", false, func(d string) string { flip(primary(d)); return primary(d) }, "damaged"},
		{"primary truncated", false, func(d string) string {
			require.NoError(t, os.Truncate(primary(d), 40))
			return primary(d)
		}, "damaged"},
		{"primary empty", false, func(d string) string { require.NoError(t, os.Truncate(primary(d), 0)); return primary(d) }, "damaged"},
		{"primary unreadable (a directory)", false, func(d string) string {
			require.NoError(t, os.Remove(primary(d)))
			require.NoError(t, os.Mkdir(primary(d), 0o755))
			return primary(d)
		}, "damaged"},
		{"replica flipped", false, func(d string) string { flip(replica(d)); return replica(d) }, "damaged"},
		{"replica missing", false, func(d string) string { require.NoError(t, os.Remove(replica(d))); return replica(d) }, "missing"},
		{"primary from another run", false, func(d string) string { copyManifest(primary(other), primary(d)); return primary(d) }, "another run's"},
		{"replica from another run", false, func(d string) string { copyManifest(replica(other), replica(d)); return replica(d) }, "another run's"},
		{"both copies gone", false, func(d string) string {
			require.NoError(t, os.Remove(primary(d)))
			require.NoError(t, os.Remove(replica(d)))
			return primary(d)
		}, "checkpoint metadata lost"},
		{"primaries swapped", true, func(d string) string {
			a, b := filepath.Join(d, "meta", "ckpt00000001.manifest"), filepath.Join(d, "meta", "ckpt00000002.manifest")
			ab, err := os.ReadFile(a)
			require.NoError(t, err)
			copyFile(b, a)
			require.NoError(t, os.WriteFile(b, ab, 0o644))
			return a
		}, "foreign"},
		{"replica of another checkpoint", true, func(d string) string {
			copyFile(filepath.Join(globalRunDir(t, d), "manifests", "ckpt00000003.manifest"), replica(d))
			return replica(d)
		}, "holds seq 3"},
		{"node table damaged", false, func(d string) string {
			require.NoError(t, os.WriteFile(topology(d), []byte("[topology]\n0 node0000\n"), 0o644))
			return topology(d)
		}, "damaged node table"},
		{"node table truncated", false, func(d string) string { require.NoError(t, os.Truncate(topology(d), 30)); return topology(d) }, "the node table lists"},
		{"node table of another run", false, func(d string) string {
			require.NoError(t, os.WriteFile(topology(d), []byte("[topology]\n0 = hostA\n1 = hostB\n2 = hostC\n3 = hostD\n"), 0o644))
			return topology(d)
		}, "another run's table"},
		{"node table unreadable", false, func(d string) string {
			require.NoError(t, os.Remove(topology(d)))
			require.NoError(t, os.Mkdir(topology(d), 0o755))
			return topology(d)
		}, "unreadable node table"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var dir string
			if tc.dcp {
				dir = makeDCPRun(t, 1)
			} else {
				dir = makeRun(t)
			}
			bad := ""
			if tc.damage != nil {
				bad = tc.damage(dir)
			}
			for _, cmd := range []string{"verify", "inspect"} {
				code, out, errs := ftigo(cmd, dir)
				assert.Contains(t, out, "checked: meta_dir "+filepath.Join(dir, "meta"), cmd)
				if bad == "" {
					assert.Equal(t, 0, code, "%s: %s%s", cmd, out, errs)
					assert.NotContains(t, out, "METADATA", cmd)
					continue
				}
				assert.Equal(t, 1, code, "%s: %s%s", cmd, out, errs)
				line := metadataLine(out, bad)
				assert.NotEmpty(t, line, "%s names %s:\n%s", cmd, bad, out)
				assert.Contains(t, line, tc.want, cmd)

				var res struct {
					OK       bool          `json:"ok"`
					Metadata []metaProblem `json:"metadata"`
				}
				code, out, _ = ftigo(cmd, "--json", dir)
				assert.Equal(t, 1, code, cmd)
				require.NoError(t, json.Unmarshal([]byte(out), &res), out)
				assert.False(t, res.OK, cmd)
				var paths []string
				for _, p := range res.Metadata {
					paths = append(paths, p.Path)
				}
				assert.Contains(t, paths, bad, cmd)
			}
		})
	}
}

// metadataLine returns the METADATA line of out naming path ("" if none).
func metadataLine(out, path string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "METADATA "+path+": ") {
			return l
		}
	}
	return ""
}

// TestVerifyConfigRedirect: a config.fti in the run directory redirects
// verify and inspect to the directories it names, and both say so.
func TestVerifyConfigRedirect(t *testing.T) {
	run := makeRun(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.fti")
	require.NoError(t, os.WriteFile(cfg, []byte("[basic]\nnode_size = 1\ngroup_size = 4\nckpt_dir = "+filepath.Join(run, "local")+
		"\nglbl_dir = "+filepath.Join(run, "global")+"\nmeta_dir = "+filepath.Join(run, "meta")+"\n[advanced]\nlocal_test = 1\n"), 0o644))
	for _, cmd := range []string{"verify", "inspect"} {
		code, out, errs := ftigo(cmd, dir)
		require.Equal(t, 0, code, out+errs)
		id := runIn(t, run)
		assert.True(t, strings.HasPrefix(out, "directories named by "+cfg+"\nrun "+id+" (named by meta_dir)\nchecked: meta_dir "+filepath.Join(run, "meta")+", glbl_dir "+globalRunDir(t, run)+" "), out)
		var res struct {
			Dirs runDirs `json:"dirs"`
		}
		code, out, _ = ftigo(cmd, dir, "--json")
		require.Equal(t, 0, code)
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		assert.Equal(t, cfg, res.Dirs.Config)
		assert.Equal(t, filepath.Join(run, "local"), res.Dirs.Local)
		assert.Len(t, res.Dirs.Nodes, 4)
	}
}
