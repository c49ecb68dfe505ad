package fileformat

import "testing"

// BenchmarkCompressBlocks compresses and hashes 4 MiB in 16 KiB blocks
// as a compressed chunk's writer does ("zstd"), beside hashing them only
// as an uncompressed chunk's writer does ("hash"): zstd/hash is the
// codec's cost per byte over the hash's, on random data, on sparse
// words (90% zero) and on a field of plateaus.
func BenchmarkCompressBlocks(b *testing.B) {
	const n, bs = 4 << 20, 16 << 10
	kinds := dataKinds(n, 3)
	kinds["sparse90"] = sparseWords(n, 10, 3)
	for _, kind := range []string{"random", "sparse90", "smooth"} {
		data := kinds[kind]
		nb := n / bs
		stored := make([]uint32, nb)
		hashes := make([][HashSize]byte, nb)
		b.Run(kind+"/hash", func(b *testing.B) {
			b.SetBytes(n)
			for range b.N {
				for j := range nb {
					hashes[j] = BlockHash(blockOf(data, j, bs))
				}
			}
		})
		b.Run(kind+"/zstd", func(b *testing.B) {
			enc := mustEncoder(b)
			b.SetBytes(n)
			for range b.N {
				putGroupBuf(compressBlocks(enc, data, bs, 0, nb, stored))
				hashGroup(data, bs, 0, nb, hashes)
			}
		})
	}
}

// BenchmarkAppendSparse is the word-sparse encoding of 16 KiB blocks of
// 90% zero words alone.
func BenchmarkAppendSparse(b *testing.B) {
	const n, bs = 4 << 20, 16 << 10
	data := sparseWords(n, 10, 3)
	out := make([]byte, 0, n)
	b.SetBytes(n)
	for range b.N {
		out = out[:0]
		for j := range n / bs {
			out, _ = appendSparse(out, data[j*bs:(j+1)*bs])
		}
	}
}

// BenchmarkWriteSparse writes 8 MiB of 90% zero words as one variable
// with WithSync, compressed ("zstd") and not ("none"), into a file of
// the test's temporary directory: the writer's cost of the word-sparse
// path beside the uncompressed one, both hashing every byte.
func BenchmarkWriteSparse(b *testing.B) {
	const n = 8 << 20
	data := sparseWords(n, 10, 3)
	for _, c := range []Codec{CodecNone, CodecZstd} {
		b.Run(c.String(), func(b *testing.B) {
			f := benchFile(b)
			vars := []Var{{ID: 1, Type: Bytes, Data: data, Codec: c}}
			b.SetBytes(n)
			b.ResetTimer()
			defer reportCPU(b, cpuNow())
			for i := range b.N {
				if _, _, err := Write(f, Meta{CkptID: int64(i)}, vars, nil, WithSync()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
