package fileformat

import (
	"path/filepath"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/vfd"
)

// FuzzReader feeds arbitrary bytes to Open, ReadVar and Verify, which must
// never panic nor allocate beyond the input's size. With reseal set, the
// metadata hash and the file block's own hash are recomputed after the
// mutation, so the fuzzer reaches the structural checks behind them.
// Whatever reads back cleanly is written again through Write, which must
// succeed and give a file that reads back the same.
func FuzzReader(f *testing.F) {
	for _, g := range goldenFiles(f) {
		b := g.b
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		if reseal {
			b = resealed(b)
		}
		r, err := Open(&memFile{name: "fuzz.fti", b: b})
		if err != nil {
			return
		}
		var vars []Var
		readOK := true
		for _, v := range r.Vars() {
			n, err := r.StoredSize(v.ID)
			limit := int64(len(b))
			if v.Codec != CodecNone {
				limit *= MaxZstdRatio
			}
			if err != nil || n != v.Size || n > limit || v.Stored > int64(len(b)) {
				t.Fatalf("stored size %d (%d in the file), %v for var of %d bytes in a %d-byte file", n, v.Stored, err, v.Size, len(b))
			}
			if n > 64<<20 {
				readOK = false
				continue // legal, but too large for the fuzzer's memory
			}
			dst := make([]byte, n)
			if err := r.ReadVar(v.ID, dst); err != nil {
				readOK = false
				continue
			}
			vars = append(vars, Var{ID: v.ID, Name: v.Name, Type: v.Type, ElemSize: v.ElemSize, Data: dst, Codec: v.Codec})
		}
		verr := r.Verify()
		if verr == nil && !readOK {
			t.Fatalf("Verify passed but a ReadVar failed")
		}
		if verr != nil || !r.Hashed() {
			return
		}
		// Round trip: what was restored can be written again.
		m := &memFile{name: "again.fti"}
		lay, _, err := Write(m, r.Meta(), vars, r.Layout(), WithBlockSize(int(r.Summary().BlockSize)))
		if err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		r2, err := Open(m)
		if err != nil {
			t.Fatalf("reopen rewrite: %v", err)
		}
		if err := r2.Verify(); err != nil {
			t.Fatalf("verify rewrite: %v", err)
		}
		for _, v := range vars {
			dst := make([]byte, len(v.Data))
			if err := r2.ReadVar(v.ID, dst); err != nil || string(dst) != string(v.Data) {
				t.Fatalf("var %d differs after rewrite: %v", v.ID, err)
			}
		}
		_ = lay
	})
}

// resealed recomputes the metadata hash and the file block hash of b (a
// copy) where its own fields make that possible.
func resealed(b []byte) []byte {
	if len(b) < HeaderSize+FBSize {
		return b
	}
	b = append([]byte(nil), b...)
	fb := b[len(b)-FBSize:]
	metaOff, metaSize := int64(le.Uint64(fb[72:])), int64(le.Uint64(fb[80:]))
	if metaOff >= 0 && metaSize >= 0 && metaOff <= int64(len(b)) && metaSize <= int64(len(b))-metaOff {
		h := blake3.Sum256(b[metaOff : metaOff+metaSize])
		copy(fb[96:128], h[:])
	}
	h := fbHash(b[:HeaderSize], fb)
	copy(fb[fbHashOff:], h[:])
	return b
}

// FuzzLayoutChain drives Write through a sequence of checkpoints whose
// variable sizes come from the input (each byte pair: variable id 0..4,
// size; id 5 ends a checkpoint), chaining layouts, and checks that every
// file verifies and restores every variable exactly.
func FuzzLayoutChain(f *testing.F) {
	f.Add([]byte{0, 10, 1, 200, 5, 0, 0, 30, 1, 20, 5, 0, 2, 7, 5, 0})
	f.Add([]byte{0, 255, 5, 0, 0, 0, 5, 0, 0, 255, 3, 1, 5, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var prev *Layout
		sizes := map[int32]int{}
		step := 0
		flush := func() {
			var vars []Var
			for id := int32(0); id < 5; id++ {
				if n, ok := sizes[id]; ok {
					vars = append(vars, Var{ID: id, Data: pattern(n, byte(step)+byte(id))})
				}
			}
			m := &memFile{name: "chain.fti"}
			lay, sum, err := Write(m, Meta{CkptID: int64(step)}, vars, prev, WithBlockSize(MinBlockSize))
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if _, fs, err := Plan(vars, prev, WithBlockSize(MinBlockSize)); err != nil || fs != sum.FileSize {
				t.Fatalf("step %d: Plan says %d, %v; Write wrote %d", step, fs, err, sum.FileSize)
			}
			r, err := Open(m)
			if err != nil {
				t.Fatalf("step %d: open: %v", step, err)
			}
			if err := r.Verify(); err != nil {
				t.Fatalf("step %d: verify: %v", step, err)
			}
			for _, v := range vars {
				got := make([]byte, len(v.Data))
				if err := r.ReadVar(v.ID, got); err != nil || string(got) != string(v.Data) {
					t.Fatalf("step %d: var %d: %v", step, v.ID, err)
				}
			}
			prev = lay
			if step%2 == 1 {
				prev = r.Layout()
			}
			step++
			clear(sizes)
		}
		for i := 0; i+1 < len(in) && step < 20; i += 2 {
			id := in[i] % 6
			if id == 5 {
				flush()
				continue
			}
			sizes[int32(id)] = int(in[i+1]) * 13
		}
		if len(sizes) > 0 {
			flush()
		}
	})
}

// golden is one of the FTI-FF files in testdata, the fuzzers' seeds.
type golden struct {
	name string
	b    []byte
}

// goldenFiles returns every .fti file of testdata.
func goldenFiles(tb testing.TB) []golden {
	tb.Helper()
	ents, err := vfd.Sec2{}.ReadDir("testdata")
	if err != nil {
		tb.Fatal(err)
	}
	var out []golden
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".fti" {
			continue
		}
		b, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, golden{e.Name(), b})
	}
	return out
}
