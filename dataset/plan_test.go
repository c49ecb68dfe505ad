package dataset

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/fileformat"
)

// memSource serves old ranks' variables from memory and counts reads.
type memSource struct {
	vars  map[[2]int64][]byte // (rank, var id)
	reads int
	bytes int64
}

func (m *memSource) ReadVarAt(rank int, v int32, dst []byte, off int64) error {
	b, ok := m.vars[[2]int64{int64(rank), int64(v)}]
	if !ok {
		return fmt.Errorf("no variable %d on rank %d", v, rank)
	}
	if off < 0 || off+int64(len(dst)) > int64(len(b)) {
		return fmt.Errorf("rank %d variable %d: [%d,+%d) outside %d bytes", rank, v, off, len(dst), len(b))
	}
	m.reads++
	m.bytes += int64(len(dst))
	copy(dst, b[off:])
	return nil
}

// globalArray returns the bytes of a dataset whose element i (row-major)
// holds a distinct pattern derived from i and seed.
func globalArray(ds Dataset, seed uint64) []byte {
	es := int(ds.Elem())
	n := ds.Elements()
	b := make([]byte, n*int64(es))
	var tmp [8]byte
	for i := int64(0); i < n; i++ {
		binary.LittleEndian.PutUint64(tmp[:], uint64(i)*0x9e3779b97f4a7c15^seed)
		for k := 0; k < es; k++ {
			b[i*int64(es)+int64(k)] = tmp[k%8] + byte(k/8)
		}
	}
	return b
}

// extract copies subset s of the global array g (dataset ds) into a
// variable buffer, element by element (the slow reference).
func extract(ds Dataset, g []byte, s Subset) []byte {
	es := int64(ds.Elem())
	out := make([]byte, s.Elements()*es)
	gs := strides(ds.Shape)
	idx := make([]int64, len(s.Count))
	for e := int64(0); e < s.Elements(); e++ {
		var gi int64
		for k := range idx {
			gi += (s.Offset[k] + idx[k]) * gs[k]
		}
		copy(out[e*es:(e+1)*es], g[gi*es:(gi+1)*es])
		for k := len(idx) - 1; k >= 0; k-- {
			idx[k]++
			if idx[k] < s.Count[k] {
				break
			}
			idx[k] = 0
		}
	}
	return out
}

// randomCuts splits n into parts uneven parts (some may be empty when
// parts > n or by chance).
func randomCuts(rng *rand.Rand, n int64, parts int) []int64 {
	cuts := []int64{0, n}
	for len(cuts) < parts+1 {
		cuts = append(cuts, rng.Int64N(n+1))
	}
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	return cuts
}

// gridDecomp cuts shape into a grid of ranks boxes with random uneven
// cut points; the grid extents come from Dims(ranks, d) shuffled.
func gridDecomp(rng *rand.Rand, shape []int64, ranks int) [][]int64 {
	dims, _ := Dims(ranks, len(shape))
	rng.Shuffle(len(dims), func(i, j int) { dims[i], dims[j] = dims[j], dims[i] })
	cuts := make([][]int64, len(shape))
	for k := range shape {
		cuts[k] = randomCuts(rng, shape[k], dims[k])
	}
	var boxes [][]int64 // offset ++ count
	idx := make([]int, len(shape))
	for {
		box := make([]int64, 2*len(shape))
		for k := range shape {
			box[k] = cuts[k][idx[k]]
			box[len(shape)+k] = cuts[k][idx[k]+1] - cuts[k][idx[k]]
		}
		boxes = append(boxes, box)
		k := len(idx) - 1
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < dims[k] {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return boxes
		}
	}
}

// bisectDecomp cuts shape into ranks boxes by repeatedly splitting a
// random box along a random dimension at a random point (a k-d tree, so
// the boxes form no grid).
func bisectDecomp(rng *rand.Rand, shape []int64, ranks int) [][]int64 {
	d := len(shape)
	first := make([]int64, 2*d)
	copy(first[d:], shape)
	boxes := [][]int64{first}
	for len(boxes) < ranks {
		i := rng.IntN(len(boxes))
		b := boxes[i]
		k := rng.IntN(d)
		cut := rng.Int64N(b[d+k] + 1)
		lo := append([]int64(nil), b...)
		hi := append([]int64(nil), b...)
		lo[d+k] = cut
		hi[k] = b[k] + cut
		hi[d+k] = b[d+k] - cut
		boxes[i] = lo
		boxes = append(boxes, hi)
	}
	rng.Shuffle(len(boxes), func(i, j int) { boxes[i], boxes[j] = boxes[j], boxes[i] })
	return boxes
}

