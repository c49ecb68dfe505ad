package dhdf

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

// TestSparse20GiBFiles replaces files of the tiny set by 20 GiB sparse
// files: an MHF of zeros is refused; an AHF or MHF followed by 20 GiB of
// zeros (its superblock's end of file moved) opens and verifies. None of
// it allocates more than 64 MiB.
func TestSparse20GiBFiles(t *testing.T) {
	const size = 20 << 30
	for _, tc := range []struct {
		name, file string
		zeros      bool
	}{
		{"MHF of zeros", "tiny.h5", true},
		{"AHF of zeros", "tiny.2.h5", true},
		{"MHF with a sparse tail", "tiny.h5", false},
		{"AHF with a sparse tail", "tiny.1.h5", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTinySet(t, vfd.Sec2{}, filepath.Join(dir, "tiny"))
			p := filepath.Join(dir, tc.file)
			var head []byte
			if !tc.zeros {
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				head = bytes.Clone(b)
				binary.LittleEndian.PutUint64(head[28:], size)
				binary.LittleEndian.PutUint32(head[44:], h5.Lookup3(head[:44], 0))
			}
			require.NoError(t, os.WriteFile(p, head, 0o644))
			require.NoError(t, os.Truncate(p, size))
			var st syscall.Stat_t
			require.NoError(t, syscall.Stat(p, &st))
			if st.Blocks*512 > 16<<20 {
				t.Skipf("%s does not hold sparse files", dir)
			}
			var a, b runtime.MemStats
			runtime.ReadMemStats(&a)
			err := Verify(filepath.Join(dir, "tiny.h5"), Options{})
			runtime.ReadMemStats(&b)
			if tc.zeros {
				require.ErrorIs(t, err, h5.ErrNotHDF5)
				assert.Contains(t, err.Error(), p)
			} else {
				require.NoError(t, err)
			}
			assert.Less(t, b.TotalAlloc-a.TotalAlloc, uint64(64<<20))
		})
	}
}

// TestReadLimits: ReadChunk and ReadSDS refuse more than MaxRead bytes
// with ErrTooLarge, and Verify still checks such chunks (in pieces).
func TestReadLimits(t *testing.T) {
	c := vfd.NewCore()
	writeTinySet(t, c, "tiny")
	s, err := Open("tiny.h5", Options{Driver: c, MaxRead: 11})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.ReadChunk("t", "t_1_0") // 2×3 int16 = 12 bytes
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = s.ReadChunk("u", "u_2_0") // 2 float64 = 16 bytes
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = s.ReadSDS("u")
	require.ErrorIs(t, err, ErrTooLarge)
	require.NoError(t, Verify("tiny.h5", Options{Driver: c, MaxRead: 11}))
}

// TestOpensSetsWithoutTableChecksums: a set written before the tables
// had a checksum_crc32c attribute (testdata/nocrc, the tiny set as the
// earlier writer made it) still opens and verifies, with every other
// check; its rows must still be canonical.
func TestOpensSetsWithoutTableChecksums(t *testing.T) {
	require.NoError(t, Verify("testdata/nocrc/tiny.h5", Options{}))
	s, err := Open("testdata/nocrc/tiny.h5", Options{})
	require.NoError(t, err)
	defer s.Close()
	got, err := s.ReadSDS("t")
	require.NoError(t, err)
	want, _ := binary.Append(nil, binary.LittleEndian, []int16{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32})
	assert.Equal(t, want, got)
	// Without the checksum a changed host name goes unseen, but a byte
	// after a name's NUL is still refused.
	dir := t.TempDir()
	for _, n := range []string{"tiny.h5", "tiny.1.h5", "tiny.2.h5"} {
		b, err := os.ReadFile("testdata/nocrc/" + n)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), b, 0o644))
	}
	mhf := filepath.Join(dir, "tiny.h5")
	b, err := os.ReadFile(mhf)
	require.NoError(t, err)
	f, err := h5.Open(bytes.NewReader(b), int64(len(b)), mhf)
	require.NoError(t, err)
	o, err := f.Lookup("/File_Info")
	require.NoError(t, err)
	b[int(o.DataAddr)+514+4+len("tiny.1.h5")+2] = 'x'
	require.NoError(t, os.WriteFile(mhf, b, 0o644))
	err = Verify(mhf, Options{})
	require.ErrorIs(t, err, ErrInconsistent)
	assert.Contains(t, err.Error(), "File_Info row 1")
}
