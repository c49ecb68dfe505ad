package h5ckpt

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// global returns the bytes of dataset ds whose element i holds a pattern
// derived from i and seed.
func global(ds dataset.Dataset, seed uint64) []byte {
	es := int64(ds.Elem())
	n := ds.Elements()
	b := make([]byte, n*es)
	var tmp [8]byte
	for i := int64(0); i < n; i++ {
		binary.LittleEndian.PutUint64(tmp[:], (uint64(i)+1)*0x9e3779b97f4a7c15^seed)
		for k := int64(0); k < es; k++ {
			b[i*es+k] = tmp[k%8] ^ byte(k/8)
		}
	}
	return b
}

// slabOf copies the hyperslab (off, cnt) of the global array g, element
// by element (the reference).
func slabOf(ds dataset.Dataset, g []byte, off, cnt []int64) []byte {
	es := int64(ds.Elem())
	n := int64(1)
	for _, c := range cnt {
		n *= c
	}
	out := make([]byte, n*es)
	d := len(ds.Shape)
	gs := make([]int64, d)
	s := int64(1)
	for k := d - 1; k >= 0; k-- {
		gs[k] = s
		s *= ds.Shape[k]
	}
	idx := make([]int64, d)
	for e := int64(0); e < n; e++ {
		var gi int64
		for k := range idx {
			gi += (off[k] + idx[k]) * gs[k]
		}
		copy(out[e*es:(e+1)*es], g[gi*es:(gi+1)*es])
		for k := d - 1; k >= 0; k-- {
			idx[k]++
			if idx[k] < cnt[k] {
				break
			}
			idx[k] = 0
		}
	}
	return out
}

// job is what every rank of a test checkpoint holds.
type job struct {
	datasets []dataset.Dataset
	globals  map[int32][]byte
	subsets  [][]dataset.Subset // per rank
	locals   [][]fileformat.Var // per rank: variables in no dataset
	vars     [][]fileformat.Var // per rank: all variables
	ranks    int
}

// blockJob decomposes each dataset in blocks over a Dims grid of n ranks
// (uneven: extents chosen not to divide), every rank mapping variable
// 10+k onto dataset k and holding two variables of its own.
func blockJob(n int, datasets []dataset.Dataset, seed uint64) *job {
	j := &job{datasets: datasets, globals: map[int32][]byte{}, ranks: n,
		subsets: make([][]dataset.Subset, n), locals: make([][]fileformat.Var, n), vars: make([][]fileformat.Var, n)}
	for k, ds := range datasets {
		j.globals[ds.ID] = global(ds, seed+uint64(k))
	}
	for r := 0; r < n; r++ {
		for k, ds := range datasets {
			grid, _ := dataset.Dims(n, len(ds.Shape))
			off, cnt, _ := dataset.Block(ds.Shape, grid, r)
			s := dataset.Subset{VarID: int32(10 + k), Dataset: ds.ID, Offset: off, Count: cnt}
			j.subsets[r] = append(j.subsets[r], s)
			j.vars[r] = append(j.vars[r], fileformat.Var{ID: s.VarID, Name: fmt.Sprintf("%s@%d", ds.Name, r), Type: ds.Type, ElemSize: ds.ElemSize,
				Data: slabOf(ds, j.globals[ds.ID], off, cnt)})
		}
		step := make([]byte, 8)
		binary.LittleEndian.PutUint64(step, uint64(1000+r))
		blob := make([]byte, 24*(r+1))
		for i := range blob {
			blob[i] = byte(r*31 + i)
		}
		j.locals[r] = []fileformat.Var{
			{ID: 1, Name: "step", Type: fileformat.Int64, Data: step},
			{ID: 2, Name: "particles", Type: fileformat.Struct, ElemSize: 24, Data: blob},
		}
		j.vars[r] = append(j.vars[r], j.locals[r]...)
	}
	return j
}

// write runs Write on every rank of an in-process world.
func (j *job) write(t testing.TB, d vfd.Driver, name string, id int64, opts ...Option) error {
	t.Helper()
	return comm.Run(j.ranks, func(c comm.Comm) error {
		r := c.Rank()
		return Write(c, d, name, Meta{CkptID: id, Level: 9, Timestamp: 1700000000123456789}, j.vars[r], j.datasets, j.subsets[r], opts...)
	}, comm.WithTimeout(60*time.Second))
}

// randomSubsets decomposes ds over n ranks as a random k-d tree.
func randomSubsets(rng *rand.Rand, ds dataset.Dataset, n int, varID int32) []dataset.Subset {
	d := len(ds.Shape)
	type box struct{ off, cnt []int64 }
	boxes := []box{{make([]int64, d), append([]int64(nil), ds.Shape...)}}
	for len(boxes) < n {
		i := rng.IntN(len(boxes))
		b := boxes[i]
		k := rng.IntN(d)
		cut := rng.Int64N(b.cnt[k] + 1)
		lo := box{append([]int64(nil), b.off...), append([]int64(nil), b.cnt...)}
		hi := box{append([]int64(nil), b.off...), append([]int64(nil), b.cnt...)}
		lo.cnt[k] = cut
		hi.off[k] += cut
		hi.cnt[k] -= cut
		boxes[i] = lo
		boxes = append(boxes, hi)
	}
	rng.Shuffle(len(boxes), func(i, j int) { boxes[i], boxes[j] = boxes[j], boxes[i] })
	out := make([]dataset.Subset, n)
	for r, b := range boxes {
		out[r] = dataset.Subset{VarID: varID, Dataset: ds.ID, Offset: b.off, Count: b.cnt}
	}
	return out
}