// views turns boxes into one view per rank: rank r maps variable
// varBase+r%3 onto box r (ids differ between ranks, as they may).
func views(ds []Dataset, boxes [][][]int64, varBase int32) []View {
	n := len(boxes[0])
	vs := make([]View, n)
	for r := 0; r < n; r++ {
		vs[r].Datasets = ds
		for di, d := range ds {
			b := boxes[di][r]
			nd := len(d.Shape)
			vs[r].Subsets = append(vs[r].Subsets, Subset{VarID: varBase + int32(di)*10 + int32(r%3), Dataset: d.ID,
				Offset: b[:nd], Count: b[nd:]})
		}
	}
	return vs
}

// checkRedistribution moves every dataset from oldV to newV through a
// plan and checks every element of every new variable bit for bit, that
// each destination byte is written exactly once, and that Sends
// partitions the same copies by source.
func checkRedistribution(t *testing.T, ds []Dataset, oldV, newV []View) {
	t.Helper()
	old, err := NewDecomposition(oldV)
	require.NoError(t, err)
	nw, err := NewDecomposition(newV)
	require.NoError(t, err)
	p, err := NewPlan(old, nw)
	require.NoError(t, err)
	globals := map[int32][]byte{}
	for i, d := range ds {
		globals[d.ID] = globalArray(d, uint64(i)+7)
	}
	src := &memSource{vars: map[[2]int64][]byte{}}
	for r := 0; r < old.Ranks(); r++ {
		for _, s := range old.Subsets(r) {
			d, _ := old.Dataset(s.Dataset)
			src.vars[[2]int64{int64(r), int64(s.VarID)}] = extract(d, globals[d.ID], s)
		}
	}
	var all []Copy
	for q := 0; q < nw.Ranks(); q++ {
		bufs := map[int32][]byte{}
		written := map[int32][]int{}
		for _, s := range nw.Subsets(q) {
			bufs[s.VarID] = bytes.Repeat([]byte{0xa5}, int(nw.VarSize(s)))
			written[s.VarID] = make([]int, nw.VarSize(s))
		}
		cs := p.Copies(q)
		for _, c := range cs {
			require.Equal(t, q, c.Dst)
			for i := c.DstOff; i < c.DstOff+c.Len; i++ {
				written[c.DstVar][i]++
			}
		}
		all = append(all, cs...)
		require.NoError(t, p.Execute(q, src, bufs))
		for _, s := range nw.Subsets(q) {
			d, _ := nw.Dataset(s.Dataset)
			want := extract(d, globals[d.ID], s)
			if !bytes.Equal(want, bufs[s.VarID]) {
				t.Fatalf("new rank %d variable %d (dataset %d offset %v count %v): bytes differ", q, s.VarID, s.Dataset, s.Offset, s.Count)
			}
			if !d.Sparse {
				for i, n := range written[s.VarID] {
					if n != 1 {
						t.Fatalf("new rank %d variable %d byte %d written %d times", q, s.VarID, i, n)
					}
				}
			}
		}
	}
	var sent []Copy
	for r := 0; r < old.Ranks(); r++ {
		sent = append(sent, p.Sends(r)...)
	}
	key := func(c Copy) string { return fmt.Sprint(c) }
	a, b := map[string]int{}, map[string]int{}
	for _, c := range all {
		a[key(c)]++
	}
	for _, c := range sent {
		b[key(c)]++
	}
	assert.Equal(t, a, b, "Sends and Copies describe the same runs")
}

