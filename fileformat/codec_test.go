package fileformat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// dataKinds are the contents the compression tests run on: bytes that
// compress (a smooth field, mostly zeros) and bytes that do not.
func dataKinds(n int, seed uint64) map[string][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	random := make([]byte, n)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	smooth := make([]byte, n) // a field of plateaus
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(smooth[i:], math.Float64bits(math.Floor(math.Sin(float64(i)/4096)*16)/16))
	}
	sparse := make([]byte, n)
	for i := 0; i < n; i += 10 {
		sparse[i] = byte(rng.Uint32())
	}
	// mixed: compressible blocks after incompressible ones.
	mixed := append(append([]byte(nil), random[:n/2]...), sparse[n/2:]...)
	return map[string][]byte{"random": random, "smooth": smooth, "sparse": sparse, "mixed": mixed}
}

// checkFile opens the bytes of f, reads every variable whole and by
// ranges, verifies the file, copies it and checks the copy.
func checkFile(t *testing.T, b []byte, vars []Var) *Reader {
	t.Helper()
	r, err := Open(&memFile{name: "c.fti", b: b})
	require.NoError(t, err)
	require.NoError(t, r.Verify())
	for _, v := range vars {
		got := make([]byte, len(v.Data))
		require.NoError(t, r.ReadVar(v.ID, got))
		if v.Lossy.Mode == Exact {
			require.True(t, bytes.Equal(v.Data, got), "var %d", v.ID)
		}
		es := int(max(v.Type.Size(), v.ElemSize, 1))
		for _, rg := range [][2]int{{0, len(v.Data)}, {es, len(v.Data) / 2}, {len(v.Data) / 3 / es * es, len(v.Data) - len(v.Data)/3/es*es}} {
			if rg[1] < 0 || rg[0]+rg[1] > len(v.Data) {
				continue
			}
			part := make([]byte, rg[1])
			require.NoError(t, r.ReadVarAt(v.ID, part, int64(rg[0])))
			assert.True(t, bytes.Equal(got[rg[0]:rg[0]+rg[1]], part), "var %d range %v", v.ID, rg)
		}
	}
	cp := &memFile{name: "copy.fti"}
	n, err := r.CopyTo(cp)
	require.NoError(t, err)
	require.Equal(t, int64(len(b)), n)
	require.True(t, bytes.Equal(b, cp.b))
	return r
}

// TestCompressRoundTrip writes every element type compressed and not,
// on every kind of data, and checks the bytes restored, the file's
// verification, its copy, and that blocks that do not shrink are raw.
func TestCompressRoundTrip(t *testing.T) {
	const bs = 4096
	for kind, data := range dataKinds(20*bs+48, 7) {
		for typ := Bytes; typ < numElemTypes; typ++ {
			es := typ.Size()
			if typ == Struct {
				es = 24
			}
			n := len(data) / int(es) * int(es)
			for _, codec := range []Codec{CodecNone, CodecZstd} {
				name := kind + "/" + typ.String() + "/" + codec.String()
				t.Run(name, func(t *testing.T) {
					vars := []Var{
						{ID: 1, Name: "x", Type: typ, ElemSize: es, Data: data[:n], Codec: codec},
						{ID: 2, Name: "raw", Type: Uint8, Data: data[:1000]},
						{ID: 3, Name: "empty", Type: typ, ElemSize: es, Codec: codec},
					}
					m := &memFile{name: "c.fti"}
					_, sum, err := Write(m, Meta{CkptID: 1, Rank: 2, Level: 3}, vars, nil, WithBlockSize(bs), WithClock(fixedClock))
					require.NoError(t, err)
					assert.Equal(t, int64(len(m.b)), sum.FileSize)
					assert.Equal(t, int64(n+1000), sum.Logical)
					r := checkFile(t, m.b, vars)
					want := Version
					if codec != CodecNone {
						want = VersionCodec
					}
					assert.Equal(t, want, r.Version())
					vi, err := r.Var(1)
					require.NoError(t, err)
					assert.Equal(t, codec, vi.Codec)
					assert.True(t, vi.Exact())
					assert.Equal(t, r.Summary().Stored, sum.Stored)
					switch {
					case codec == CodecNone || kind == "random":
						assert.Equal(t, int64(n), vi.Stored, "stored raw")
					case kind == "mixed":
						assert.Less(t, vi.Stored, int64(n)*9/10, "compressed after the random half")
					default:
						assert.Less(t, vi.Stored, int64(n)*3/4, "compressed")
					}
					for _, c := range sum.Chunks {
						for j, s := range c.Stored {
							assert.LessOrEqual(t, int64(s), blockLen(c.Size, bs, j))
						}
					}
				})
			}
		}
	}
}

