package fileformat

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPreambleShapes: for files of every shape a rank writes (no
// variable, only empty variables, a version-2 file with datasets, many
// blocks, a layout reused with zero tails), the Reader built from the
// preamble alone passes the file's bytes in any piece size and refuses a
// change of any single byte of the file (header, data, zero tail,
// metadata, file block) or a stream one byte short or long; a file
// written without hashes has no Verifier (ErrUnhashed).
func TestPreambleShapes(t *testing.T) {
	write := func(vars []Var, prev *Layout, opts ...Option) ([]byte, *Layout) {
		m := &memFile{name: "shape.fti"}
		lay, _, err := Write(m, Meta{CkptID: 3, Rank: 2}, vars, prev, append([]Option{WithClock(fixedClock)}, opts...)...)
		require.NoError(t, err)
		return m.b, lay
	}
	big := make([]byte, 5*MinBlockSize+17)
	for i := range big {
		big[i] = byte(i*7 + i/251)
	}
	_, lay := write([]Var{{ID: 1, Name: "a", Type: Uint8, Data: big}, {ID: 2, Name: "b", Type: Uint8, Data: big[:300]}}, nil, WithBlockSize(MinBlockSize))
	shrunk, _ := write([]Var{{ID: 1, Name: "a", Type: Uint8, Data: big[:100]}, {ID: 2, Name: "b", Type: Uint8, Data: big[:3]}}, lay, WithBlockSize(MinBlockSize))
	ds := []Dataset{{ID: 7, Name: "g", Shape: []int64{8}, Type: Float64}}
	subs := []Subset{{VarID: 1, Dataset: 7, Offset: []int64{0}, Count: []int64{8}}}
	v2, _ := write([]Var{{ID: 1, Name: "u", Type: Float64, Data: asBytes([]float64{1, 2, 3, 4, 5, 6, 7, 8})}}, nil, WithDatasets(ds, subs))
	noVars, _ := write(nil, nil)
	empties, _ := write([]Var{{ID: 1, Name: "e", Type: Uint8, Data: []byte{}}, {ID: 9, Name: "f", Type: Int32, Data: []byte{}}}, nil)
	many, _ := write([]Var{{ID: 4, Name: "m", Type: Uint8, Data: big}}, nil, WithBlockSize(MinBlockSize))
	unhashed, _ := write([]Var{{ID: 4, Name: "m", Type: Uint8, Data: big[:999]}}, nil, WithoutHash())
	small, _ := smallFile(t)
	for _, tc := range []struct {
		name string
		b    []byte
	}{{"small", small}, {"no variables", noVars}, {"empty variables", empties}, {"version 2", v2},
		{"many blocks", many}, {"reused layout with zero tails", shrunk}} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			r, err := OpenPreamble("copy.fti", preambleOf(t, b))
			require.NoError(t, err)
			full, err := Open(&memFile{name: "src.fti", b: b})
			require.NoError(t, err)
			require.Equal(t, full.Summary(), r.Summary())
			check := func(b []byte, n int) error {
				v, err := r.NewVerifier()
				require.NoError(t, err)
				return streamThrough(v, b, n)
			}
			for _, n := range []int{1, 5, MinBlockSize, MinBlockSize + 3, len(b)} {
				require.NoError(t, check(b, n), "pieces of %d", n)
			}
			require.ErrorIs(t, check(b[:len(b)-1], 7), ErrTruncated)
			require.ErrorIs(t, check(append(bytes.Clone(b), 0), 7), ErrCorrupt)
			step := 1
			if len(b) > 4096 {
				step = 7 // still every region, and every block
			}
			for off := 0; off < len(b); off += step {
				bad := bytes.Clone(b)
				bad[off] ^= 0x01
				err := check(bad, 61)
				require.Error(t, err, "byte %d of %d changed and passed", off, len(b))
				var ce *CorruptionError
				require.ErrorAs(t, err, &ce, "byte %d", off)
				require.Equal(t, "copy.fti", ce.Path, "byte %d", off)
			}
		})
	}
	t.Run("without hashes", func(t *testing.T) {
		r, err := OpenPreamble("copy.fti", preambleOf(t, unhashed))
		require.NoError(t, err)
		_, err = r.NewVerifier()
		require.ErrorIs(t, err, ErrUnhashed)
	})
}

// FuzzPreambleVerifier streams arbitrary bytes, in arbitrary pieces,
// through the Verifier that a receiver builds from the preamble of a
// known file: it must never panic, and it may accept only the file's own
// bytes. Bytes that open as an FTI-FF file themselves are also checked
// through their own preamble, whose verdict must be Verify's.
func FuzzPreambleVerifier(f *testing.F) {
	orig, _ := smallFile(f)
	f.Add(orig, uint16(61))
	f.Add(orig[:len(orig)-1], uint16(1))
	f.Add(append(bytes.Clone(orig), 0), uint16(4096))
	mid := bytes.Clone(orig)
	mid[len(mid)/2] ^= 1
	f.Add(mid, uint16(7))
	f.Add([]byte{}, uint16(0))
	r, err := OpenPreamble("copy.fti", preambleOf(f, orig))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, piece uint16) {
		n := max(int(piece), 1)
		v, err := r.NewVerifier()
		if err != nil {
			t.Fatal(err)
		}
		if err := streamThrough(v, b, n); err == nil && !bytes.Equal(b, orig) {
			t.Fatalf("the Verifier of the original accepted %d other bytes", len(b))
		}
		own, err := Open(&memFile{name: "own.fti", b: b})
		if err != nil || !own.Hashed() {
			return
		}
		p, err := own.Preamble()
		if err != nil {
			t.Fatalf("Preamble of an open file: %v", err)
		}
		pr, err := OpenPreamble("own-copy.fti", p)
		if err != nil {
			t.Fatalf("OpenPreamble of the preamble of an open file: %v", err)
		}
		ov, err := pr.NewVerifier()
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("NewVerifier: %v", err)
			}
			return
		}
		streamErr, verifyErr := streamThrough(ov, b, n), own.Verify()
		if (streamErr == nil) != (verifyErr == nil) {
			t.Fatalf("stream verdict %v, Verify %v", streamErr, verifyErr)
		}
	})
}
