package fileformat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLayoutChaining follows variables that grow, shrink, appear and
// disappear over several checkpoints, each written with the previous
// layout, and restores every state bit for bit, also from a layout
// rebuilt by a Reader (a restart).
func TestLayoutChaining(t *testing.T) {
	type step struct {
		name   string
		sizes  map[int32]int // variable id -> byte size; absent = not protected
		blocks []int         // containers per block expected afterwards
	}
	steps := []step{
		{"fresh", map[int32]int{1: 1000, 2: 64, 3: 0}, []int{2}},
		{"same sizes", map[int32]int{1: 1000, 2: 64, 3: 0}, []int{2}},
		{"var 1 grows", map[int32]int{1: 1500, 2: 64, 3: 0}, []int{2, 1}},
		{"var 2 shrinks, var 3 appears", map[int32]int{1: 1500, 2: 10, 3: 40}, []int{2, 1, 1}},
		{"var 1 shrinks into its first container", map[int32]int{1: 300, 2: 10, 3: 40}, []int{2, 1, 1}},
		{"var 1 regrows past both containers", map[int32]int{1: 2000, 2: 64, 3: 40}, []int{2, 1, 1, 1}},
		{"var 2 unprotected, var 4 new", map[int32]int{1: 2000, 3: 0, 4: 8}, []int{1, 1, 1, 1, 1}},
		{"all empty", map[int32]int{1: 0, 3: 0, 4: 0}, []int{1, 1, 1, 1, 1}},
	}
	var prev *Layout
	for i, st := range steps {
		ids := []int32{1, 2, 3, 4}
		var vars []Var
		for _, id := range ids {
			if n, ok := st.sizes[id]; ok {
				vars = append(vars, Var{ID: id, Type: Uint8, Data: pattern(n, byte(10*i)+byte(id))})
			}
		}
		var before *Layout
		if prev != nil {
			before = prev.Clone()
		}
		f, lay, sum := writeFile(t, Meta{CkptID: int64(i + 1)}, vars, prev)
		assert.Equal(t, before, prev, "%s: Write must not modify prev", st.name)
		var nb []int
		for _, b := range lay.Blocks {
			nb = append(nb, len(b.Containers))
		}
		require.Equal(t, st.blocks, nb, st.name)
		// Existing containers keep their file offsets across checkpoints.
		if prev != nil && sameKeys(st.sizes, steps[i-1].sizes) {
			for b := range prev.Blocks {
				assert.Equal(t, prev.Blocks[b], lay.Blocks[b], st.name)
			}
		}
		r, err := Open(f)
		require.NoError(t, err, st.name)
		require.NoError(t, r.Verify(), st.name)
		assert.Equal(t, lay, r.Layout(), st.name)
		assert.Equal(t, sum.Chunks, r.Summary().Chunks, st.name)
		for _, v := range vars {
			got := make([]byte, len(v.Data))
			require.NoError(t, r.ReadVar(v.ID, got), st.name)
			require.Equal(t, v.Data, got, "%s: var %d", st.name, v.ID)
			assert.Equal(t, lay.Capacity(v.ID) >= int64(len(v.Data)), true)
		}
		// Alternate between chaining the returned layout and the one a
		// restarted process rebuilds from the file.
		if i%2 == 0 {
			prev = lay
		} else {
			prev = r.Layout()
		}
	}
}

func TestLayoutGrowthWritesOnlyExtra(t *testing.T) {
	v := Var{ID: 1, Data: pattern(4096, 1)}
	_, lay, _ := writeFile(t, Meta{}, []Var{v}, nil)
	v.Data = pattern(4096+100, 2)
	_, lay2, sum := writeFile(t, Meta{}, []Var{v}, lay)
	require.Len(t, lay2.Blocks, 2)
	assert.Equal(t, Container{VarID: 1, ID: 1, Dptr: 4096, Size: 100}, lay2.Blocks[1].Containers[0])
	require.Len(t, sum.Chunks, 2)
	assert.Equal(t, int64(HeaderSize+4096), sum.Chunks[1].Fptr)
	assert.Equal(t, int64(100), sum.Chunks[1].Size)
}

func TestLayoutRejectsBrokenPrev(t *testing.T) {
	bad := []*Layout{
		{Blocks: []Block{{Containers: []Container{{VarID: 1, ID: 0, Dptr: 10, Size: 5}}}}},
		{Blocks: []Block{{Containers: []Container{{VarID: 1, ID: 0, Dptr: 0, Size: 0}}}}},
		{Blocks: []Block{{Containers: []Container{{VarID: 1, ID: 0, Dptr: 0, Size: 5}, {VarID: 1, ID: 0, Dptr: 5, Size: 5}}}}},
	}
	for _, l := range bad {
		f := newFile(t, "x.fti")
		_, _, err := Write(f, Meta{}, []Var{{ID: 1, Data: []byte("abc")}}, l)
		assert.ErrorIs(t, err, ErrInvalid)
	}
}

func sameKeys(a, b map[int32]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}
