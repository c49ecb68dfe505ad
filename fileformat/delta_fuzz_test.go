package fileformat

import (
	"testing"

	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/vfd"
)

// seedChain returns a full file and a delta on it, written without a
// testing.T (for fuzz seeds).
func seedChain() (base, delta []byte) {
	a := pattern(9*testBS+300, 1)
	b := asBytes([]int32{1, 2, 3})
	vars := []Var{{ID: 1, Name: "a", Type: Uint8, Data: a}, {ID: 2, Name: "b", Type: Int32, Data: b}}
	bf := &memFile{name: "base"}
	lay, sum, err := Write(bf, Meta{CkptID: 1, Rank: 1, Level: 1}, vars, nil, WithBlockSize(testBS), WithClock(fixedClock))
	if err != nil {
		panic(err)
	}
	a[2*testBS] ^= 1
	a[3*testBS] ^= 1
	a[8*testBS+5] ^= 1
	vars[0].Data = append(a, 7, 7, 7)
	df := &memFile{name: "delta"}
	if _, _, _, err := WriteDelta(df, Meta{CkptID: 2, Rank: 1, Level: 1}, vars, Parent{Layout: lay, Summary: sum},
		WithBlockSize(testBS), WithClock(fixedClock)); err != nil {
		panic(err)
	}
	return bf.b, df.b
}

// resealDelta recomputes a delta's metadata hash and trailer hash after a
// mutation, when its trailer still says where the metadata is, so the
// fuzzer reaches the checks behind them.
func resealDelta(b []byte) []byte {
	if len(b) < DeltaHeaderSize+DeltaTrailerSize {
		return b
	}
	out := append([]byte(nil), b...)
	tr := out[len(out)-DeltaTrailerSize:]
	dmOff := int64(le.Uint64(tr[24:]))
	end := int64(len(out) - DeltaTrailerSize)
	if dmOff >= DeltaHeaderSize && dmOff <= end {
		h := blake3.Sum256(out[dmOff:end])
		copy(tr[64:96], h[:])
	}
	h := deltaHash(out[:DeltaHeaderSize], tr)
	copy(tr[dtHashOff:], h[:])
	return out
}

// FuzzOpenDelta feeds arbitrary bytes to OpenDelta, Verify and, on the
// seed chain's base, OpenImage and every read: none may panic, and
// whatever reads back must verify.
func FuzzOpenDelta(f *testing.F) {
	base, delta := seedChain()
	f.Add(delta, false)
	f.Add(delta, true)
	f.Add(delta[:len(delta)/2], false)
	f.Add(base, false)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		if reseal {
			b = resealDelta(b)
		}
		df := &memFile{name: "fuzz.delta", b: b}
		d, err := OpenDelta(df)
		if err != nil {
			return
		}
		_ = d.Verify()
		if w := d.Written(); w < 0 || w > int64(len(b)) {
			t.Fatalf("delta claims %d written bytes in %d", w, len(b))
		}
		img, err := OpenImage([]vfd.File{&memFile{name: "base", b: base}, df})
		if err != nil {
			return
		}
		r, err := Open(img)
		if err != nil {
			return
		}
		verr := r.Verify()
		for _, v := range r.Vars() {
			if v.Size > int64(len(b))+int64(len(base)) {
				t.Fatalf("variable of %d bytes from %d+%d bytes of files", v.Size, len(b), len(base))
			}
			dst := make([]byte, v.Size)
			if err := r.ReadVar(v.ID, dst); err == nil && verr != nil && r.Hashed() {
				continue // another variable may be the bad one
			}
		}
	})
}

// FuzzOpenImage mutates the base of a chain (resealed or not): a base that
// still opens either carries the delta's clean blocks with their hashes or
// is refused.
func FuzzOpenImage(f *testing.F) {
	base, delta := seedChain()
	f.Add(base, false)
	f.Add(base, true)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		if reseal {
			b = resealed(b)
		}
		img, err := OpenImage([]vfd.File{&memFile{name: "base", b: b}, &memFile{name: "delta", b: delta}})
		if err != nil {
			return
		}
		r, err := Open(img)
		if err != nil {
			t.Fatalf("an image that opened as a chain does not open as a file: %v", err)
		}
		if err := r.Verify(); err != nil {
			return
		}
		for _, v := range r.Vars() {
			if err := r.ReadVar(v.ID, make([]byte, v.Size)); err != nil {
				t.Fatalf("Verify passed but ReadVar %d failed: %v", v.ID, err)
			}
		}
	})
}
