package fileformat

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// preambleOf returns the preamble of the FTI-FF file b.
func preambleOf(t testing.TB, b []byte) []byte {
	t.Helper()
	r, err := Open(&memFile{name: "src.fti", b: b})
	require.NoError(t, err)
	p, err := r.Preamble()
	require.NoError(t, err)
	return p
}

// streamThrough shows b to v in pieces of n bytes and returns the
// verdict.
func streamThrough(v *Verifier, b []byte, n int) error {
	for off := 0; off < len(b); off += n {
		if _, err := v.Write(b[off:min(off+n, len(b))]); err != nil {
			return err
		}
	}
	return v.Close()
}

// TestPreambleVerifiesTheStream: a Reader built from a file's preamble
// alone has the file's summary, and its Verifier passes the file's bytes
// and stops at a damaged data byte; the data itself is not in the
// preamble.
func TestPreambleVerifiesTheStream(t *testing.T) {
	b, vars := smallFile(t)
	p := preambleOf(t, b)
	full, err := Open(&memFile{name: "src.fti", b: b})
	require.NoError(t, err)
	require.Less(t, len(p), len(b)+preambleFixed)

	r, err := OpenPreamble("copy.fti", p)
	require.NoError(t, err)
	require.Equal(t, full.Summary(), r.Summary())
	for _, n := range []int{1, 7, 64, 4096, len(b)} {
		v, err := r.NewVerifier()
		require.NoError(t, err)
		require.NoError(t, streamThrough(v, b, n), "pieces of %d", n)
	}
	// Every data byte of a chunk is checked.
	for _, c := range full.chunk {
		for _, off := range []int64{c.Fptr, c.Fptr + c.Size - 1} {
			if c.Size == 0 {
				continue
			}
			bad := append([]byte(nil), b...)
			bad[off] ^= 0x10
			v, err := r.NewVerifier()
			require.NoError(t, err)
			err = streamThrough(v, bad, 13)
			require.ErrorIs(t, err, ErrHashMismatch, "byte %d", off)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "copy.fti", ce.Path)
		}
	}
	// The data is not in the preamble.
	dst := make([]byte, len(vars[0].Data))
	require.ErrorIs(t, r.ReadVar(vars[0].ID, dst), ErrNotInPreamble)
	require.ErrorIs(t, r.Verify(), ErrNotInPreamble)
	// A Reader from a preamble gives the same preamble.
	p2, err := r.Preamble()
	require.NoError(t, err)
	require.Equal(t, p, p2)
}

// TestPreambleRejectsDamage: a preamble cut short, with another magic,
// inconsistent offsets or a damaged metadata or file block is refused.
func TestPreambleRejectsDamage(t *testing.T) {
	b, _ := smallFile(t)
	p := preambleOf(t, b)
	mod := func(f func(q []byte) []byte) []byte { return f(append([]byte(nil), p...)) }
	cases := []struct {
		name string
		p    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"fixed part only", p[:preambleFixed+HeaderSize-1], ErrTruncated},
		{"magic", mod(func(q []byte) []byte { q[0] = 'X'; return q }), ErrCorrupt},
		{"cut tail", p[:len(p)-1], ErrCorrupt},
		{"longer", append(append([]byte(nil), p...), 0), ErrCorrupt},
		{"size", mod(func(q []byte) []byte { le.PutUint64(q[8:], uint64(len(b)+1)); return q }), ErrCorrupt},
		{"huge size", mod(func(q []byte) []byte { le.PutUint64(q[8:], 1<<63); return q }), ErrCorrupt},
		{"offset below header", mod(func(q []byte) []byte { le.PutUint64(q[16:], 3); return q }), ErrCorrupt},
		{"offset past end", mod(func(q []byte) []byte { le.PutUint64(q[16:], uint64(len(b)+5)); return q }), ErrCorrupt},
		{"metadata byte", mod(func(q []byte) []byte { q[preambleFixed+HeaderSize] ^= 1; return q }), ErrHashMismatch},
		{"file block byte", mod(func(q []byte) []byte { q[len(q)-FBSize+130] ^= 1; return q }), ErrHashMismatch},
		{"header byte", mod(func(q []byte) []byte { q[preambleFixed+30] ^= 1; return q }), ErrHashMismatch},
		{"not FTI-FF", mod(func(q []byte) []byte {
			q[preambleFixed] ^= 1 // header magic
			q[len(q)-FBSize] ^= 1 // file block magic
			return q
		}), ErrNotFTIFF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenPreamble("copy.fti", c.p)
			require.ErrorIs(t, err, c.want)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
		})
	}
}

// TestPreambleOfChangedFile: a file whose metadata changed after Open
// gives a preamble that does not open.
func TestPreambleOfChangedFile(t *testing.T) {
	b, _ := smallFile(t)
	m := &memFile{name: "src.fti", b: append([]byte(nil), b...)}
	r, err := Open(m)
	require.NoError(t, err)
	m.b[r.fb.metaOff] ^= 1
	p, err := r.Preamble()
	require.NoError(t, err)
	_, err = OpenPreamble("copy.fti", p)
	require.ErrorIs(t, err, ErrHashMismatch)
}

// FuzzOpenPreamble feeds arbitrary preambles to OpenPreamble, which must
// never panic; a preamble that opens gives a Verifier (or ErrUnhashed)
// and a preamble equal to itself.
func FuzzOpenPreamble(f *testing.F) {
	for _, g := range goldenFiles(f) {
		b := g.b
		r, err := Open(&memFile{name: g.name, b: b})
		if err != nil {
			continue
		}
		p, err := r.Preamble()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
	}
	f.Add([]byte("FTIFFPRE"))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := OpenPreamble("fuzz.fti", p)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a *CorruptionError: %v", err)
			}
			return
		}
		if _, err := r.NewVerifier(); err != nil && !errors.Is(err, ErrUnhashed) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("NewVerifier: %v", err)
		}
		q, err := r.Preamble()
		if err != nil || string(q) != string(p) {
			t.Fatalf("preamble does not round-trip: %v", err)
		}
	})
}
