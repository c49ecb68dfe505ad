package sion

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

func TestTaskWriterAPI(t *testing.T) {
	name := filepath.Join(t.TempDir(), "api.sion")
	w, err := Create(vfd.Sec2{}, name, []int64{100, 0}, []int64{5, 6}, &Options{FSBlkSize: 64, ExactChunks: true})
	require.NoError(t, err)
	assert.Equal(t, 2, w.NTasks())
	assert.Nil(t, w.Task(2))
	tw := w.Task(0)
	assert.Equal(t, 1, tw.Blocks())
	_, err = tw.Write(bytes.Repeat([]byte{1}, 60))
	require.NoError(t, err)
	require.NoError(t, tw.EnsureFreeSpace(40))
	assert.Equal(t, 1, tw.Blocks(), "40 bytes still fit")
	require.NoError(t, tw.EnsureFreeSpace(41))
	assert.Equal(t, 2, tw.Blocks(), "41 bytes do not: next block")
	assert.ErrorIs(t, tw.EnsureFreeSpace(101), ErrWriteTooLarge)
	_, err = tw.Write([]byte{2, 2})
	require.NoError(t, err)
	assert.Equal(t, int64(62), tw.Size())
	_, err = w.Task(1).Write([]byte{1})
	assert.ErrorIs(t, err, ErrWriteTooLarge, "zero-size chunk")
	assert.ErrorIs(t, tw.WriteRecord(1, nil), ErrNotKeyVal)
	require.NoError(t, w.Close())
	assert.ErrorIs(t, w.Close(), ErrClosed)
	_, err = tw.Write([]byte{1})
	assert.ErrorIs(t, err, ErrClosed)

	r, err := Open(vfd.Sec2{}, name)
	require.NoError(t, err)
	defer r.Close()
	task, err := r.Task(0)
	require.NoError(t, err)
	assert.Equal(t, []int64{60, 2}, task.BlockSizes)
	br, err := r.BlockReader(0, 1)
	require.NoError(t, err)
	b, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, []byte{2, 2}, b)
	_, err = r.BlockReader(0, 2)
	assert.ErrorIs(t, err, ErrNoTask)
	_, err = r.Task(2)
	assert.ErrorIs(t, err, ErrNoTask)
	_, err = r.TaskReader(-1)
	assert.ErrorIs(t, err, ErrNoTask)
	task1, _ := r.Task(1)
	assert.Equal(t, []int64{0}, task1.BlockSizes)
	assert.Equal(t, int64(6), task1.GlobalRank)
}

func TestWriterBadArguments(t *testing.T) {
	dir := t.TempDir()
	_, err := Create(vfd.Sec2{}, filepath.Join(dir, "a"), []int64{1, 2}, []int64{1}, nil)
	assert.ErrorIs(t, err, ErrBadArgument)
	_, err = Create(vfd.Sec2{}, filepath.Join(dir, "b"), nil, nil, nil)
	assert.ErrorIs(t, err, ErrBadArgument)
	_, err = Create(vfd.Sec2{}, filepath.Join(dir, "c"), []int64{-1}, nil, nil)
	assert.ErrorIs(t, err, ErrBadArgument)
	_, err = Create(vfd.Sec2{}, filepath.Join(dir, "d"), []int64{1}, nil, &Options{Prefix: string(bytes.Repeat([]byte{'x'}, 1024))})
	assert.ErrorIs(t, err, ErrBadArgument)

	w, err := Create(vfd.Sec2{}, filepath.Join(dir, "e"), []int64{1}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, w.Abort())
	assert.ErrorIs(t, w.Abort(), ErrClosed)
	_, err = os.Stat(filepath.Join(dir, "e"+TmpSuffix))
	assert.ErrorIs(t, err, fs.ErrNotExist)

	cases := []struct {
		name  string
		tasks func(r int) []MappedTask
		files int
	}{
		{"local rank taken twice", func(r int) []MappedTask { return []MappedTask{{GlobalRank: int64(r), ChunkSize: 10}} }, 1},
		{"global ranks not dense", func(r int) []MappedTask {
			return []MappedTask{{GlobalRank: int64(10 * r), ChunkSize: 10, LocalRank: r}}
		}, 1},
		{"file without tasks", func(r int) []MappedTask {
			return []MappedTask{{GlobalRank: int64(r), ChunkSize: 10, LocalRank: r}}
		}, 2},
		{"file out of range", func(r int) []MappedTask {
			return []MappedTask{{GlobalRank: int64(r), ChunkSize: 10, File: 3, LocalRank: 0}}
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := make([]error, 3)
			_ = comm.Run(3, func(c comm.Comm) error {
				_, errs[c.Rank()] = CreateMapped(c, vfd.Sec2{}, filepath.Join(dir, "m.sion"), tc.tasks(c.Rank()), tc.files, nil)
				return nil
			})
			for r, err := range errs {
				assert.ErrorIs(t, err, ErrBadArgument, "rank %d", r)
			}
		})
	}
	errs := make([]error, 2)
	_ = comm.Run(2, func(c comm.Comm) error {
		_, errs[c.Rank()] = ParCreate(c, vfd.Sec2{}, filepath.Join(dir, "p.sion"), 10, 3, nil)
		return nil
	})
	assert.ErrorIs(t, errs[0], ErrBadArgument)
	assert.ErrorIs(t, errs[1], ErrBadArgument)
}

func TestParallelAbort(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "ab.sion")
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		pw, err := ParCreate(c, vfd.Sec2{}, name, 100, 2, nil)
		if err != nil {
			return err
		}
		if pw.NTasks() != 1 || pw.Task(1) != nil {
			return ErrBadArgument
		}
		if _, err := pw.Write([]byte("data")); err != nil {
			return err
		}
		return pw.Abort()
	}))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "no file left after a collective abort")
}