// TestRedistribute runs the rank-count changes on random uneven
// decompositions (grids and k-d trees) in 1-D to 4-D, with elements of 1,
// 4, 8 and 24 bytes.
func TestRedistribute(t *testing.T) {
	pairs := [][2]int{{4, 3}, {4, 8}, {16, 5}, {8, 1}, {3, 7}, {1, 6}, {5, 5}}
	shapes := [][]int64{{97}, {23, 17}, {9, 11, 7}, {5, 4, 6, 3}}
	types := []struct {
		t  fileformat.ElemType
		es uint32
	}{{fileformat.Float64, 0}, {fileformat.Uint8, 0}, {fileformat.Int32, 0}, {fileformat.Struct, 24}}
	rng := rand.New(rand.NewPCG(17, 42))
	for _, pr := range pairs {
		for si, shape := range shapes {
			for trial := 0; trial < 3; trial++ {
				name := fmt.Sprintf("%dto%d/%dD/%d", pr[0], pr[1], len(shape), trial)
				t.Run(name, func(t *testing.T) {
					ty := types[(si+trial)%len(types)]
					ds := []Dataset{
						{ID: 1, Name: "field", Shape: shape, Type: ty.t, ElemSize: ty.es},
						{ID: 5, Name: "aux/line", Shape: []int64{int64(31 + trial)}, Type: fileformat.Int64},
					}
					cut := gridDecomp
					if trial == 1 {
						cut = bisectDecomp
					}
					oldB := [][][]int64{cut(rng, shape, pr[0]), bisectDecomp(rng, ds[1].Shape, pr[0])}
					newB := [][][]int64{bisectDecomp(rng, shape, pr[1]), gridDecomp(rng, ds[1].Shape, pr[1])}
					if trial == 2 {
						newB[0] = gridDecomp(rng, shape, pr[1])
					}
					checkRedistribution(t, ds, views(ds, oldB, 100), views(ds, newB, 7))
				})
			}
		}
	}
}

// TestRunsMerged checks that contiguous blocks move as few large copies:
// row blocks of a 2-D array go in one copy per overlapping (old, new)
// pair, column blocks in one per row of the overlap, and a 1-D array in
// one copy per pair.
func TestRunsMerged(t *testing.T) {
	ds := []Dataset{{ID: 0, Name: "a", Shape: []int64{1000, 64}, Type: fileformat.Float32}}
	rows := func(n int) []View {
		vs := make([]View, n)
		for r := range vs {
			off, cnt, err := Block(ds[0].Shape, []int{n, 1}, r)
			require.NoError(t, err)
			vs[r] = View{Datasets: ds, Subsets: []Subset{{VarID: 0, Dataset: 0, Offset: off, Count: cnt}}}
		}
		return vs
	}
	cols := func(n int) []View {
		vs := make([]View, n)
		for r := range vs {
			off, cnt, err := Block(ds[0].Shape, []int{1, n}, r)
			require.NoError(t, err)
			vs[r] = View{Datasets: ds, Subsets: []Subset{{VarID: 0, Dataset: 0, Offset: off, Count: cnt}}}
		}
		return vs
	}
	old, err := NewDecomposition(rows(4))
	require.NoError(t, err)
	nw, err := NewDecomposition(rows(3))
	require.NoError(t, err)
	p, err := NewPlan(old, nw)
	require.NoError(t, err)
	// 4 -> 3 row blocks of 250 / 334,333,333 rows: rank 0 gets 250 rows of
	// old 0 and 84 of old 1; rank 1 166 of old 1 and 167 of old 2; ...
	assert.Equal(t, []Copy{
		{Dst: 0, DstVar: 0, DstOff: 0, Src: 0, SrcVar: 0, SrcOff: 0, Len: 250 * 64 * 4},
		{Dst: 0, DstVar: 0, DstOff: 250 * 64 * 4, Src: 1, SrcVar: 0, SrcOff: 0, Len: 84 * 64 * 4},
	}, p.Copies(0))
	for q := 0; q < 3; q++ {
		assert.Len(t, p.Copies(q), 2, "new rank %d", q)
	}
	// Columns to rows: every row of an overlap is its own run.
	oc, err := NewDecomposition(cols(4))
	require.NoError(t, err)
	p, err = NewPlan(oc, nw)
	require.NoError(t, err)
	cs := p.Copies(0)
	assert.Len(t, cs, 4*334)
	for _, c := range cs {
		assert.Equal(t, int64(16*4), c.Len)
	}
	// 1-D.
	one := []Dataset{{ID: 2, Name: "v", Shape: []int64{1 << 20}, Type: fileformat.Uint8}}
	mk := func(n int) *Decomposition {
		vs := make([]View, n)
		for r := range vs {
			off, cnt, err := Block(one[0].Shape, []int{n}, r)
			require.NoError(t, err)
			vs[r] = View{Datasets: one, Subsets: []Subset{{VarID: 9, Dataset: 2, Offset: off, Count: cnt}}}
		}
		d, err := NewDecomposition(vs)
		require.NoError(t, err)
		return d
	}
	p, err = NewPlan(mk(16), mk(5))
	require.NoError(t, err)
	total := 0
	for q := 0; q < 5; q++ {
		total += len(p.Copies(q))
	}
	assert.Equal(t, 16+5-1, total, "one copy per overlapping pair of 1-D blocks")
}

