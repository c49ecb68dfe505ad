package fileformat

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// smallFile returns the bytes of a small file with two blocks, a shrunk
// variable (so a container has an empty tail), an empty variable and
// several dCP blocks per chunk, plus the variables it holds.
func smallFile(t testing.TB) ([]byte, []Var) {
	t.Helper()
	v1 := Var{ID: 1, Name: "u", Type: Float64, Data: asBytes([]float64{1, 2, 3, 4, 5, 6, 7, 8})}
	v2 := Var{ID: 2, Name: "n", Type: Int32, Data: asBytes([]int32{10, 20, 30, 40})}
	m := &memFile{name: "small.fti"}
	lay, _, err := Write(m, Meta{CkptID: 1, Rank: 5}, []Var{v1, v2}, nil, WithClock(fixedClock))
	require.NoError(t, err)
	v1.Data = asBytes([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
		21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
		41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60,
		61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80,
		81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100,
		101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120,
		121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140})
	v2.Data = asBytes([]int32{10, 20})
	v3 := Var{ID: 3, Name: "empty", Type: Uint16, Data: []byte{}}
	m = &memFile{name: "small.fti"}
	_, _, err = Write(m, Meta{CkptID: 2, Rank: 5, Level: 1}, []Var{v1, v2, v3}, lay, WithClock(fixedClock), WithBlockSize(MinBlockSize))
	require.NoError(t, err)
	return m.b, []Var{v1, v2, v3}
}

// openVerifyRestore runs everything a restart does on b and returns the
// first error; with no error it checks that every variable restores to
// exactly want.
func openVerifyRestore(t *testing.T, b []byte, want []Var) error {
	m := &memFile{name: "small.fti", b: b}
	r, err := Open(m)
	if err != nil {
		return err
	}
	for _, v := range want {
		n, err := r.StoredSize(v.ID)
		if err != nil {
			return err
		}
		got := make([]byte, n)
		if err := r.ReadVar(v.ID, got); err != nil {
			assert.Equal(t, make([]byte, n), got, "dst must be zeroed on error")
			return err
		}
		if string(got) != string(v.Data) {
			t.Fatalf("var %d restored with wrong data and no error", v.ID)
		}
	}
	return r.Verify()
}

func TestCorruptionEveryByte(t *testing.T) {
	good, vars := smallFile(t)
	require.NoError(t, openVerifyRestore(t, append([]byte(nil), good...), vars))
	for i := range good {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			b := append([]byte(nil), good...)
			b[i] ^= mask
			err := openVerifyRestore(t, b, vars)
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("byte %d ^ %#x: got %v, want a *CorruptionError", i, mask, err)
			}
			if !errors.Is(err, ErrHashMismatch) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrVersion) {
				t.Fatalf("byte %d ^ %#x: %v matches no corruption sentinel", i, mask, err)
			}
		}
	}
}

func TestCorruptionTruncateEveryLength(t *testing.T) {
	good, vars := smallFile(t)
	for n := 0; n < len(good); n++ {
		b := append([]byte(nil), good[:n]...)
		err := openVerifyRestore(t, b, vars)
		require.ErrorIs(t, err, ErrTruncated, "length %d", n)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce, "length %d", n)
	}
	// Also a file cut and then zero-extended to its full size (a hole where
	// the crash lost the tail) is never good.
	for _, n := range []int{HeaderSize, len(good) / 2, len(good) - FBSize, len(good) - 1} {
		b := append(append([]byte(nil), good[:n]...), make([]byte, len(good)-n)...)
		err := openVerifyRestore(t, b, vars)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce, "cut at %d and zero-filled", n)
	}
}

func TestCorruptionLocatesChunk(t *testing.T) {
	good, _ := smallFile(t)
	m := &memFile{name: "small.fti", b: append([]byte(nil), good...)}
	r, err := Open(m)
	require.NoError(t, err)
	s := r.Summary()
	// Flip a byte in the second dCP block of var 1's first chunk.
	var ci int
	for ci = range s.Chunks {
		if s.Chunks[ci].VarID == 1 && s.Chunks[ci].Size > MinBlockSize {
			break
		}
	}
	c := s.Chunks[ci]
	require.Greater(t, c.Size, int64(MinBlockSize), "test needs a multi-block chunk")
	off := c.Fptr + MinBlockSize + 3
	m.b[off] ^= 0x10
	got := make([]byte, r.vars[0].Size)
	err = r.ReadVar(1, got)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, &CorruptionError{Path: "small.fti", Rank: 5, VarID: 1, Chunk: ci, Offset: c.Fptr + MinBlockSize,
		Err: ce.Err}, ce)
	assert.ErrorIs(t, err, ErrHashMismatch)
	assert.Equal(t, make([]byte, len(got)), got)
	// Var 2 lives in other chunks and still restores.
	n, err := r.StoredSize(2)
	require.NoError(t, err)
	require.NoError(t, r.ReadVar(2, make([]byte, n)))
	require.ErrorIs(t, r.Verify(), ErrHashMismatch)
}

