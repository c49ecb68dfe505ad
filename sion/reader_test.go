package sion

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

type wantTask struct {
	size int64
	sha  string // first 16 hex digits of sha256
}

var (
	test4Tasks = []wantTask{{2500, "40a8d9b953c2402c"}, {1000, "f6f118e120e52be0"}, {0, "e3b0c44298fc1c14"}, {4000, "25d3295edc3d0d15"}}
	parTasks   = []wantTask{{2500, "40a8d9b953c2402c"}, {2000, "d4c6e5ac27e3c25d"}, {0, "e3b0c44298fc1c14"}, {4000, "25d3295edc3d0d15"}}
	mapTasks   = []wantTask{{500, "e1a00da865cef6e0"}, {510, "98216037a2f54017"}, {520, "67c4a4266bf5049f"}, {530, "93c781c461040910"}}
)

func shaPrefix(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])[:16]
}

func testdata(name string) string { return filepath.Join("testdata", name) }

func TestReadReferenceFiles(t *testing.T) {
	tests := []struct {
		file     string
		tasks    []wantTask
		ranks    []int64
		nfiles   int
		fsblk    int32
		bigMeta  bool
		bigData  bool
		kv       bool
		blocks   [][]int64
		mapping  []MapEntry
		fileSize int64
	}{
		{file: "test4.sion", tasks: test4Tasks, ranks: []int64{100, 101, 102, 103}, nfiles: 1, fsblk: 1024,
			blocks: [][]int64{{1000, 1000, 500}, {1000}, {0}, {3000, 1000}}, fileSize: 23684},
		{file: "test4_be.sion", tasks: test4Tasks, ranks: []int64{100, 101, 102, 103}, nfiles: 1, fsblk: 1024, bigMeta: true, bigData: true,
			blocks: [][]int64{{1000, 1000, 500}, {1000}, {0}, {3000, 1000}}, fileSize: 23684},
		{file: "big.sion", tasks: test4Tasks, ranks: []int64{100, 101, 102, 103}, nfiles: 1, fsblk: 1024, bigData: true, fileSize: 23684},
		{file: "def.sion", tasks: test4Tasks, ranks: []int64{100, 101, 102, 103}, nfiles: 1, fsblk: 4096, fileSize: 20548},
		{file: "par1.sion", tasks: parTasks, ranks: []int64{0, 1, 2, 3}, nfiles: 1, fsblk: 1024, fileSize: 23680},
		{file: "par2.sion", tasks: parTasks, ranks: []int64{0, 1, 2, 3}, nfiles: 2, fsblk: 1024,
			mapping: []MapEntry{{0, 0}, {0, 1}, {1, 0}, {1, 1}}, fileSize: 11364},
		{file: "kv.sion", tasks: nil, ranks: []int64{0, 1, 2, 3}, nfiles: 1, fsblk: 1024, kv: true,
			blocks: [][]int64{{1024, 1024, 532}, {2032}, {0}, {3072, 992}}, fileSize: 23680},
		{file: "mapped1.sion", tasks: mapTasks, ranks: []int64{0, 1, 2, 3}, nfiles: 1, fsblk: 1024,
			mapping: []MapEntry{{0, 0}, {0, 1}, {0, 2}, {0, 3}}, fileSize: 6244},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r, err := Open(vfd.Sec2{}, testdata(tc.file))
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, 4, r.NTasks())
			fi := r.Files()[0]
			assert.Equal(t, tc.nfiles, fi.NFiles)
			assert.Equal(t, len(r.Files()), tc.nfiles)
			assert.Equal(t, tc.fsblk, fi.FSBlkSize)
			assert.Equal(t, tc.bigMeta, fi.BigEndian)
			assert.Equal(t, tc.bigData, fi.DataBigEndian)
			assert.Equal(t, int32(5), fi.FileFormat)
			assert.Equal(t, int32(1007), fi.Version)
			assert.Equal(t, int32(6), fi.Patch)
			assert.Equal(t, tc.kv, r.KeyVal())
			assert.Equal(t, tc.fileSize, fi.Size)
			assert.Equal(t, tc.mapping, fi.Mapping)
			for i := 0; i < 4; i++ {
				task, err := r.Task(i)
				require.NoError(t, err)
				assert.Equal(t, tc.ranks[i], task.GlobalRank, "task %d", i)
				if tc.blocks != nil {
					assert.Equal(t, tc.blocks[i], task.BlockSizes, "task %d", i)
				}
				data, err := r.ReadTask(i)
				require.NoError(t, err)
				assert.Equal(t, task.Size, int64(len(data)))
				if tc.tasks != nil {
					assert.Equal(t, tc.tasks[i].size, int64(len(data)), "task %d", i)
					assert.Equal(t, tc.tasks[i].sha, shaPrefix(data), "task %d", i)
				}
				// The io.Reader view gives the same bytes.
				sr, err := r.TaskReader(i)
				require.NoError(t, err)
				all, err := io.ReadAll(sr)
				require.NoError(t, err)
				assert.Equal(t, data, all)
			}
		})
	}
}