// TestCompressIncompressibleRaw checks that random blocks are stored as
// they are: the file is no larger than the uncompressed one plus the
// stored-size and error-bound tables.
func TestCompressIncompressibleRaw(t *testing.T) {
	data := dataKinds(1<<20, 3)["random"]
	vars := []Var{{ID: 0, Type: Bytes, Data: data}}
	_, plain, err := Write(&memFile{name: "a"}, Meta{}, vars, nil)
	require.NoError(t, err)
	vars[0].Codec = CodecZstd
	_, comp, err := Write(&memFile{name: "b"}, Meta{}, vars, nil)
	require.NoError(t, err)
	nb := numBlocks(int64(len(data)), DefaultBlockSize)
	assert.Equal(t, plain.FileSize+codecTablesSize(uint64(nb), 1), comp.FileSize)
	assert.Equal(t, int64(len(data)), comp.Stored)
	assert.InDelta(t, 1.0, comp.Ratio(), 1e-9)
}

// TestLossyModes checks each lossy mode on float64 and float32 data:
// restored values within the bound recorded, the bound reported, an
// exact variable's bound zero, and modes refused where they do not apply.
func TestLossyModes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	f64 := make([]float64, 5000)
	for i := range f64 {
		f64[i] = (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(8))-4)
	}
	f64[0], f64[1], f64[2], f64[3] = 0, math.Inf(-1), 1e-30, 3.5
	f32 := make([]float32, 5000)
	for i := range f32 {
		f32[i] = float32(f64[i])
	}
	tests := []struct {
		name   string
		typ    ElemType
		data   []byte
		lossy  Lossy
		maxRel float64
	}{
		{"f64 to f32", Float64, asBytes(f64), Lossy{Mode: ToFloat32}, 0x1p-24},
		{"f64 to f16", Float64, asBytes(f64), Lossy{Mode: ToFloat16}, math.Inf(1)}, // subnormal halves lose it all
		{"f32 to f16", Float32, asBytes(f32), Lossy{Mode: ToFloat16}, math.Inf(1)},
		{"f64 mantissa 20", Float64, asBytes(f64), Lossy{Mode: Mantissa, Bits: 20}, 0x1p-20},
		{"f64 mantissa 52", Float64, asBytes(f64), Lossy{Mode: Mantissa, Bits: 52}, 0},
		{"f32 mantissa 10", Float32, asBytes(f32), Lossy{Mode: Mantissa, Bits: 10}, 0x1p-10},
	}
	for _, tc := range tests {
		for _, codec := range []Codec{CodecNone, CodecZstd} {
			t.Run(tc.name+"/"+codec.String(), func(t *testing.T) {
				vars := []Var{{ID: 4, Name: "field", Type: tc.typ, Data: tc.data, Codec: codec, Lossy: tc.lossy},
					{ID: 5, Name: "exact", Type: Float64, Data: asBytes(f64[:100])}}
				m := &memFile{name: "l.fti"}
				_, sum, err := Write(m, Meta{CkptID: 2}, vars, nil, WithBlockSize(MinBlockSize))
				require.NoError(t, err)
				assert.Equal(t, int64(len(tc.data)+800), sum.Logical)
				r := checkFile(t, m.b, vars)
				assert.Equal(t, VersionCodec, r.Version())
				vi, err := r.Var(4)
				require.NoError(t, err)
				assert.Equal(t, tc.lossy, vi.Lossy)
				assert.False(t, vi.Exact())
				assert.Equal(t, int64(len(tc.data)), vi.Size)
				got := make([]byte, len(tc.data))
				require.NoError(t, r.ReadVar(4, got))
				var maxAbs, maxRel float64
				es := int(tc.typ.Size())
				for i := 0; i < len(got)/es; i++ {
					var x, y float64
					if es == 8 {
						x, y = math.Float64frombits(le.Uint64(tc.data[8*i:])), math.Float64frombits(le.Uint64(got[8*i:]))
					} else {
						x, y = float64(math.Float32frombits(le.Uint32(tc.data[4*i:]))), float64(math.Float32frombits(le.Uint32(got[4*i:])))
					}
					if x == y {
						continue
					}
					d := math.Abs(x - y)
					maxAbs = max(maxAbs, d)
					if x != 0 {
						maxRel = max(maxRel, d/math.Abs(x))
					}
				}
				assert.Equal(t, maxAbs, vi.Bound.Abs, "the recorded bound is the measured one")
				assert.LessOrEqual(t, maxRel, vi.Bound.Rel)
				assert.LessOrEqual(t, vi.Bound.Rel, tc.maxRel)
				ex, err := r.Var(5)
				require.NoError(t, err)
				assert.True(t, ex.Exact())
				assert.Equal(t, ErrorBound{}, ex.Bound)
			})
		}
	}
	for _, bad := range []struct {
		typ   ElemType
		lossy Lossy
	}{{Int64, Lossy{Mode: ToFloat32}}, {Float32, Lossy{Mode: ToFloat32}}, {Float64, Lossy{Mode: Mantissa, Bits: 53}},
		{Float32, Lossy{Mode: Mantissa, Bits: 24}}, {Complex128, Lossy{Mode: ToFloat16}}, {Float64, Lossy{Mode: 9}}, {Float64, Lossy{Mode: ToFloat32, Bits: 3}}} {
		_, _, err := Write(&memFile{name: "x"}, Meta{}, []Var{{ID: 0, Type: bad.typ, Data: make([]byte, 16), Lossy: bad.lossy}}, nil)
		assert.ErrorIs(t, err, ErrInvalid, "%v %v", bad.typ, bad.lossy)
	}
}

