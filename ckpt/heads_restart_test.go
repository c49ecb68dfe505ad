package ckpt

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestHeadsReplacementNodes: a job with heads checkpoints at L2 or L3,
// raised by the heads; then nodes are replaced by fresh ones (their
// node-local directories deleted; in the named cases the nodes are hosts
// given by WithNodeID and the replacement nodes have new host names,
// which take the lost nodes' places in the saved node table) and the job
// is relaunched with heads:
// the application ranks recover the newest checkpoint bit for bit (L2
// from the partner copies, L3 rebuilding the lost nodes' files from the
// parity of the group), and the heads go on raising the relaunched
// run's checkpoints, writing on the replacement nodes: once other nodes
// are lost, the next relaunch recovers the checkpoint the heads raised
// after the first loss, from what they wrote on the replacement nodes.
func TestHeadsReplacementNodes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		lvl           int
		group, parity int
		lost          [2][]int // nodes replaced before relaunch 1, then 2
		named         bool
	}{
		// Partners are in the group (nodes 0-1, 2-3): node 1's copy of
		// node 0's data was made on the replacement node 1.
		{"L2", 2, 2, 0, [2][]int{{1}, {0}}, false},
		{"L2/two-groups", 2, 2, 0, [2][]int{{1, 2}, {0, 3}}, false},
		// l3_parity = group_size = 2: any node of each group of 2.
		{"L3/groups-of-2", 3, 2, 0, [2][]int{{0, 3}, {1, 2}}, false},
		// One group of 4, l3_parity = 2: any 2 of its nodes.
		{"L3/group-of-4", 3, 4, 2, [2][]int{{1, 3}, {0, 2}}, false},
		{"L2/named", 2, 2, 0, [2][]int{{1, 2}, {0, 3}}, true},
		{"L3/group-of-4/named", 3, 4, 2, [2][]int{{1, 3}, {0, 2}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core := vfd.NewCore()
			cfg := headConfig(tc.lvl)
			cfg.GroupSize, cfg.L3Parity = tc.group, tc.parity
			lvl := levels.ID(tc.lvl)
			// hosts are the nodes' names (named cases).
			hosts := []string{"alpha", "beta", "gamma", "delta"}
			var opts []Option
			if tc.named {
				cfg.LocalTest = false
				opts = append(opts, WithNodeID(func(rank int) string { return hosts[rank/2] }))
			}
			// checkpoint takes checkpoint v at lvl and checks the heads
			// raised it.
			checkpoint := func(r *Runtime, me, v int, x *[]uint64, ver []int64) error {
				*x, ver[0] = version(me, v), int64(v)
				if err := errors.Join(r.Checkpoint(int64(v), tc.lvl), r.CheckpointWait()); err != nil {
					return fmt.Errorf("rank %d: checkpoint %d: %w", me, v, err)
				}
				if r.last.ID != int64(v) || r.last.Level != lvl {
					return fmt.Errorf("rank %d: checkpoint %d at %v, want %d at %v", me, r.last.ID, r.last.Level, v, lvl)
				}
				(*x)[0] = 0xdead // the heads raise the committed file
				return nil
			}
			headJob(t, cfg, core, func(r *Runtime, me int) error {
				defer r.Close()
				var x []uint64
				ver := []int64{0}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
					return err
				}
				for v := 1; v <= 2; v++ {
					if err := checkpoint(r, me, v, &x, ver); err != nil {
						return err
					}
				}
				return nil
			}, opts...)
			for relaunch, want := range []int{2, 3} {
				hosts = slices.Clone(hosts)
				for _, n := range tc.lost[relaunch] {
					eraseNode(t, core, cfg, n)
					hosts[n] = fmt.Sprintf("new%d-%s", relaunch+1, hosts[n])
				}
				got := make([]int, 4)
				headJob(t, cfg, core, func(r *Runtime, me int) error {
					defer r.Close()
					var x []uint64
					ver := []int64{0}
					if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
						return err
					}
					if n := r.Topology().NodeOf(me); n != me {
						return fmt.Errorf("rank %d: on node %d, want %d (the replacement takes the lost node's place)", me, n, me)
					}
					if m := r.recoveredManifest(); m == nil || m.ID != int64(want) || m.Level != lvl {
						return fmt.Errorf("rank %d: restarted from %v, want checkpoint %d at %v", me, m, want, lvl)
					}
					if err := r.Recover(); err != nil {
						return err
					}
					if !assert.ObjectsAreEqual(version(me, want), x) || ver[0] != int64(want) {
						return fmt.Errorf("rank %d: data is not exactly version %d", me, want)
					}
					got[me] = int(ver[0])
					// The heads raise the relaunched run's checkpoints.
					return checkpoint(r, me, want+1, &x, ver)
				}, opts...)
				require.Equal(t, []int{want, want, want, want}, got, "relaunch %d", relaunch+1)
				// The replacement nodes hold the new checkpoint's files
				// again, the level's own among them.
				for _, n := range tc.lost[relaunch] {
					files := nodeFiles(t, core, cfg, n)
					assert.Contains(t, files, fmt.Sprintf("ckpt%08d", want+1), "replacement node %d", n)
					assert.Contains(t, files, roleWord[tc.lvl], "replacement node %d", n)
				}
				if tc.named {
					b, err := vfd.ReadFile(core, path.Join(cfg.MetaDir, topologyFile))
					require.NoError(t, err)
					for _, h := range hosts {
						assert.Contains(t, string(b), h, "saved node table")
					}
				}
			}
		})
	}
}