// TestApplyWindows checks how Execute reads: a large copy straight into
// the destination (one read), small neighbouring copies together.
func TestApplyWindows(t *testing.T) {
	src := &memSource{vars: map[[2]int64][]byte{{0, 1}: bytes.Repeat([]byte{1, 2, 3, 4, 5}, 1<<20)}}
	bufs := map[int32][]byte{7: make([]byte, 2<<20)}
	cs := []Copy{{DstVar: 7, DstOff: 0, SrcVar: 1, SrcOff: 10, Len: 1 << 20}}
	require.NoError(t, Apply(cs, src, bufs))
	assert.Equal(t, 1, src.reads)
	assert.Equal(t, src.vars[[2]int64{0, 1}][10:10+1<<20], bufs[7][:1<<20])
	// 100 small copies 1000 bytes apart: one windowed read.
	src.reads, src.bytes = 0, 0
	cs = nil
	for i := int64(0); i < 100; i++ {
		cs = append(cs, Copy{DstVar: 7, DstOff: i * 100, SrcVar: 1, SrcOff: 5000 + i*1000, Len: 100})
	}
	require.NoError(t, Apply(cs, src, bufs))
	assert.Equal(t, 1, src.reads)
	for i := int64(0); i < 100; i++ {
		assert.Equal(t, src.vars[[2]int64{0, 1}][5000+i*1000:5100+i*1000], bufs[7][i*100:i*100+100])
	}
	// Gaps beyond maxGap split the reads.
	src.reads = 0
	cs = []Copy{{DstVar: 7, SrcVar: 1, SrcOff: 0, Len: 10}, {DstVar: 7, DstOff: 10, SrcVar: 1, SrcOff: maxGap + 100, Len: 10}}
	require.NoError(t, Apply(cs, src, bufs))
	assert.Equal(t, 2, src.reads)
}

// TestFromFilesVerified writes a 4-rank checkpoint as FTI-FF files with
// their datasets recorded, redistributes it onto 3 ranks from the files
// alone, and checks that a flipped byte in one old file fails the
// restart with the file's hash mismatch.
func TestFromFilesVerified(t *testing.T) {
	ds := []Dataset{{ID: 4, Name: "temp", Shape: []int64{64, 48}, Type: fileformat.Float64}}
	g := globalArray(ds[0], 3)
	files := make([]*memFile, 4)
	for r := 0; r < 4; r++ {
		off, cnt, err := Block(ds[0].Shape, []int{2, 2}, r)
		require.NoError(t, err)
		s := Subset{VarID: 1, Dataset: 4, Offset: off, Count: cnt}
		files[r] = &memFile{name: fmt.Sprintf("r%d.fti", r)}
		vars := []fileformat.Var{
			{ID: 1, Name: "temp", Type: fileformat.Float64, Data: extract(ds[0], g, s)},
			{ID: 2, Name: "step", Type: fileformat.Int64, Data: make([]byte, 8)},
		}
		_, _, err = fileformat.Write(files[r], fileformat.Meta{CkptID: 1, Rank: int32(r)}, vars, nil,
			fileformat.WithBlockSize(fileformat.MinBlockSize), fileformat.WithDatasets(ds, []Subset{s}))
		require.NoError(t, err)
	}
	open := func() Files {
		rs := make(Files, 4)
		for r, f := range files {
			rd, err := fileformat.Open(f)
			require.NoError(t, err)
			rs[r] = rd
		}
		return rs
	}
	rs := open()
	old, err := FromFiles(rs)
	require.NoError(t, err)
	nv := make([]View, 3)
	for q := range nv {
		off, cnt, err := Block(ds[0].Shape, []int{1, 3}, q)
		require.NoError(t, err)
		nv[q] = View{Datasets: ds, Subsets: []Subset{{VarID: 1, Dataset: 4, Offset: off, Count: cnt}}}
	}
	nw, err := NewDecomposition(nv)
	require.NoError(t, err)
	p, err := NewPlan(old, nw)
	require.NoError(t, err)
	for q := 0; q < 3; q++ {
		s := nw.Subsets(q)[0]
		bufs := map[int32][]byte{1: make([]byte, nw.VarSize(s))}
		require.NoError(t, p.Execute(q, rs, bufs))
		assert.Equal(t, extract(ds[0], g, s), bufs[1], "new rank %d", q)
	}
	// Damage old rank 2's data: new rank 0 needs some of it.
	files[2].b[fileformat.HeaderSize+100] ^= 0x40
	rs = open()
	s := nw.Subsets(0)[0]
	err = p.Execute(0, rs, map[int32][]byte{1: make([]byte, nw.VarSize(s))})
	require.ErrorIs(t, err, fileformat.ErrHashMismatch)
	var ce *fileformat.CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 2, ce.Rank)
	assert.Contains(t, err.Error(), "old rank 2 variable 1")

	// Files given in the wrong order are refused.
	_, err = FromFiles(Files{rs[1], rs[0], rs[2], rs[3]})
	assert.ErrorIs(t, err, ErrInvalid)
}