// TestFloat16 checks the binary16 conversion on its edge values.
func TestFloat16(t *testing.T) {
	for _, tc := range []struct {
		x float64
		h uint16
	}{{0, 0}, {math.Copysign(0, -1), 0x8000}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00}, {1e6, 0x7c00},
		{math.Inf(-1), 0xfc00}, {0x1p-14, 0x0400}, {0x1p-24, 0x0001}, {0x1p-25, 0}, {0x1.8p-25, 0x0001}, {1 + 0x1p-11, 0x3c00}, {1 + 0x1.8p-11, 0x3c01},
		{0x1.ffcp-15, 0x0400}} {
		assert.Equal(t, tc.h, f64ToF16(tc.x), "%g", tc.x)
	}
	assert.True(t, math.IsNaN(f16ToF64(f64ToF16(math.NaN()))))
	for h := 0; h < 0x10000; h++ {
		if x := f16ToF64(uint16(h)); !math.IsNaN(x) {
			require.Equal(t, uint16(h), f64ToF16(x), "%#x", h)
		}
	}
}

// compressedFile writes a file whose variable 1 is compressed (smooth
// data, 8 blocks of 1 KiB) and returns its bytes and the data.
func compressedFile(t testing.TB) ([]byte, []byte, *Reader) {
	data := dataKinds(8*1024, 1)["smooth"]
	m := &memFile{name: "c.fti"}
	_, _, err := Write(m, Meta{CkptID: 3, Rank: 1}, []Var{{ID: 1, Type: Float64, Data: data, Codec: CodecZstd}}, nil,
		WithBlockSize(1024), WithClock(fixedClock))
	require.NoError(t, err)
	r, err := Open(&memFile{name: "c.fti", b: m.b})
	require.NoError(t, err)
	return m.b, data, r
}

// TestCompressedCorruption flips a byte in each compressed block in turn:
// ReadVar, ReadVarAt and Verify report a hash mismatch at the block's
// offset in the file, and ReadVar leaves the destination zeroed.
func TestCompressedCorruption(t *testing.T) {
	b, data, r := compressedFile(t)
	c := r.chunk[0]
	require.True(t, c.Compressed)
	soff := storedOffsets(&c)
	for j := range c.Stored {
		require.Less(t, int64(c.Stored[j]), int64(1024), "block %d compressed", j)
		for _, at := range []int64{0, int64(c.Stored[j]) / 2, int64(c.Stored[j]) - 1} {
			bad := append([]byte(nil), b...)
			off := c.Fptr + soff[j] + at
			bad[off] ^= 0x5a
			br, err := Open(&memFile{name: "bad.fti", b: bad})
			require.NoError(t, err, "the metadata is intact")
			dst := bytes.Repeat([]byte{1}, len(data))
			err = br.ReadVar(1, dst)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, ErrHashMismatch)
			assert.Equal(t, c.Fptr+soff[j], ce.Offset, "block %d, byte %d", j, at)
			assert.Equal(t, int32(1), ce.VarID)
			assert.Equal(t, make([]byte, len(data)), dst)
			err = br.ReadVarAt(1, make([]byte, 8), int64(j)*1024+8)
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, c.Fptr+soff[j], ce.Offset)
			err = br.Verify()
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, ErrHashMismatch)
			assert.Equal(t, c.Fptr+soff[j], ce.Offset)
		}
	}
}

