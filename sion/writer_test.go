package sion

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// writeTest4 writes the test4 pattern with the serial writer.
func writeTest4(t *testing.T, name string, o *Options) {
	t.Helper()
	w, err := Create(vfd.Sec2{}, name, []int64{1000, 1500, 100, 3000}, []int64{100, 101, 102, 103}, o)
	require.NoError(t, err)
	for k := 0; k < 5; k++ {
		_, err := w.Task(0).Write(bytes.Repeat([]byte{'a'}, 500))
		require.NoError(t, err)
	}
	_, err = w.Task(1).Write(bytes.Repeat([]byte{'b'}, 1000))
	require.NoError(t, err)
	for k := 0; k < 4; k++ {
		_, err := w.Task(3).Write(bytes.Repeat([]byte{'d'}, 1000))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
}

func TestSerialWriterByteIdentical(t *testing.T) {
	tests := []struct {
		ref string
		o   Options
	}{
		{"test4.sion", Options{FSBlkSize: 1024, Prefix: "test4.sion"}},
		{"test4.sion", Options{FSBlkSize: 1024, Prefix: "test4.sion", Policy: PolicyStrict}},
		{"def.sion", Options{Prefix: "def.sion"}},
		{"big.sion", Options{FSBlkSize: 1024, Prefix: "big.sion", DataBigEndian: true}},
		{"test4_be.sion", Options{FSBlkSize: 1024, Prefix: "test4.sion", BigEndian: true, DataBigEndian: true}},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "out.sion")
			writeTest4(t, name, &tc.o)
			got, err := os.ReadFile(name)
			require.NoError(t, err)
			want, err := os.ReadFile(testdata(tc.ref))
			require.NoError(t, err)
			require.Equal(t, len(want), len(got))
			assert.True(t, bytes.Equal(want, got), "bytes differ from %s", tc.ref)
			_, err = os.Stat(name + TmpSuffix)
			assert.ErrorIs(t, err, fs.ErrNotExist)
		})
	}
}

func TestWritePolicies(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		writes []int
		blocks []int64
		err    error
	}{
		{"split moves a write that does not fit", PolicySplit, []int{700, 700}, []int64{700, 700}, nil},
		{"split spreads a write larger than the chunk", PolicySplit, []int{100, 2500}, []int64{1024, 1024, 552}, nil},
		{"strict refuses a write larger than the chunk", PolicyStrict, []int{100, 2500}, []int64{100}, ErrWriteTooLarge},
		{"fill fills every chunk", PolicyFill, []int{700, 700, 700}, []int64{1024, 1024, 52}, nil},
		{"exact fit does not open a block", PolicySplit, []int{1024}, []int64{1024}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "p.sion")
			w, err := Create(vfd.Sec2{}, name, []int64{1024}, nil, &Options{FSBlkSize: 1024, Policy: tc.policy})
			require.NoError(t, err)
			var want []byte
			var gotErr error
			for k, n := range tc.writes {
				p := bytes.Repeat([]byte{byte('A' + k)}, n)
				if _, err := w.Task(0).Write(p); err != nil {
					gotErr = err
					continue
				}
				want = append(want, p...)
			}
			if tc.err != nil {
				require.ErrorIs(t, gotErr, tc.err)
			} else {
				require.NoError(t, gotErr)
			}
			require.NoError(t, w.Close())
			r, err := Open(vfd.Sec2{}, name)
			require.NoError(t, err)
			defer r.Close()
			task, err := r.Task(0)
			require.NoError(t, err)
			assert.Equal(t, tc.blocks, task.BlockSizes)
			got, err := r.ReadTask(0)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}