// TestPlanSparseFill checks that a Sparse dataset's uncovered elements
// come back as zeros and covered ones as stored.
func TestPlanSparseFill(t *testing.T) {
	ds := []Dataset{{ID: 1, Name: "s", Shape: []int64{10}, Type: fileformat.Uint8, Sparse: true}}
	old, err := NewDecomposition([]View{
		{Datasets: ds, Subsets: []Subset{{VarID: 0, Dataset: 1, Offset: []int64{0}, Count: []int64{3}}}},
		{Datasets: ds, Subsets: []Subset{{VarID: 0, Dataset: 1, Offset: []int64{6}, Count: []int64{2}}}},
	})
	require.NoError(t, err)
	nw, err := NewDecomposition([]View{{Datasets: ds, Subsets: []Subset{{VarID: 3, Dataset: 1, Offset: []int64{1}, Count: []int64{8}}}}})
	require.NoError(t, err)
	p, err := NewPlan(old, nw)
	require.NoError(t, err)
	src := &memSource{vars: map[[2]int64][]byte{{0, 0}: {10, 11, 12}, {1, 0}: {16, 17}}}
	buf := bytes.Repeat([]byte{0xff}, 8)
	require.NoError(t, p.Execute(0, src, map[int32][]byte{3: buf}))
	assert.Equal(t, []byte{11, 12, 0, 0, 0, 16, 17, 0}, buf)
	assert.Equal(t, []Fill{{Dst: 0, DstVar: 3, Off: 0, Len: 8}}, p.Fills(0))
}

func TestExecuteBuffers(t *testing.T) {
	ds := []Dataset{{ID: 1, Name: "s", Shape: []int64{10}, Type: fileformat.Int16}}
	d, err := NewDecomposition([]View{{Datasets: ds, Subsets: []Subset{{VarID: 0, Dataset: 1, Offset: []int64{0}, Count: []int64{10}}}}})
	require.NoError(t, err)
	p, err := NewPlan(d, d)
	require.NoError(t, err)
	err = p.Execute(0, &memSource{}, map[int32][]byte{})
	assert.ErrorIs(t, err, ErrBuffer)
	err = p.Execute(0, &memSource{}, map[int32][]byte{0: make([]byte, 10)})
	assert.ErrorIs(t, err, ErrBuffer)
	assert.Contains(t, err.Error(), "10 bytes, want 20")
}

// memFile is a minimal in-memory vfd.File.
type memFile struct {
	name string
	b    []byte
}

func (m *memFile) Name() string         { return m.name }
func (m *memFile) Size() (int64, error) { return int64(len(m.b)), nil }
func (m *memFile) Sync() error          { return nil }
func (m *memFile) Close() error         { return nil }
func (m *memFile) Truncate(n int64) error {
	if n <= int64(len(m.b)) {
		m.b = m.b[:n]
	} else {
		m.b = append(m.b, make([]byte, n-int64(len(m.b)))...)
	}
	return nil
}
func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(m.b)) {
		_ = m.Truncate(end)
	}
	return copy(m.b[off:], p), nil
}
