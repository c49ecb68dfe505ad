package levels

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestOpenSyncsEachDirOnce: Open makes every directory of this rank's
// areas durable, and every directory above them up to the root, each
// with one fsync even where the areas share them (rank 0 of a one-node
// job holds all four: meta, global, its replica directory and the node
// directory, under one root).
func TestOpenSyncsEachDirOnce(t *testing.T) {
	var mu sync.Mutex
	synced := map[string]int{}
	on := false
	d := vfd.NewFault(vfd.Sec2{}, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpSyncDir {
			mu.Lock()
			if on {
				synced[filepath.Clean(op.Path)]++
			}
			mu.Unlock()
		}
		return nil
	}))
	root := t.TempDir()
	cl := newCluster(t, d, root, 1)
	for _, start := range []string{"fresh", "restart"} {
		mu.Lock()
		on, synced = true, map[string]int{}
		mu.Unlock()
		require.NoError(t, cl.run(1, func(e *Engine) error {
			mu.Lock()
			on = false
			mu.Unlock()
			if start == "fresh" {
				_, _, err := e.Checkpoint(1, L1, writeBytes(payload(0, 1, 1000)))
				return err
			}
			return nil
		}))
		want := map[string]int{}
		for _, dir := range []string{filepath.Join(root, "meta"), filepath.Join(root, "global", ReplicaDir), filepath.Join(root, "local", "node0000")} {
			for p := dir; ; p = filepath.Dir(p) {
				want[p] = 1
				if p == "/" || p == "." {
					break
				}
			}
		}
		assert.Equal(t, want, synced, "%s: directories synced by Open", start)
	}
}

// uncomparable is a driver whose values cannot be compared with ==.
type uncomparable struct {
	vfd.Sec2
	_ []string // a slice field makes the type not comparable
}

func TestSameDriver(t *testing.T) {
	f1, f2 := vfd.NewFault(vfd.Sec2{}, nil), vfd.NewFault(vfd.Sec2{}, nil)
	for _, tc := range []struct {
		name string
		a, b vfd.Driver
		same bool
	}{
		{"sec2", vfd.Sec2{}, vfd.Sec2{}, true},
		{"one pointer", f1, f1, true},
		{"two pointers", f1, f2, false},
		{"other types", vfd.Sec2{}, f1, false},
		{"uncomparable", uncomparable{}, uncomparable{}, false},
		{"nil", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, sameDriver(tc.a, tc.b))
		})
	}
}

// wrapped is a comparable driver type holding a driver in an interface
// field: two values compare with == only when the drivers they hold do.
type wrapped struct {
	vfd.Driver
}

// TestSameDriverNoPanic: a driver of a comparable type that holds a
// driver of an uncomparable type (a user's wrapper by value) is never
// the same as another, and telling so does not panic.
func TestSameDriverNoPanic(t *testing.T) {
	a, b := wrapped{uncomparable{}}, wrapped{uncomparable{}}
	assert.NotPanics(t, func() { assert.False(t, sameDriver(a, b)) })
	assert.NotPanics(t, func() {
		syncPaths([]Store{{Driver: a, Dir: "x"}, {Driver: b, Dir: "x"}})
	})
	f := vfd.NewFault(vfd.Sec2{}, nil)
	assert.True(t, sameDriver(wrapped{f}, wrapped{f}))
}