func TestReadKeyVal(t *testing.T) {
	r, err := Open(vfd.Sec2{}, testdata("kv.sion"))
	require.NoError(t, err)
	defer r.Close()
	want := []struct {
		keys   []int64
		letter byte
		n      int64
	}{{[]int64{7, 8, 9, 10, 11}, 'a', 500}, {[]int64{7, 8}, 'b', 1000}, {nil, 0, 0}, {[]int64{7, 8, 9, 10}, 'd', 1000}}
	for i, w := range want {
		recs, err := r.Records(i)
		require.NoError(t, err)
		require.Len(t, recs, len(w.keys), "task %d", i)
		for k, rec := range recs {
			assert.Equal(t, w.keys[k], rec.Key)
			assert.Equal(t, w.n, rec.Length)
			kr, n, err := r.KeyReader(i, rec.Key)
			require.NoError(t, err)
			assert.Equal(t, w.n, n)
			b, err := io.ReadAll(kr)
			require.NoError(t, err)
			assert.Equal(t, string(repeat(w.letter, int(w.n))), string(b))
		}
	}
	r2, err := Open(vfd.Sec2{}, testdata("test4.sion"))
	require.NoError(t, err)
	defer r2.Close()
	_, err = r2.Records(0)
	assert.ErrorIs(t, err, ErrNotKeyVal)
}

func repeat(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

func TestReadBrokenFiles(t *testing.T) {
	tests := []struct {
		file string
		want error
		off  int64
	}{
		{"badmagic.sion", ErrBadMagic, 0},
		{"trunc.sion", ErrTruncated, 23552},
		{"unclosed.sion", ErrUnclosed, 1144},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			_, err := Open(vfd.Sec2{}, testdata(tc.file))
			require.ErrorIs(t, err, tc.want)
			for _, other := range []error{ErrBadMagic, ErrTruncated, ErrUnclosed, ErrInconsistent} {
				if other != tc.want {
					assert.NotErrorIs(t, err, other)
				}
			}
			var ce *CorruptionError
			require.True(t, errors.As(err, &ce))
			assert.Equal(t, tc.off, ce.Offset)
			assert.Contains(t, err.Error(), tc.file)
		})
	}
}

func TestOpenSetMemberAlone(t *testing.T) {
	r, err := Open(vfd.Sec2{}, testdata("par2.sion.000001"))
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, 2, r.NTasks())
	assert.Len(t, r.Files(), 1)
	assert.Equal(t, 1, r.Files()[0].FileNumber)
	assert.Nil(t, r.Files()[0].Mapping)
	for i, want := range parTasks[2:] {
		task, err := r.Task(i)
		require.NoError(t, err)
		assert.Equal(t, int64(2+i), task.GlobalRank)
		b, err := r.ReadTask(i)
		require.NoError(t, err)
		assert.Equal(t, want.sha, shaPrefix(b))
	}
}
