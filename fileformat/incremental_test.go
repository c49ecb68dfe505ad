package fileformat

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIncrementalMatchesWrite adds the variables in every order (and one
// twice, its first bytes stale) and checks the file is byte for byte what
// Write produces, with the same layout and summary; a later file laid out
// after a grown variable too.
func TestIncrementalMatchesWrite(t *testing.T) {
	mk := func(id int32, n int, seed byte) Var {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)*7 + seed
		}
		return Var{ID: id, Name: fmt.Sprintf("v%d", id), Type: Uint8, Data: b}
	}
	vars := []Var{mk(3, 5000, 1), mk(1, 0, 2), mk(7, 70000, 3)}
	meta := Meta{CkptID: 4, Rank: 2, Level: 1}
	opts := []Option{WithClock(fixedClock), WithBlockSize(4096)}
	wantF, wantLay, wantSum := writeFile(t, meta, vars, nil, opts...)
	want := fileBytes(t, wantF)
	orders := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1, 2}}
	for _, order := range orders {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			f := newFile(t, "inc")
			sizes := make([]Var, len(vars))
			for i, v := range vars {
				sizes[i] = v
				sizes[i].Data = make([]byte, len(v.Data)) // only the size counts at the start
			}
			x, err := NewIncremental(f, meta, sizes, nil, opts...)
			require.NoError(t, err)
			for k, i := range order {
				data := vars[i].Data
				if k == 0 && len(order) > len(vars) {
					data = bytes.Repeat([]byte{0xee}, len(data)) // rewritten later
				}
				require.NoError(t, x.Add(vars[i].ID, data))
			}
			lay, sum, err := x.Finish()
			require.NoError(t, err)
			assert.Equal(t, want, fileBytes(t, f))
			assert.Equal(t, wantLay, lay)
			assert.Equal(t, wantSum, sum)
			rd, err := Open(f)
			require.NoError(t, err)
			require.NoError(t, rd.Verify())
		})
	}
	// The next file, after variable 3 grew, keeps the layout as Write does.
	grown := []Var{mk(3, 9000, 4), vars[1], vars[2]}
	wantF2, _, _ := writeFile(t, meta, grown, wantLay, opts...)
	f := newFile(t, "inc2")
	x, err := NewIncremental(f, meta, grown, wantLay, opts...)
	require.NoError(t, err)
	for _, v := range grown {
		require.NoError(t, x.Add(v.ID, v.Data))
	}
	_, _, err = x.Finish()
	require.NoError(t, err)
	assert.Equal(t, fileBytes(t, wantF2), fileBytes(t, f))
}

// TestIncrementalErrors: a missing variable fails Finish and leaves a
// file Open rejects; unknown ids, wrong sizes and late adds are refused.
func TestIncrementalErrors(t *testing.T) {
	vars := []Var{{ID: 1, Type: Uint8, Data: make([]byte, 100)}, {ID: 2, Type: Float64, Data: make([]byte, 80)}}
	f := newFile(t, "inc")
	x, err := NewIncremental(f, Meta{CkptID: 1}, vars, nil, WithClock(fixedClock))
	require.NoError(t, err)
	require.NoError(t, x.Add(1, vars[0].Data))
	assert.ErrorIs(t, x.Add(9, nil), ErrInvalid)
	assert.ErrorIs(t, x.Add(2, make([]byte, 8)), ErrInvalid)
	assert.Equal(t, []int32{2}, x.Missing())
	_, _, err = x.Finish()
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "variables [2] not added")
	_, err = Open(f)
	assert.Error(t, err, "an unfinished file is not an FTI-FF file")
	require.NoError(t, x.Add(2, vars[1].Data))
	_, _, err = x.Finish()
	require.NoError(t, err)
	assert.True(t, errors.Is(x.Add(1, vars[0].Data), ErrInvalid), "add after Finish")
	_, err = Open(f)
	require.NoError(t, err)
}
