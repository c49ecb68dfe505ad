package h5ckpt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

// fuzzBase is a small valid checkpoint and where its tables, their hash
// and the root object header are.
type fuzzBase struct {
	b      []byte
	tables [][2]int64 // raw data (addr, size) of datasets, variables, names, block_hashes
	hash   int        // offset of the tables hash attribute's value
	root   int64
}

func newFuzzBase(t testing.TB) fuzzBase {
	j := blockJob(3, testDatasets()[:3], 2)
	core := vfd.NewCore()
	if err := j.write(t, core, "/c.h5", 1); err != nil {
		t.Fatal(err)
	}
	b, err := vfd.ReadFile(core, "/c.h5")
	if err != nil {
		t.Fatal(err)
	}
	hf, err := h5.Open(bytes.NewReader(b), int64(len(b)), "c.h5")
	if err != nil {
		t.Fatal(err)
	}
	fb := fuzzBase{b: b, root: int64(hf.Root.Addr)}
	th := blake3.New()
	for _, n := range []string{tableDatasets, tableVariables, tableNames, tableHashes} {
		o, err := hf.Lookup("/" + MetaGroup + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		fb.tables = append(fb.tables, [2]int64{int64(o.DataAddr), int64(o.DataSize)})
		_, _ = th.Write(b[o.DataAddr : o.DataAddr+o.DataSize])
	}
	fb.hash = bytes.Index(b, th.Sum(nil))
	if fb.hash < 0 {
		t.Fatal("tables hash not found")
	}
	return fb
}

// mutate XORs m into the tables (seen as one byte string) from offset
// at, then recomputes the tables hash and the root header's checksum, so
// the result reaches the table decoder.
func (fb fuzzBase) mutate(at uint32, m []byte) []byte {
	b := append([]byte(nil), fb.b...)
	var total int64
	for _, t := range fb.tables {
		total += t[1]
	}
	if total == 0 {
		return b
	}
	pos := int64(at) % total
	for _, x := range m {
		p := pos
		for _, t := range fb.tables {
			if p < t[1] {
				b[t[0]+p] ^= x
				break
			}
			p -= t[1]
		}
		pos = (pos + 1) % total
	}
	th := blake3.New()
	for _, t := range fb.tables {
		_, _ = th.Write(b[t[0] : t[0]+t[1]])
	}
	copy(b[fb.hash:], th.Sum(nil))
	// Root object header v2: "OHDR", version, flags, chunk size (1 << (flags & 3) bytes), messages, checksum.
	r := fb.root
	w := int64(1) << (b[r+5] & 3)
	var size int64
	for i := int64(0); i < w; i++ {
		size |= int64(b[r+6+i]) << (8 * i)
	}
	end := r + 6 + w + size
	binary.LittleEndian.PutUint32(b[end:], h5.Lookup3(b[r:end], 0))
	return b
}

// FuzzOpenTables mutates the tables of a valid checkpoint (keeping the
// hashes that guard them consistent) and checks that Open never panics
// and that whatever it accepts reads without panicking and stays inside
// the file.
func FuzzOpenTables(f *testing.F) {
	fb := newFuzzBase(f)
	f.Add(uint32(0), []byte{})
	f.Add(uint32(0), []byte{1})
	f.Add(uint32(20), []byte{0xff, 0xff})
	f.Add(uint32(44), []byte{0, 0, 0, 0, 0, 0, 0, 0x80})
	f.Add(uint32(200), []byte{3})
	f.Fuzz(func(t *testing.T, at uint32, m []byte) {
		if len(m) > 64 {
			m = m[:64]
		}
		b := fb.mutate(at, m)
		core := vfd.NewCore()
		if err := vfd.WriteFileAtomic(core, "/m.h5", b); err != nil {
			t.Fatal(err)
		}
		cf, err := Open(core, "/m.h5")
		if err != nil {
			return
		}
		defer cf.Close()
		for r := 0; r < cf.Ranks(); r++ {
			for _, v := range cf.Vars(r) {
				if v.Size > int64(len(b)) {
					t.Fatalf("variable of %d bytes in a %d-byte file", v.Size, len(b))
				}
				_ = cf.ReadVar(r, v.ID, make([]byte, v.Size))
			}
		}
		_ = cf.Verify()
		for _, ds := range cf.Decomposition().Datasets() {
			if n := ds.Elements() * int64(ds.Elem()); n <= int64(len(b)) {
				_ = cf.ReadSlab(ds.ID, make([]int64, len(ds.Shape)), ds.Shape, make([]byte, n))
			}
		}
	})
}

// TestFuzzBaseOpens guards the fuzz harness: an unmutated base opens, and
// a mutation with resealed hashes gets past the hash checks.
func TestFuzzBaseOpens(t *testing.T) {
	fb := newFuzzBase(t)
	core := vfd.NewCore()
	if err := vfd.WriteFileAtomic(core, "/m.h5", fb.mutate(0, nil)); err != nil {
		t.Fatal(err)
	}
	f, err := Open(core, "/m.h5")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Verify(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Flip the first dataset row's rank: not a hash error but a table error.
	if err := vfd.WriteFileAtomic(core, "/m.h5", fb.mutate(16, []byte{0x40})); err != nil {
		t.Fatal(err)
	}
	_, err = Open(core, "/m.h5")
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("hash mismatch")) {
		t.Fatalf("want a table error, got %v", err)
	}
}

// FuzzDecodePart decodes arbitrary bytes as a rank's part of the layout
// (what rank 0 hands out). It must never panic: the result is a layout
// whose slabs are whole units, no layout, or an error.
func FuzzDecodePart(f *testing.F) {
	f.Add(encodeView(rankView{vars: []ownVar{{id: 10, collective: true, s: newSlab(4096, []int64{8, 8}, []int64{0, 4}, []int64{4, 4}, 8)},
		{id: 1, s: localSlab(9000, 8)}}, cb: &cbPlan{lo: 4096, hi: 4608, dom: 4096, win: 4096, rounds: 1,
		slabs: []cbSlab{{rank: 1, id: 10, s: newSlab(4096, []int64{8, 8}, []int64{4, 0}, []int64{4, 4}, 8)}}}}))
	f.Add(encodeView(rankView{}))
	f.Add(invalidPart(errors.New("bad")))
	f.Add([]byte{partNoLayout})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ok, err := decodePart(b, 4)
		if !ok {
			if v.cb != nil || v.vars != nil {
				t.Fatalf("a layout without ok: %+v (err %v)", v, err)
			}
			return
		}
		for _, ov := range v.vars {
			if ov.s.unit == 0 && ov.s.size != 0 || ov.s.unit != 0 && ov.s.size%ov.s.unit != 0 {
				t.Fatalf("slab %+v", ov.s)
			}
		}
		if v.cb != nil && (v.cb.dom <= 0 || v.cb.win <= 0) {
			t.Fatalf("plan %+v", v.cb)
		}
	})
}
