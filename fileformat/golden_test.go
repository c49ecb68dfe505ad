package fileformat

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/vfd"
)

// updateGoldenEnv rewrites testdata/*.fti when set to 1:
// FTIGO_UPDATE_GOLDEN=1 go test -run TestGolden ./fileformat
const updateGoldenEnv = "FTIGO_UPDATE_GOLDEN"

// goldenTimestamp is the timestamp of every golden file (ns).
const goldenTimestamp = 1700000000123456789

type goldenCase struct {
	file string
	// build writes the file's content through m.
	build func(t *testing.T, m *memFile)
	// vars is what the file restores.
	vars []Var
}

func goldenCases() []goldenCase {
	single := []Var{{ID: 7, Name: "u", Type: Float64, Data: asBytes([]float64{1.5, -2.25, 3})}}
	grownA1 := Var{ID: 1, Name: "a", Type: Int32, Data: asBytes([]int32{1, 2, 3, 4})}
	grownB1 := Var{ID: 2, Name: "b", Type: Bytes, Data: []byte("hello")}
	grown2 := []Var{
		{ID: 1, Name: "a", Type: Int32, Data: asBytes([]int32{1, 2, 3, 4, 5, 6})},
		{ID: 2, Name: "b", Type: Bytes, Data: []byte("hi")},
		{ID: 3, Name: "c", Type: Uint16, Data: asBytes([]uint16{7})},
	}
	seq := make([]byte, 3000)
	for i := range seq {
		seq[i] = byte(i % 251)
	}
	blocks := []Var{{ID: 0, Name: "seq", Type: Uint8, Data: seq}}
	// compressed.fti: 3 blocks of plateaus, the middle one noise (stored
	// raw); a lossy float64 variable; an uncompressed one.
	field := make([]float64, 384)
	x := uint32(1)
	for i := range field {
		field[i] = float64(i / 50)
		if i >= 128 && i < 256 {
			x = x*1664525 + 1013904223
			field[i] = float64(x) / 7
		}
	}
	compressed := []Var{
		{ID: 1, Name: "field", Type: Float64, Data: asBytes(field), Codec: CodecZstd},
		{ID: 2, Name: "f32", Type: Float64, Data: asBytes([]float64{1.0 / 3, 1e-3, -2.5, 1e10}), Lossy: Lossy{Mode: ToFloat32}},
		{ID: 3, Name: "raw", Type: Bytes, Data: []byte("abc")},
	}
	opts := []Option{WithBlockSize(1024)} // the golden files use 1 KiB blocks
	write := func(vars []Var, meta Meta, prev *Layout) func(t *testing.T, m *memFile) {
		return func(t *testing.T, m *memFile) {
			meta.Timestamp = goldenTimestamp
			_, _, err := Write(m, meta, vars, prev, opts...)
			require.NoError(t, err)
		}
	}
	return []goldenCase{
		{"single.fti", write(single, Meta{CkptID: 1, Rank: 0, Level: 1}, nil), single},
		{"grown.fti", func(t *testing.T, m *memFile) {
			lay, _, err := Write(&memFile{name: "ckpt1"}, Meta{CkptID: 1, Rank: 3, Timestamp: 1},
				[]Var{grownA1, grownB1}, nil, opts...)
			require.NoError(t, err)
			write(grown2, Meta{CkptID: 2, Rank: 3, Level: 2, MaxFs: 1000, PtFs: 900}, lay)(t, m)
		}, grown2},
		{"empty.fti", write(nil, Meta{CkptID: 5, Rank: 1, Level: 4}, nil), nil},
		{"blocks.fti", write(blocks, Meta{CkptID: 3, Rank: 2, Level: 3}, nil), blocks},
		{"compressed.fti", write(compressed, Meta{CkptID: 6, Rank: 0, Level: 2}, nil), compressed},
	}
}

