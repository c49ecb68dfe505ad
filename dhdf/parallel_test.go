package dhdf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

// blockRows returns rows [r0, r0+n) of an ny x nx float64 array whose
// element (i,j) is i*nx+j.
func blockRows(r0, n, nx int) []byte {
	b := make([]byte, 0, n*nx*8)
	for i := r0; i < r0+n; i++ {
		for j := 0; j < nx; j++ {
			b = binary.LittleEndian.AppendUint64(b, uint64(i*nx+j))
		}
	}
	return b
}

func TestParallelWrite(t *testing.T) {
	const ranks, ny, nx = 4, 8, 5
	c := vfd.NewCore()
	err := comm.Run(ranks, func(cm comm.Comm) error {
		w, err := CreateParallel(cm, "par/set", Options{Driver: c, Now: fixedClock, HostName: fmt.Sprintf("node%d", cm.Rank()/2)})
		if err != nil {
			return err
		}
		if err := w.DefineSDS(SDS{Name: "field", Type: h5.Uint64, Dims: []uint64{ny, nx}}); err != nil {
			return err
		}
		r0 := cm.Rank() * ny / ranks
		if err := w.WriteChunk("field", 0, "", []uint64{uint64(r0), 0}, []uint64{ny / ranks, nx}, blockRows(r0, ny/ranks, nx)); err != nil {
			return err
		}
		return w.Close()
	})
	require.NoError(t, err)
	s, err := Open("par/set.h5", Options{Driver: c})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, []FileInfo{
		{0, "set.h5", "node0"}, {1, "set.1.h5", "node0"}, {2, "set.2.h5", "node0"}, {3, "set.3.h5", "node1"}, {4, "set.4.h5", "node1"},
	}, s.Files())
	got, err := s.ReadSDS("field")
	require.NoError(t, err)
	assert.Equal(t, blockRows(0, ny, nx), got)
	info, _ := s.SDS("field")
	require.Len(t, info.Chunks, ranks)
	assert.Equal(t, "field_3_0", info.Chunks[2].Name)
}

func TestParallelVoteFails(t *testing.T) {
	c := vfd.NewCore()
	d := vfd.NewFault(c, vfd.OnPath("bad.2.h5", []vfd.OpKind{vfd.OpSync}, errors.New("disk gone")))
	errs := make([]error, 3)
	_ = comm.Run(3, func(cm comm.Comm) error {
		w, err := CreateParallel(cm, "bad", Options{Driver: d, Now: fixedClock})
		if err != nil {
			return err
		}
		if err := w.DefineSDS(SDS{Name: "x", Type: h5.Int8, Dims: []uint64{3}}); err != nil {
			return err
		}
		if err := w.WriteChunk("x", 0, "", []uint64{uint64(cm.Rank())}, []uint64{1}, []byte{1}); err != nil {
			return err
		}
		errs[cm.Rank()] = w.Close()
		return nil
	})
	for r, err := range errs {
		assert.ErrorIs(t, err, ErrVote, "rank %d", r)
	}
	assert.ErrorIs(t, errs[1], vfd.ErrInjected)
	_, err := c.Stat("bad.h5")
	assert.True(t, errors.Is(err, fs.ErrNotExist), "no MHF after a failed vote: %v", err)
}

// TestCrashAtEveryOp takes a crash image (synced data only) of the
// in-memory file system before every operation of a set write; every
// image must either hold no set (Open fails) or the complete set.
func TestCrashAtEveryOp(t *testing.T) {
	c := vfd.NewCore()
	var clones []*vfd.Core
	d := vfd.NewFault(c, vfd.InjectorFunc(func(op vfd.Op) error {
		clones = append(clones, c.CrashClone())
		return nil
	}))
	writeTinySet(t, d, "crash")
	clones = append(clones, c.CrashClone())
	want := map[string][]byte{}
	s, err := Open("crash.h5", Options{Driver: c})
	require.NoError(t, err)
	for _, n := range []string{"t", "u"} {
		want[n], err = s.ReadSDS(n)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	complete := 0
	for i, cl := range clones {
		s, err := Open("crash.h5", Options{Driver: cl})
		if err != nil {
			continue
		}
		complete++
		for n, w := range want {
			got, err := s.ReadSDS(n)
			require.NoError(t, err, "crash image %d", i)
			require.Equal(t, w, got, "crash image %d", i)
		}
		require.NoError(t, s.Close())
	}
	assert.GreaterOrEqual(t, complete, 1, "the final image holds the set")
	assert.Less(t, complete, len(clones), "early images hold no set")
	t.Logf("%d crash images, %d with the complete set", len(clones), complete)
}

func TestParallelMismatchedDeclarations(t *testing.T) {
	c := vfd.NewCore()
	errs := make([]error, 2)
	_ = comm.Run(2, func(cm comm.Comm) error {
		w, err := CreateParallel(cm, "mis", Options{Driver: c, Now: fixedClock})
		if err != nil {
			return err
		}
		dims := []uint64{4}
		if cm.Rank() == 1 {
			dims = []uint64{5}
		}
		if err := w.DefineSDS(SDS{Name: "x", Type: h5.Int8, Dims: dims}); err != nil {
			return err
		}
		errs[cm.Rank()] = w.Close()
		return nil
	})
	assert.ErrorIs(t, errs[0], ErrInvalid)
	assert.ErrorIs(t, errs[0], ErrVote)
	assert.ErrorIs(t, errs[1], ErrVote)
	_, err := c.Stat("mis.h5")
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestParallelCrashAtEveryOp takes a crash image before every operation
// of a 3-rank parallel write, in both sync modes: each image holds no
// set or the complete one.
func TestParallelCrashAtEveryOp(t *testing.T) {
	for _, one := range []bool{false, true} {
		t.Run(fmt.Sprintf("OneSyncAHF=%v", one), func(t *testing.T) {
			c := vfd.NewCore()
			var clones []*vfd.Core
			d := vfd.NewFault(c, vfd.InjectorFunc(func(op vfd.Op) error {
				clones = append(clones, c.CrashClone())
				return nil
			}))
			const ranks, ny, nx = 3, 6, 4
			err := comm.Run(ranks, func(cm comm.Comm) error {
				w, err := CreateParallel(cm, "pc", Options{Driver: d, Now: fixedClock, OneSyncAHF: one})
				if err != nil {
					return err
				}
				if err := w.DefineSDS(SDS{Name: "f", Type: h5.Uint64, Dims: []uint64{ny, nx}}); err != nil {
					return err
				}
				r0 := cm.Rank() * ny / ranks
				if err := w.WriteChunk("f", 0, "", []uint64{uint64(r0), 0}, []uint64{ny / ranks, nx}, blockRows(r0, ny/ranks, nx)); err != nil {
					return err
				}
				return w.Close()
			})
			require.NoError(t, err)
			clones = append(clones, c.CrashClone())
			complete := 0
			for i, cl := range clones {
				s, err := Open("pc.h5", Options{Driver: cl})
				if err != nil {
					continue
				}
				complete++
				got, err := s.ReadSDS("f")
				require.NoError(t, err, "crash image %d", i)
				require.Equal(t, blockRows(0, ny, nx), got, "crash image %d", i)
				require.NoError(t, s.Close())
			}
			assert.GreaterOrEqual(t, complete, 1)
			assert.Less(t, complete, len(clones))
		})
	}
}
