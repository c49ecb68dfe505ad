package fileformat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlanMatchesWrite(t *testing.T) {
	vars := []Var{{ID: 1, Name: "alpha", Data: pattern(5000, 1)}, {ID: 2, Data: pattern(10, 2)}, {ID: 3}}
	var prev *Layout
	for i, sizes := range [][3]int{{5000, 10, 0}, {7000, 4, 3}, {100, 4, 3000}} {
		for k := range vars {
			vars[k].Data = pattern(sizes[k], byte(i+k))
		}
		lay, fs, err := Plan(vars, prev, WithBlockSize(MinBlockSize))
		require.NoError(t, err)
		_, wlay, sum := writeFile(t, Meta{}, vars, prev, WithBlockSize(MinBlockSize))
		assert.Equal(t, wlay, lay)
		assert.Equal(t, sum.FileSize, fs)
		prev = wlay
	}
	_, _, err := Plan([]Var{{ID: 1}, {ID: 1}}, nil)
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestDirtyBlocks(t *testing.T) {
	data := pattern(10*MinBlockSize+5, 1)
	old, err := HashBlocks(data, MinBlockSize)
	require.NoError(t, err)
	_, _, sum := writeFile(t, Meta{}, []Var{{ID: 1, Data: data}}, nil, WithBlockSize(MinBlockSize))
	require.Equal(t, sum.Chunks[0].BlockHashes, old)
	assert.Equal(t, sum.Chunks[0].Hash, ChunkHash(int64(len(data)), MinBlockSize, old))

	data[3*MinBlockSize+17] ^= 1
	data[len(data)-1] ^= 1
	data = append(data, pattern(MinBlockSize, 2)...)
	cur, err := HashBlocks(data, MinBlockSize, WithHashWorkers(1))
	require.NoError(t, err)
	assert.Equal(t, []int{3, 10, 11}, DirtyBlocks(old, cur))
	assert.Empty(t, DirtyBlocks(cur, cur))
	_, err = HashBlocks(data, 10)
	assert.ErrorIs(t, err, ErrInvalid)
}
