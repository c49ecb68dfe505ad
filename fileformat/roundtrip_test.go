package fileformat

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

func TestRoundTripElemTypes(t *testing.T) {
	type point struct {
		X, Y float64
		ID   int32
		_    int32
	}
	tests := []struct {
		name string
		typ  ElemType
		es   uint32
		data []byte
	}{
		{"bytes", Bytes, 0, []byte("opaque payload")},
		{"int8", Int8, 0, asBytes([]int8{-128, -1, 0, 1, 127})},
		{"int16", Int16, 0, asBytes([]int16{math.MinInt16, -1, 0, math.MaxInt16})},
		{"int32", Int32, 0, asBytes([]int32{math.MinInt32, 7, math.MaxInt32})},
		{"int64", Int64, 8, asBytes([]int64{math.MinInt64, 42, math.MaxInt64})},
		{"uint8", Uint8, 0, asBytes([]uint8{0, 1, 255})},
		{"uint16", Uint16, 0, asBytes([]uint16{0, 65535})},
		{"uint32", Uint32, 0, asBytes([]uint32{0, math.MaxUint32})},
		{"uint64", Uint64, 0, asBytes([]uint64{0, math.MaxUint64})},
		{"float32", Float32, 0, asBytes([]float32{float32(math.Inf(-1)), -0.5, math.MaxFloat32})},
		{"float64", Float64, 0, asBytes([]float64{math.Pi, math.NaN(), math.Copysign(0, -1), math.SmallestNonzeroFloat64})},
		{"complex64", Complex64, 0, asBytes([]complex64{complex(1, -2), complex(float32(math.Inf(1)), 0)})},
		{"complex128", Complex128, 0, asBytes([]complex128{complex(math.E, math.Pi)})},
		{"struct", Struct, 24, asBytes([]point{{1, 2, 3, 0}, {-4, 5.5, 6, 0}})},
		{"empty float64", Float64, 0, []byte{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vars := []Var{{ID: 3, Name: "v-" + tc.name, Type: tc.typ, ElemSize: tc.es, Data: tc.data}}
			f, _, sum := writeFile(t, Meta{CkptID: 9, Rank: 2, Level: 1}, vars, nil)
			r, err := Open(f)
			require.NoError(t, err)
			es, _ := elemSize(tc.typ, tc.es)
			want := VarInfo{ID: 3, Name: "v-" + tc.name, Type: tc.typ, ElemSize: es,
				Count: int64(len(tc.data)) / int64(es), Size: int64(len(tc.data)), Chunks: 1, Stored: int64(len(tc.data))}
			if len(tc.data) == 0 {
				want.Chunks = 0
			}
			assert.Equal(t, []VarInfo{want}, r.Vars())
			got := make([]byte, len(tc.data))
			require.NoError(t, r.ReadVar(3, got))
			assert.Equal(t, tc.data, got)
			require.NoError(t, r.Verify())
			assert.Equal(t, sum.Checksum, r.Summary().Checksum)
			assert.Equal(t, Meta{CkptID: 9, Rank: 2, Level: 1, Timestamp: fixedClock().UnixNano()}, r.Meta())
		})
	}
}

func TestWriteRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		vars []Var
		opts []Option
	}{
		{"duplicate id", []Var{{ID: 1, Data: []byte{1}}, {ID: 1, Data: []byte{2}}}, nil},
		{"negative id", []Var{{ID: -1, Data: []byte{1}}}, nil},
		{"ragged float64", []Var{{ID: 1, Type: Float64, Data: make([]byte, 12)}}, nil},
		{"wrong elem size", []Var{{ID: 1, Type: Int32, ElemSize: 8, Data: make([]byte, 8)}}, nil},
		{"struct without size", []Var{{ID: 1, Type: Struct, Data: make([]byte, 8)}}, nil},
		{"unknown type", []Var{{ID: 1, Type: numElemTypes, Data: make([]byte, 8)}}, nil},
		{"long name", []Var{{ID: 1, Name: string(make([]byte, 70000))}}, nil},
		{"tiny block size", []Var{{ID: 1}}, []Option{WithBlockSize(16)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFile(t, "x.fti")
			_, _, err := Write(f, Meta{}, tc.vars, nil, tc.opts...)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

func TestManyVariables(t *testing.T) {
	var vars []Var
	for i := 0; i < 300; i++ {
		vars = append(vars, Var{ID: int32(i * 7), Name: fmt.Sprintf("var%03d", i), Type: Uint8, Data: pattern(i%37, byte(i))})
	}
	f, _, _ := writeFile(t, Meta{CkptID: 1}, vars, nil)
	r, err := Open(f)
	require.NoError(t, err)
	require.Len(t, r.Vars(), len(vars))
	for _, v := range vars {
		n, err := r.StoredSize(v.ID)
		require.NoError(t, err)
		require.Equal(t, int64(len(v.Data)), n)
		got := make([]byte, n)
		require.NoError(t, r.ReadVar(v.ID, got))
		require.Equal(t, v.Data, got, "var %d", v.ID)
	}
	require.NoError(t, r.Verify())
	_, err = r.StoredSize(1)
	assert.ErrorIs(t, err, ErrNoVar)
	assert.ErrorIs(t, r.ReadVar(1, nil), ErrNoVar)
	assert.ErrorIs(t, r.ReadVar(7, make([]byte, 2)), ErrSize)
}

func TestLargeChunksParallelHash(t *testing.T) {
	data := pattern(3<<20+777, 5)
	for _, bs := range []int{MinBlockSize, DefaultBlockSize, 1 << 20} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			vars := []Var{{ID: 1, Type: Bytes, Data: data}}
			f, _, sum := writeFile(t, Meta{}, vars, nil, WithBlockSize(bs), WithHashWorkers(3))
			assert.Len(t, sum.Chunks[0].BlockHashes, int(numBlocks(int64(len(data)), uint32(bs))))
			r, err := Open(f, WithHashWorkers(2))
			require.NoError(t, err)
			got := make([]byte, len(data))
			require.NoError(t, r.ReadVar(1, got))
			require.Equal(t, data, got)
			require.NoError(t, r.Verify())
			// Serial hashing gives the same file.
			g, _, sum1 := writeFile(t, Meta{}, vars, nil, WithBlockSize(bs), WithHashWorkers(1))
			assert.Equal(t, sum.Checksum, sum1.Checksum)
			assert.Equal(t, fileBytes(t, f), fileBytes(t, g))
		})
	}
}