// TestDecompressionBomb replaces a compressed block by a zstd frame of
// the same stored length that claims 1 TiB of content: the read is
// refused as a damaged block, without allocating anything near it.
func TestDecompressionBomb(t *testing.T) {
	b, data, r := compressedFile(t)
	c := r.chunk[0]
	n := int(c.Stored[2])
	require.GreaterOrEqual(t, n, 14)
	frame := make([]byte, n)
	binary.LittleEndian.PutUint32(frame, 0xFD2FB528) // zstd magic
	frame[4] = 0xE0                                  // single segment, 8-byte content size
	binary.LittleEndian.PutUint64(frame[5:], 1<<40)
	frame[13] = 0x01 // last block, raw, size 0
	soff := storedOffsets(&c)
	bad := append([]byte(nil), b...)
	copy(bad[c.Fptr+soff[2]:], frame)
	br, err := Open(&memFile{name: "bomb.fti", b: bad})
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	dst := make([]byte, len(data))
	err = br.ReadVar(1, dst)
	runtime.ReadMemStats(&after)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, ErrHashMismatch)
	assert.Contains(t, err.Error(), "claims 1099511627776 bytes")
	assert.Equal(t, c.Fptr+soff[2], ce.Offset)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "nothing near the claimed size is allocated")
	assert.ErrorIs(t, br.Verify(), ErrHashMismatch)

	// The decoder never writes past the block either, whatever the frame.
	enc, err := getEncoder()
	require.NoError(t, err)
	big := enc.EncodeAll(make([]byte, 4096), nil)
	putEncoder(enc)
	err = decompressBlock(make([]byte, 1024), big)
	assert.ErrorIs(t, err, errDecode)
}

// TestCompressedStoredSizeChecks corrupts the stored-size table: a size
// above the block's length, zero, or different from the length of a
// block of an uncompressed variable is refused by Open.
func TestCompressedStoredSizeChecks(t *testing.T) {
	_, _, r := compressedFile(t)
	for _, n := range []uint32{0, 1025} {
		chunks := append([]ChunkInfo(nil), r.chunk...)
		chunks[0].Stored = append([]uint32(nil), chunks[0].Stored...)
		chunks[0].Stored[1] = n
		err := checkStoredTable(r, chunks)
		assert.ErrorIs(t, err, ErrCorrupt, "stored size %d", n)
	}
}

// checkStoredTable reseals a copy of r's file with the stored sizes of
// chunks and opens it.
func checkStoredTable(r *Reader, chunks []ChunkInfo) error {
	b := make([]byte, r.fb.fs)
	if err := r.readAt(0, b, 0); err != nil {
		return err
	}
	mb := b[r.fb.metaOff : r.fb.fs-FBSize]
	p := int(r.fb.metaSize - r.extLen - codecTablesSize(r.fb.numBHashes, len(r.vars)))
	for _, c := range chunks {
		for j := range c.BlockHashes {
			le.PutUint32(mb[p:], uint32(c.storedLen(j, r.fb.blockSize)))
			p += 4
		}
	}
	_, err := Open(&memFile{name: "sealed.fti", b: resealed(b)})
	if err == nil {
		return errors.New("opened")
	}
	return err
}