func TestOpenNotFTIFF(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"magic prefix", headerMagic[:5], ErrTruncated},
		{"text", []byte("hello, this is not a checkpoint file at all, just some text that goes on for a while"), ErrNotFTIFF},
		{"short text", []byte("hi"), ErrNotFTIFF},
		{"zeros", make([]byte, 4096), ErrNotFTIFF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(&memFile{name: "x", b: tc.b})
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestOpenVersion(t *testing.T) {
	good, _ := smallFile(t)
	b := append([]byte(nil), good...)
	le.PutUint16(b[8:], VersionCodec+1)
	le.PutUint16(b[len(b)-FBSize+8:], VersionCodec+1)
	_, err := Open(&memFile{name: "x", b: b})
	assert.ErrorIs(t, err, ErrVersion)
	assert.Contains(t, err.Error(), "version 4")
}

// TestReadErrorPropagates checks that an I/O error that is not about the
// content is returned as is, not as corruption.
func TestReadErrorPropagates(t *testing.T) {
	good, _ := smallFile(t)
	boom := errors.New("disk on fire")
	f := &failFile{memFile: memFile{name: "x", b: good}, err: boom, after: 4}
	r, err := Open(f)
	require.NoError(t, err)
	err = r.Verify()
	require.ErrorIs(t, err, boom)
	var ce *CorruptionError
	assert.False(t, errors.As(err, &ce), fmt.Sprint(err))
}

type failFile struct {
	memFile
	err   error
	after int
	n     int
}

func (f *failFile) ReadAt(p []byte, off int64) (int, error) {
	f.n++
	if f.n > f.after {
		return 0, f.err
	}
	return f.memFile.ReadAt(p, off)
}

// TestVerifiedDataSkipsOnlyReadHashes pins down what WithVerifiedData
// changes: ReadVar and ReadVarAt copy without checking block hashes (the
// caller vouches the bytes were verified and cannot change), while the
// metadata checks of Open and every check of Verify still run.
func TestVerifiedDataSkipsOnlyReadHashes(t *testing.T) {
	good, vars := smallFile(t)
	r, err := Open(&memFile{name: "small.fti", b: good}, WithVerifiedData())
	require.NoError(t, err)
	for _, v := range vars {
		got := make([]byte, len(v.Data))
		require.NoError(t, r.ReadVar(v.ID, got))
		require.Equal(t, v.Data, got)
		if len(v.Data) > 3 {
			part := make([]byte, len(v.Data)-3)
			require.NoError(t, r.ReadVarAt(v.ID, part, 2))
			require.Equal(t, v.Data[2:len(v.Data)-1], part)
		}
	}
	require.NoError(t, r.Verify())

	// A data byte changed: without the option ReadVar refuses it, with it
	// ReadVar copies it (the check was the caller's), Verify still refuses.
	plain, err := Open(&memFile{name: "small.fti", b: good})
	require.NoError(t, err)
	c := plain.Summary().Chunks[0]
	bad := append([]byte(nil), good...)
	bad[c.Fptr] ^= 0x40
	got := make([]byte, len(vars[0].Data))
	pr, err := Open(&memFile{name: "small.fti", b: bad})
	require.NoError(t, err)
	require.ErrorIs(t, pr.ReadVar(c.VarID, got[:mustStored(t, pr, c.VarID)]), ErrHashMismatch)
	vr, err := Open(&memFile{name: "small.fti", b: bad}, WithVerifiedData())
	require.NoError(t, err)
	n := mustStored(t, vr, c.VarID)
	require.NoError(t, vr.ReadVar(c.VarID, got[:n]))
	require.ErrorIs(t, vr.Verify(), ErrHashMismatch)

	// Metadata is still checked at Open.
	meta := append([]byte(nil), good...)
	meta[len(meta)-FBSize-1] ^= 0x01
	_, err = Open(&memFile{name: "small.fti", b: meta}, WithVerifiedData())
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
}

func mustStored(t *testing.T, r *Reader, id int32) int64 {
	t.Helper()
	n, err := r.StoredSize(id)
	require.NoError(t, err)
	return n
}

// TestVerifyLentBytes: Verify of a file that lends its bytes in place
// (an image being loaded into memory) hashes them there and finds the
// same corruption as through copies.
func TestVerifyLentBytes(t *testing.T) {
	good, _ := smallFile(t)
	load := func(b []byte) *vfd.Loaded {
		return vfd.Load(&memFile{name: "small.fti", b: b}, int64(len(b)), 64, 256)
	}
	l := load(good)
	r, err := Open(l)
	require.NoError(t, err)
	require.NoError(t, r.Verify())
	require.NoError(t, l.Close())
	c := r.Summary().Chunks[0]
	bad := append([]byte(nil), good...)
	bad[c.Fptr+c.Size-1] ^= 0x02
	l = load(bad)
	r, err = Open(l)
	require.NoError(t, err)
	require.ErrorIs(t, r.Verify(), ErrHashMismatch)
	require.NoError(t, l.Close())
}