func TestDeterministicBytes(t *testing.T) {
	vars := []Var{{ID: 1, Name: "a", Type: Float64, Data: asBytes([]float64{1, 2, 3})}, {ID: 2, Name: "b", Data: []byte("xyz")}}
	f1, _, _ := writeFile(t, Meta{CkptID: 4, Rank: 1}, vars, nil)
	f2, _, _ := writeFile(t, Meta{CkptID: 4, Rank: 1}, vars, nil)
	assert.Equal(t, fileBytes(t, f1), fileBytes(t, f2))
	// An explicit timestamp wins over the clock.
	f3, _, _ := writeFile(t, Meta{CkptID: 4, Rank: 1, Timestamp: 5}, vars, nil)
	r, err := Open(f3)
	require.NoError(t, err)
	assert.Equal(t, int64(5), r.Meta().Timestamp)
}

func TestWithoutHash(t *testing.T) {
	data := pattern(10000, 1)
	f, _, sum := writeFile(t, Meta{}, []Var{{ID: 1, Data: data}}, nil, WithoutHash())
	assert.Equal(t, [HashSize]byte{}, sum.Checksum)
	r, err := Open(f)
	require.NoError(t, err)
	assert.False(t, r.Hashed())
	got := make([]byte, len(data))
	require.NoError(t, r.ReadVar(1, got))
	assert.Equal(t, data, got)
	assert.ErrorIs(t, r.Verify(), ErrUnhashed)
}

func TestOverwritesLongerFile(t *testing.T) {
	f := newFile(t, "x.fti")
	_, err := f.WriteAt(pattern(1<<16, 9), 0)
	require.NoError(t, err)
	_, sum, err := Write(f, Meta{}, []Var{{ID: 1, Data: []byte("small")}}, nil)
	require.NoError(t, err)
	n, err := f.Size()
	require.NoError(t, err)
	assert.Equal(t, sum.FileSize, n)
	r, err := Open(f)
	require.NoError(t, err)
	require.NoError(t, r.Verify())
}

func TestCorruptionErrorMessage(t *testing.T) {
	e := &CorruptionError{Path: "/x/Ckpt1-Rank3.fti", Rank: 3, VarID: 7, Chunk: 2, Offset: 1234, Err: ErrHashMismatch}
	assert.Equal(t, "fileformat: /x/Ckpt1-Rank3.fti: rank 3: var 7: chunk 2: offset 1234: hash mismatch", e.Error())
	var ce *CorruptionError
	assert.True(t, errors.As(fmt.Errorf("ctx: %w", e), &ce))
	assert.ErrorIs(t, e, ErrHashMismatch)
}

// TestConcurrentReaders restores variables from one Reader on several
// goroutines at once (run with -race), with a test logger attached.
func TestConcurrentReaders(t *testing.T) {
	var vars []Var
	for i := 0; i < 8; i++ {
		vars = append(vars, Var{ID: int32(i), Data: pattern(parallelMin+i*1000, byte(i))})
	}
	f, _, _ := writeFile(t, Meta{}, vars, nil, WithLogger(zaptest.NewLogger(t)))
	r, err := Open(f, WithLogger(zaptest.NewLogger(t)), WithHashWorkers(2))
	require.NoError(t, err)
	errs := make(chan error, len(vars)+1)
	for _, v := range vars {
		go func() {
			got := make([]byte, len(v.Data))
			err := r.ReadVar(v.ID, got)
			if err == nil && string(got) != string(v.Data) {
				err = fmt.Errorf("var %d differs", v.ID)
			}
			errs <- err
		}()
	}
	go func() { errs <- r.Verify() }()
	for range len(vars) + 1 {
		assert.NoError(t, <-errs)
	}
}