// TestGolden checks that writing the golden inputs gives the checked-in
// bytes (the format cannot change by accident) and that the files restore.
func TestGolden(t *testing.T) {
	for _, gc := range goldenCases() {
		t.Run(gc.file, func(t *testing.T) {
			m := &memFile{name: gc.file}
			gc.build(t, m)
			path := filepath.Join("testdata", gc.file)
			if os.Getenv(updateGoldenEnv) == "1" {
				require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, path, m.b))
			}
			want, err := vfd.ReadFile(vfd.Sec2{}, path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, m.b), "%s: written bytes differ from the golden file", gc.file)

			r, err := Open(&memFile{name: gc.file, b: want})
			require.NoError(t, err)
			require.NoError(t, r.Verify())
			require.Len(t, r.Vars(), len(gc.vars))
			for _, v := range gc.vars {
				got := make([]byte, len(v.Data))
				require.NoError(t, r.ReadVar(v.ID, got))
				if v.Lossy.Mode == Exact {
					assert.Equal(t, v.Data, got)
				}
			}
		})
	}
	t.Run("broken", func(t *testing.T) {
		tests := []struct {
			file string
			want error
		}{{"broken-truncated.fti", ErrTruncated}, {"broken-flipped.fti", ErrHashMismatch}}
		single, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", "single.fti"))
		require.NoError(t, err)
		for _, tc := range tests {
			path := filepath.Join("testdata", tc.file)
			if os.Getenv(updateGoldenEnv) == "1" {
				b := append([]byte(nil), single...)
				if tc.want == ErrTruncated {
					b = b[:len(b)-100]
				} else {
					b[HeaderSize+9] ^= 0x04 // second float64, one bit of its mantissa
				}
				require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, path, b))
			}
			b, err := vfd.ReadFile(vfd.Sec2{}, path)
			require.NoError(t, err)
			r, err := Open(&memFile{name: tc.file, b: b})
			if err == nil {
				err = r.ReadVar(7, make([]byte, 24))
			}
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce, tc.file)
			assert.ErrorIs(t, err, tc.want, tc.file)
		}
	})
}

