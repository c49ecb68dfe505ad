package h5ckpt

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// viewJob writes a checkpoint of n ranks, each a band of one row of 256
// float64 of a global field and an int64 outside it, into d.
func viewJob(t *testing.T, d vfd.Driver, n int) (ds dataset.Dataset, g []byte) {
	t.Helper()
	ds = dataset.Dataset{ID: 1, Name: "field", Shape: []int64{int64(n), 256}, Type: fileformat.Float64}
	g = global(ds, 3)
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		r := c.Rank()
		off, cnt := []int64{int64(r), 0}, []int64{1, 256}
		vars := []fileformat.Var{
			{ID: 10, Name: "field@r", Type: fileformat.Float64, Data: slabOf(ds, g, off, cnt)},
			{ID: 1, Name: "step", Type: fileformat.Int64, Data: []byte{byte(r), 0, 0, 0, 0, 0, 0, 0}},
		}
		subs := []dataset.Subset{{VarID: 10, Dataset: 1, Offset: off, Count: cnt}}
		return Write(c, d, "/v.h5", Meta{CkptID: 2, Level: 4, Timestamp: 5, Run: "run"}, vars, []dataset.Dataset{ds}, subs, WithHashWorkers(1))
	}, comm.WithTimeout(time.Minute)))
	return ds, g
}

// TestRankViewReadsOneRank opens one rank's variables from the view
// another reader made: the same variables, bytes and subsets as the
// whole file gives, every block still checked, and a view whose length
// does not grow with the ranks that wrote the file.
func TestRankViewReadsOneRank(t *testing.T) {
	d := vfd.NewCore()
	ds, g := viewJob(t, d, 16)
	full, err := Open(d, "/v.h5")
	require.NoError(t, err)
	defer full.Close()
	view, err := full.RankView(5)
	require.NoError(t, err)
	f, err := OpenView(d, "/v.h5", 5, view)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, full.Meta(), f.Meta())
	assert.Equal(t, full.TablesHash(), f.TablesHash())
	assert.Equal(t, full.Vars(5), f.Vars(5))
	assert.Empty(t, f.Vars(4), "the view holds rank 5's variables alone")
	got := make([]byte, 256*8)
	require.NoError(t, f.ReadVar(5, 10, got))
	assert.Equal(t, slabOf(ds, g, []int64{5, 0}, []int64{1, 256}), got)
	step := make([]byte, 8)
	require.NoError(t, f.ReadVar(5, 1, step))
	assert.Equal(t, []byte{5, 0, 0, 0, 0, 0, 0, 0}, step)
	sub, ok := f.SubsetOf(5, 10)
	require.True(t, ok)
	want, _ := full.Decomposition().SubsetOf(5, 10)
	assert.Equal(t, want, sub)
	_, ok = f.SubsetOf(5, 1)
	assert.False(t, ok)
	require.NoError(t, f.VerifyRank(5))
	assert.ErrorIs(t, f.ReadSlab(1, []int64{0, 0}, []int64{1, 1}, make([]byte, 8)), ErrInvalid)

	// A flipped byte of rank 5's field is found through the view.
	v, err := full.find(5, 10)
	require.NoError(t, err)
	h, err := d.Open("/v.h5", vfd.ReadWrite)
	require.NoError(t, err)
	b := []byte{0}
	_, err = h.ReadAt(b, v.slab.base+3)
	require.NoError(t, err)
	b[0] ^= 1
	_, err = h.WriteAt(b, v.slab.base+3)
	require.NoError(t, err)
	require.NoError(t, h.Close())
	err = f.VerifyRank(5)
	assert.ErrorIs(t, err, ErrHashMismatch)
	var ce *CorruptionError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, v.slab.base, ce.Offset)

	// Malformed views are refused, never a panic.
	for _, bad := range [][]byte{nil, {9}, view[:len(view)-1], append(append([]byte(nil), view...), 0)} {
		_, err := OpenView(d, "/v.h5", 5, bad)
		assert.ErrorIs(t, err, ErrInvalid)
	}
	_, err = OpenView(d, "/v.h5", 16, view)
	assert.ErrorIs(t, err, ErrInvalid, "rank 16 of 16")

	// The view of a rank is as long with 256 ranks as with 16.
	d2 := vfd.NewCore()
	viewJob(t, d2, 256)
	big, err := Open(d2, "/v.h5")
	require.NoError(t, err)
	defer big.Close()
	bview, err := big.RankView(5)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(bview), len(view)+8, "a rank's view grows with the ranks: %d bytes at 16, %d at 256", len(view), len(bview))
}

// TestRankViewKeepsANegativeTimestamp: every field of the identity comes
// back as written, a timestamp before 1970 too.
func TestRankViewKeepsANegativeTimestamp(t *testing.T) {
	f := &File{meta: Meta{CkptID: 3, Level: 9, Timestamp: -5, Ranks: 2, BlockSize: fileformat.MinBlockSize, Run: "r"}, bs: fileformat.MinBlockSize}
	view, err := f.RankView(1)
	require.NoError(t, err)
	g := &File{}
	require.NoError(t, g.decodeView(1, view))
	assert.Equal(t, f.meta, g.meta)
	assert.Empty(t, g.vars)
}