// nodeFiles lists the paths under node n's local directory, one a line.
func nodeFiles(t *testing.T, d vfd.Driver, cfg Config, n int) string {
	t.Helper()
	return nodeFilesAt(t, d, path.Join(cfg.CkptDir, fmt.Sprintf("node%04d", n)))
}

// nodeFilesAt lists the paths under dir, one a line.
func nodeFilesAt(t *testing.T, d vfd.Driver, dir string) string {
	t.Helper()
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := d.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			p := path.Join(dir, e.Name())
			if e.IsDir() {
				walk(p)
			} else {
				out = append(out, p)
			}
		}
	}
	walk(dir)
	return strings.Join(out, "\n")
}

// TestHeadsRestartWithoutHeadsBefore: a job of 4 ranks without heads
// checkpoints at L2; node 1 is replaced and the job is relaunched with
// heads (8 ranks, the same 4 application ranks, one per node): it
// recovers bit for bit from the partner copy and its heads raise its
// next checkpoint.
func TestHeadsRestartWithoutHeadsBefore(t *testing.T) {
	core := vfd.NewCore()
	cfg := headConfig(2)
	plain := cfg
	plain.Head, plain.NodeSize = false, 1
	commitVersion1(t, 4, plain, core, 2)
	eraseNode(t, core, cfg, 1)
	got := make([]int64, 4)
	headJob(t, cfg, core, func(r *Runtime, me int) error {
		defer r.Close()
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover()); err != nil {
			return err
		}
		if !assert.ObjectsAreEqual(version(me, 1), x) {
			return fmt.Errorf("rank %d: data is not exactly version 1", me)
		}
		got[me] = ver[0]
		x, ver[0] = version(me, 2), 2
		if err := errors.Join(r.Checkpoint(2, 2), r.CheckpointWait()); err != nil {
			return err
		}
		if r.last.ID != 2 || r.last.Level != levels.L2 {
			return fmt.Errorf("rank %d: checkpoint %d at %v, want 2 at L2", me, r.last.ID, r.last.Level)
		}
		return nil
	})
	assert.Equal(t, []int64{1, 1, 1, 1}, got)
	assert.Contains(t, nodeFiles(t, core, cfg, 1), path.Join("ckpt00000002", "partner"))
}