// TestCompressedDeltaChain writes a chain whose layers change some blocks
// of a compressed variable, grow it, and switch codecs, through
// WriteDelta and through PlanDelta: every image reads the state it was
// written from, verifies, copies to a file that verifies, and (when the
// codecs did not change) equals byte for byte the file Write writes for
// that state.
func TestCompressedDeltaChain(t *testing.T) {
	const bs = 1024
	kinds := dataKinds(40*bs, 9)
	state := func(step int) []Var {
		a := bytes.Clone(kinds["sparse"])
		for i := 0; i < step; i++ {
			a[(7*i+3)*bs+5] ^= 0xff // one block changes per step
		}
		if step >= 2 {
			a = append(a, kinds["smooth"][:5*bs]...) // grows
		}
		codecA := CodecZstd
		codecB := CodecNone
		switch step {
		case 3:
			codecB = CodecZstd
		case 4:
			codecA = CodecNone
		}
		return []Var{
			{ID: 1, Name: "a", Type: Uint8, Data: a, Codec: codecA},
			{ID: 2, Name: "b", Type: Float64, Data: kinds["mixed"][:16*bs], Codec: codecB},
			{ID: 3, Name: "c", Type: Float64, Data: kinds["smooth"][:8*bs], Codec: CodecZstd, Lossy: Lossy{Mode: Mantissa, Bits: 30}},
		}
	}
	for _, planned := range []bool{false, true} {
		opts := []Option{WithBlockSize(bs), WithClock(fixedClock)}
		base := &memFile{name: "base.fti"}
		lay, sum, err := Write(base, Meta{CkptID: 0}, state(0), nil, opts...)
		require.NoError(t, err)
		layers := []*memFile{base}
		for step := 1; step <= 5; step++ {
			vars := state(step)
			d := &memFile{name: "delta.fti"}
			var st DeltaStats
			if planned {
				p, err := PlanDelta(Meta{CkptID: int64(step)}, vars, Parent{Layout: lay, Summary: sum}, opts...)
				require.NoError(t, err)
				st, err = p.Write(d)
				require.NoError(t, err)
				assert.Equal(t, p.Size(), st.FileSize)
				lay, sum = p.Image()
			} else {
				lay, sum, st, err = WriteDelta(d, Meta{CkptID: int64(step)}, vars, Parent{Layout: lay, Summary: sum}, opts...)
				require.NoError(t, err)
			}
			assert.Equal(t, int64(len(d.b)), st.FileSize)
			layers = append(layers, d)
			if step == 1 {
				assert.LessOrEqual(t, st.Blocks, 2, "one changed block of a and its mantissa-truncated neighbour at most")
				assert.Less(t, st.Stored, st.Written+1)
			}
			files := make([]vfd.File, len(layers))
			for i, l := range layers {
				files[i] = clone(l)
			}
			img, err := OpenImage(files)
			require.NoError(t, err, "step %d", step)
			r, err := Open(img)
			require.NoError(t, err)
			require.NoError(t, r.Verify(), "step %d", step)
			for _, v := range vars {
				got := make([]byte, len(v.Data))
				require.NoError(t, r.ReadVar(v.ID, got))
				if v.Lossy.Mode == Exact {
					require.True(t, bytes.Equal(v.Data, got), "step %d var %d", step, v.ID)
				}
			}
			cp := &memFile{name: "image.fti"}
			_, err = r.CopyTo(cp)
			require.NoError(t, err)
			checkFile(t, cp.b, vars)
			fresh := &memFile{name: "fresh.fti"}
			_, _, err = Write(fresh, Meta{CkptID: int64(step)}, vars, layoutOf(t, layers[0]), opts...)
			require.NoError(t, err)
			if step <= 2 {
				assert.True(t, bytes.Equal(fresh.b, cp.b), "step %d: the image is the file Write writes", step)
			}
		}
	}
}

// layoutOf returns the layout a file was written with, for the last
// layer's Write: the tests' chains keep their variables' containers.
func layoutOf(t *testing.T, m *memFile) *Layout {
	r, err := Open(clone(m))
	require.NoError(t, err)
	return r.Layout()
}

// TestCompressBlocksProbe checks the writer's decisions per block: on
// random data every probed block is tried only on
// a sample, all stored raw; after random blocks, compressible ones are
// found again within probeEvery blocks and compressed.
func TestCompressBlocksProbe(t *testing.T) {
	const bs = 16 << 10
	const n = 64
	kinds := dataKinds(n*bs, 3)
	enc, err := getEncoder()
	require.NoError(t, err)
	defer putEncoder(enc)
	for _, tc := range []struct {
		kind string
		raw  func(j int) bool
	}{
		{"random", func(int) bool { return true }},
		{"sparse", func(int) bool { return false }},
		// Block 0 fails and blocks 16 and 32 are probed. The random half
		// ends at block 32, so block 32's sample shrinks and it and the
		// rest are compressed.
		{"mixed", func(j int) bool { return j < 32 }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			data := kinds[tc.kind]
			stored := make([]uint32, n)
			hashes := make([][HashSize]byte, n)
			out := compressBlocks(enc, data, bs, 0, n, stored)
			hashGroup(data, bs, 0, n, hashes)
			var sum int
			for j := range n {
				b := blockOf(data, j, bs)
				assert.Equal(t, BlockHash(b), hashes[j], "block %d hash", j)
				assert.Equal(t, tc.raw(j), stored[j] == bs, "block %d stored raw (%d bytes)", j, stored[j])
				if stored[j] < bs {
					got := make([]byte, bs)
					require.NoError(t, decompressBlock(got, out[sum:sum+int(stored[j])]), "block %d", j)
					assert.Equal(t, b, got, "block %d", j)
				} else if out != nil {
					assert.Equal(t, b, out[sum:sum+bs], "raw block %d", j)
				}
				sum += int(stored[j])
			}
			if tc.kind == "random" {
				assert.Nil(t, out, "all raw: the writer writes from memory")
			} else {
				assert.Len(t, out, sum)
			}
		})
	}
}