// TestGoldenDocOffsets decodes the golden files by hand with the offsets
// and definitions of docs/format/ftiff.md, independently of the decoder,
// so the document and the code cannot drift apart.
func TestGoldenDocOffsets(t *testing.T) {
	u16 := func(b []byte, off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }
	u32 := func(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
	u64 := func(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
	read := func(name string) []byte {
		b, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", name))
		require.NoError(t, err)
		return b
	}

	// single.fti: one float64 variable, id 7, "u", {1.5, -2.25, 3}.
	b := read("single.fti")
	require.Len(t, b, 64+24+32+16+88+32+192) // header, data, var record + name, BMD, VMD, 1 block hash, FB
	assert.Equal(t, []byte{0x89, 'F', 'T', 'I', '-', 'F', 'F', '\n'}, b[0:8])
	assert.Equal(t, uint16(1), u16(b, 8))    // version
	assert.Equal(t, uint16(64), u16(b, 10))  // header size
	assert.Equal(t, uint16(192), u16(b, 12)) // FB size
	assert.Equal(t, uint64(1), u64(b, 16))   // checkpoint id
	assert.Equal(t, uint32(0), u32(b, 24))   // rank
	assert.Equal(t, byte(1), b[28])          // level
	assert.Equal(t, asBytes([]float64{1.5, -2.25, 3}), b[64:88])
	mb := b[88 : len(b)-192]
	assert.Equal(t, uint32(7), u32(mb, 0))   // var id
	assert.Equal(t, byte(10), mb[4])         // float64
	assert.Equal(t, uint16(1), u16(mb, 6))   // name length
	assert.Equal(t, uint32(8), u32(mb, 8))   // element size
	assert.Equal(t, uint64(24), u64(mb, 16)) // bytes
	assert.Equal(t, []byte("u\x00\x00\x00\x00\x00\x00\x00"), mb[24:32])
	bmd := mb[32:48]
	assert.Equal(t, uint32(1), u32(bmd, 0))  // chunks in block
	assert.Equal(t, uint64(24), u64(bmd, 8)) // dbsize
	v := mb[48:136]
	assert.Equal(t, uint32(7), u32(v, 0))   // id
	assert.Equal(t, uint32(0), u32(v, 4))   // idx
	assert.Equal(t, uint32(0), u32(v, 8))   // container id
	assert.Equal(t, byte(1), v[12])         // hascontent
	assert.Equal(t, uint64(0), u64(v, 16))  // dptr
	assert.Equal(t, uint64(64), u64(v, 24)) // fptr
	assert.Equal(t, uint64(24), u64(v, 32)) // chunksize
	assert.Equal(t, uint64(24), u64(v, 40)) // containersize
	assert.Equal(t, uint64(0), u64(v, 48))  // first block hash
	blockHash := blake3.Sum256(b[64:88])
	assert.Equal(t, blockHash[:], mb[136:168])
	ch := blake3.New()
	_, _ = ch.Write([]byte{24, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0}) // u64 size 24, u32 block size 1024
	_, _ = ch.Write(blockHash[:])
	assert.Equal(t, ch.Sum(nil), v[56:88])
	fb := b[len(b)-192:]
	assert.Equal(t, []byte("FTIFF-FB"), fb[0:8])
	assert.Equal(t, uint16(1), u16(fb, 8))
	assert.Equal(t, uint16(192), u16(fb, 10))
	assert.Equal(t, uint32(0), u32(fb, 12))               // flags
	assert.Equal(t, uint32(1024), u32(fb, 16))            // dCP block size
	assert.Equal(t, uint32(1), u32(fb, 20))               // vars
	assert.Equal(t, uint32(1), u32(fb, 24))               // blocks
	assert.Equal(t, uint32(1), u32(fb, 28))               // chunks
	assert.Equal(t, uint64(24), u64(fb, 32))              // ckptSize
	assert.Equal(t, uint64(len(b)), u64(fb, 40))          // fs
	assert.Equal(t, uint64(0), u64(fb, 48))               // maxFs
	assert.Equal(t, uint64(0), u64(fb, 56))               // ptFs
	assert.Equal(t, uint64(goldenTimestamp), u64(fb, 64)) // timestamp
	assert.Equal(t, uint64(88), u64(fb, 72))              // metaOff
	assert.Equal(t, uint64(len(mb)), u64(fb, 80))         // metaSize
	assert.Equal(t, uint64(1), u64(fb, 88))               // block hashes
	metaHash := blake3.Sum256(mb)
	assert.Equal(t, metaHash[:], fb[96:128])
	checksum := blake3.Sum256(v[56:88]) // over the chunk hashes in file order
	assert.Equal(t, checksum[:], fb[128:160])
	self := blake3.Sum256(append(append([]byte(nil), b[:64]...), fb[:160]...))
	assert.Equal(t, self[:], fb[160:192])

	// grown.fti: block 0 = {a: 16 B, b: 5 B container holding 2}, block 1 = {a: +8 B, c: 2 B}.
	b = read("grown.fti")
	fb = b[len(b)-192:]
	assert.Equal(t, uint64(2), u64(b, 16))       // ckpt id
	assert.Equal(t, uint32(3), u32(b, 24))       // rank
	assert.Equal(t, byte(2), b[28])              // level
	assert.Equal(t, uint32(3), u32(fb, 20))      // vars
	assert.Equal(t, uint32(2), u32(fb, 24))      // blocks
	assert.Equal(t, uint32(4), u32(fb, 28))      // chunks
	assert.Equal(t, uint64(24+2+2), u64(fb, 32)) // ckptSize
	assert.Equal(t, uint64(1000), u64(fb, 48))   // maxFs
	assert.Equal(t, uint64(900), u64(fb, 56))    // ptFs
	metaOff := int(u64(fb, 72))
	assert.Equal(t, 64+16+5+8+2, metaOff)
	assert.Equal(t, asBytes([]int32{1, 2, 3, 4}), b[64:80])
	assert.Equal(t, []byte("hi\x00\x00\x00"), b[80:85]) // shrunk: empty tail is zero
	assert.Equal(t, asBytes([]int32{5, 6}), b[85:93])
	assert.Equal(t, asBytes([]uint16{7}), b[93:95])
	mb = b[metaOff : len(b)-192]
	p := 3 * 32 // three variable records with 1-byte names
	type rec struct{ id, idx, cont, has, dptr, fptr, size, csize int }
	want := [][]rec{
		{{1, 0, 0, 1, 0, 64, 16, 16}, {2, 1, 0, 1, 0, 80, 2, 5}},
		{{1, 0, 1, 1, 16, 85, 8, 8}, {3, 2, 0, 1, 0, 93, 2, 2}},
	}
	for bi, blk := range want {
		assert.Equal(t, uint32(len(blk)), u32(mb, p), "block %d", bi)
		p += 16
		for _, w := range blk {
			got := rec{int(u32(mb, p)), int(u32(mb, p+4)), int(u32(mb, p+8)), int(mb[p+12]),
				int(u64(mb, p+16)), int(u64(mb, p+24)), int(u64(mb, p+32)), int(u64(mb, p+40))}
			assert.Equal(t, w, got, "block %d", bi)
			p += 88
		}
	}
	assert.Equal(t, 4*32, len(mb)-p) // one block hash per non-empty chunk

	// blocks.fti: 3000 bytes in dCP blocks of 1024: three block hashes.
	b = read("blocks.fti")
	fb = b[len(b)-192:]
	assert.Equal(t, uint64(3), u64(fb, 88))
	mb = b[64+3000 : len(b)-192]
	bh := mb[len(mb)-96:]
	for k := 0; k < 3; k++ {
		h := blake3.Sum256(b[64+1024*k : 64+min(1024*(k+1), 3000)])
		assert.Equal(t, h[:], bh[32*k:32*k+32], "block %d", k)
	}

	// empty.fti: header and FB only, around an empty metadata block.
	b = read("empty.fti")
	require.Len(t, b, 64+192)
	fb = b[64:]
	assert.Equal(t, uint64(64), u64(fb, 72))
	assert.Equal(t, uint64(0), u64(fb, 80))
}