// TestHeadsCloseKeepsSuperseded: a job with heads that ends with Close
// after the heads raised its last checkpoint keeps the checkpoint that
// one superseded (Close is local: the application ranks never adopted
// the raise, whose retention is collective); the next run removes it
// when it adopts its first raised checkpoint, as the package documents.
func TestHeadsCloseKeepsSuperseded(t *testing.T) {
	core := vfd.NewCore()
	cfg := headConfig(2)
	run := func(ids ...int64) {
		headJob(t, cfg, core, func(r *Runtime, me int) error {
			defer r.Close()
			x, ver := version(me, 1), []int64{1}
			if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
				return err
			}
			for _, id := range ids {
				if err := errors.Join(r.Checkpoint(id, 2), r.CheckpointWait()); err != nil {
					return err
				}
			}
			return nil
		})
	}
	manifests := func() []string {
		ents, err := core.ReadDir(cfg.MetaDir)
		require.NoError(t, err)
		var out []string
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".manifest") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	run(1, 2)
	assert.Equal(t, []string{"ckpt00000001.manifest", "ckpt00000002.manifest"}, manifests())
	run(3)
	assert.Equal(t, []string{"ckpt00000001.manifest", "ckpt00000002.manifest", "ckpt00000003.manifest"}, manifests())
	run(4, 5) // Checkpoint(5) adopts checkpoint 4 as the heads raised it
	assert.Equal(t, []string{"ckpt00000004.manifest", "ckpt00000005.manifest"}, manifests())
	for n := range 4 {
		files := nodeFiles(t, core, cfg, n)
		for _, id := range []string{"ckpt00000001", "ckpt00000002", "ckpt00000003"} {
			assert.NotContains(t, files, id, "node %d", n)
		}
	}
}

// TestHeadsReplacementHostFirst: the replacement of a lost host has a
// name that sorts first, so the relaunch with heads puts application
// rank 0 (and node 2's head) on it, and every application rank on
// another host than before: the replacement takes the lost node's place
// (node 2's directory), each rank's data comes to it from the node that
// holds it (rank 2's from its partner copy), bit for bit, and the heads
// raise the next checkpoint where the ranks now are: after node 0 is
// lost too, the next relaunch recovers it.
func TestHeadsReplacementHostFirst(t *testing.T) {
	core := vfd.NewCore()
	cfg := headConfig(2)
	cfg.LocalTest = false
	dirs := map[string]string{"a": "node0000", "b": "node0001", "c": "node0002", "d": "node0003", "e": "node0002"}
	job := func(hosts []string, fn func(r *Runtime, me int) error) error {
		return comm.Run(8, func(c comm.Comm) error {
			local := nodeLocal{Driver: core, root: cfg.CkptDir, own: dirs[hosts[c.Rank()]]}
			r, err := Init(cfg, c, WithDrivers(local, core, core), WithLogger(zap.NewNop()), WithNodeID(func(r int) string { return hosts[r] }))
			if c.Rank()%2 == 0 {
				if !errors.Is(err, ErrHead) {
					return fmt.Errorf("head %d: Init returned %v, want ErrHead", c.Rank(), err)
				}
				return nil
			}
			if err != nil {
				return err
			}
			defer r.Close()
			return fn(r, r.Comm().Rank())
		}, comm.WithTimeout(20*time.Second))
	}
	require.NoError(t, job([]string{"a", "a", "b", "b", "c", "c", "d", "d"}, func(r *Runtime, me int) error {
		x, ver := version(me, 1), []int64{1}
		return errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Checkpoint(1, 2), r.CheckpointWait())
	}))
	eraseNode(t, core, cfg, 2)
	require.NoError(t, job([]string{"e", "e", "a", "a", "b", "b", "d", "d"}, func(r *Runtime, me int) error {
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover()); err != nil {
			return fmt.Errorf("rank %d node %d: %w", me, r.Topology().NodeOf(me), err)
		}
		if fmt.Sprint(x) != fmt.Sprint(version(me, 1)) {
			return fmt.Errorf("rank %d: bad data", me)
		}
		x, ver[0] = version(me, 2), 2
		if err := errors.Join(r.Checkpoint(2, 2), r.CheckpointWait()); err != nil {
			return err
		}
		if r.last.Level != 2 {
			return fmt.Errorf("rank %d: level %v", me, r.last.Level)
		}
		if want := []int{2, 0, 1, 3}[me]; r.Topology().NodeOf(me) != want {
			return fmt.Errorf("rank %d on node %d, want %d", me, r.Topology().NodeOf(me), want)
		}
		return nil
	}))
	eraseNode(t, core, cfg, 0)
	require.NoError(t, job([]string{"e", "e", "a", "a", "b", "b", "d", "d"}, func(r *Runtime, me int) error {
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover()); err != nil {
			return fmt.Errorf("rank %d node %d: %w", me, r.Topology().NodeOf(me), err)
		}
		if fmt.Sprint(x) != fmt.Sprint(version(me, 2)) || ver[0] != 2 {
			return fmt.Errorf("rank %d: bad data", me)
		}
		return nil
	}))
}
