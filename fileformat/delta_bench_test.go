package fileformat

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/blake3"
)

// discardFile is a vfd.File that keeps nothing (what the CPU costs).
type discardFile struct{ memFile }

func (d *discardFile) WriteAt(p []byte, off int64) (int, error) { return len(p), nil }

// BenchmarkWriteDelta writes a delta of a 64 MiB variable (16 KiB dCP
// blocks) with 10% or none of its blocks changed, to a file that keeps
// nothing, beside a BLAKE3 of the same 64 MiB in one stream: the CPU a
// differential checkpoint costs beyond hashing the data.
func BenchmarkWriteDelta(b *testing.B) {
	const size, bs = 64 << 20, 16 << 10
	data := pattern(size, 3)
	vars := []Var{{ID: 1, Data: data}}
	lay, sum, err := Write(&discardFile{}, Meta{}, vars, nil, WithBlockSize(bs), WithHashWorkers(1))
	if err != nil {
		b.Fatal(err)
	}
	parent := Parent{Layout: lay, Summary: sum}
	b.Run("blake3-stream", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			h := blake3.New()
			_, _ = h.Write(data)
			h.Sum(nil)
		}
	})
	for _, dirty := range []float64{0, 0.1} {
		b.Run(fmt.Sprintf("dirty=%g", dirty), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			nb := size / bs
			for _, k := range r.Perm(nb)[:int(dirty*float64(nb))] {
				data[k*bs+r.IntN(bs)]++
			}
			b.SetBytes(size)
			for b.Loop() {
				if _, _, _, err := WriteDelta(&discardFile{}, Meta{}, vars, parent, WithBlockSize(bs), WithHashWorkers(1)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
