package b3

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/blake3"
)

func input(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestSum256MatchesReference checks the digest of every length around the
// chunk, span and tree boundaries against github.com/zeebo/blake3.
func TestSum256MatchesReference(t *testing.T) { onPaths(t, testSum256MatchesReference) }

func testSum256MatchesReference(t *testing.T) {
	var lengths []int
	for _, base := range []int{0, 1024, span, 2 * span, 3 * span, 16 * span, 17 * span, 64 * span, 1 << 20, 3<<20 + 5} {
		for d := -2; d <= 2; d++ {
			if base+d >= 0 {
				lengths = append(lengths, base+d)
			}
		}
	}
	for n := 0; n < 2*span+64; n += 61 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		p := input(n)
		want := blake3.Sum256(p)
		if got := Sum256(p); got != want {
			t.Fatalf("Sum256 of %d bytes = %x, want %x", n, got[:8], want[:8])
		}
	}
}

// TestWriteSplits checks that how the input is cut into writes does not
// change the digest, and that Sum does not disturb later writes.
func TestWriteSplits(t *testing.T) { onPaths(t, testWriteSplits) }

func testWriteSplits(t *testing.T) {
	p := input(5*span + 777)
	want := blake3.Sum256(p)
	half := blake3.Sum256(p[:len(p)/2])
	for _, piece := range []int{1, 63, 1000, 1024, 1025, span - 1, span, span + 1, 3 * span, len(p)} {
		h := New()
		for off := 0; off < len(p); off += piece {
			if off <= len(p)/2 && off+piece > len(p)/2 {
				h.Write(p[off : len(p)/2])
				if got := h.Sum256(); got != half {
					t.Fatalf("piece %d: Sum256 midway = %x, want %x", piece, got[:8], half[:8])
				}
				h.Write(p[len(p)/2 : min(off+piece, len(p))])
				continue
			}
			h.Write(p[off:min(off+piece, len(p))])
		}
		if got := h.Sum256(); got != want {
			t.Fatalf("piece %d: %x, want %x", piece, got[:8], want[:8])
		}
		if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("piece %d: Sum = %x, want %x", piece, got[:8], want[:8])
		}
		c := h.Clone()
		c.Write([]byte("more"))
		if got := h.Sum256(); got != want {
			t.Fatalf("piece %d: writing to a clone changed the original", piece)
		}
		if got, w := c.Sum256(), blake3.Sum256(append(append([]byte(nil), p...), "more"...)); got != w {
			t.Fatalf("piece %d: clone %x, want %x", piece, got[:8], w[:8])
		}
		h.Reset()
		h.Write(p[:10])
		if got, w := h.Sum256(), blake3.Sum256(p[:10]); got != w {
			t.Fatalf("after Reset: %x, want %x", got[:8], w[:8])
		}
	}
}

func FuzzHasher(f *testing.F) {
	usePath(f, pathGuts) // the reference is zeebo's: check the other path
	f.Add([]byte("abc"), uint16(1))
	f.Add(make([]byte, 3*span+5), uint16(1000))
	f.Fuzz(func(t *testing.T, p []byte, cut uint16) {
		h := New()
		c := min(int(cut), len(p))
		h.Write(p[:c])
		h.Write(p[c:])
		if got, want := h.Sum256(), blake3.Sum256(p); got != want {
			t.Fatalf("%d bytes cut at %d: %x, want %x", len(p), c, got[:8], want[:8])
		}
	})
}

// BenchmarkHash compares this hasher, on the path the process chose and
// on the 16-way guts path, with github.com/zeebo/blake3's, on 1 MiB
// writes (the transfers' block size).
func BenchmarkHash(b *testing.B) {
	p := input(64 << 20)
	b.Logf("the process hashes on %v", path())
	run := func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			h := New()
			for off := 0; off < len(p); off += 1 << 20 {
				h.Write(p[off : off+1<<20])
			}
			h.Sum256()
		}
	}
	b.Run("b3", run)
	b.Run("guts", func(b *testing.B) {
		usePath(b, pathGuts)
		run(b)
	})
	b.Run("zeebo", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			h := blake3.New()
			for off := 0; off < len(p); off += 1 << 20 {
				h.Write(p[off : off+1<<20])
			}
			h.Sum(nil)
		}
	})
}

// TestSumTreePath checks which inputs Sum256 hashes in place as a
// complete tree (a power-of-two number of spans) and that both paths give
// the reference digest.
func TestSumTreePath(t *testing.T) {
	for _, spans := range []int{1, 2, 3, 4, 5, 6, 8, 12, 16, 64, 128} {
		for _, d := range []int{-1, 0, 1} {
			n := spans*span + d
			p := input(n)
			_, tree := sumTree(p)
			if want := d == 0 && spans&(spans-1) == 0; tree != want {
				t.Fatalf("%d bytes: tree path %v, want %v", n, tree, want)
			}
			if got, want := Sum256(p), blake3.Sum256(p); got != want {
				t.Fatalf("Sum256 of %d bytes = %x, want %x", n, got[:8], want[:8])
			}
		}
	}
}

// usePath makes the package hash on p until t ends.
func usePath(t testing.TB, p hashPath) {
	path() // the process's choice is made, so that it is not made later
	saved := chosen
	t.Cleanup(func() { chosen = saved })
	chosen = p
}

// onPaths runs fn once on each hash path.
func onPaths(t *testing.T, fn func(t *testing.T)) {
	for _, p := range []hashPath{pathGuts, pathZeebo} {
		t.Run(p.String(), func(t *testing.T) {
			usePath(t, p)
			fn(t)
		})
	}
}

// TestPathChoice: the calibration returns one of the two paths, the
// process keeps the one it chose, and a Hasher written on each path
// gives the reference digest, clones and resets included.
func TestPathChoice(t *testing.T) {
	got := fastPath(calibrationBytes, 1)
	if got != pathGuts && got != pathZeebo {
		t.Fatalf("fastPath = %d, want one of the two paths", got)
	}
	if a, b := path(), path(); a != b || (a != pathGuts && a != pathZeebo) {
		t.Fatalf("path() = %v then %v", a, b)
	}
	p := input(3*span + 5)
	want := blake3.Sum256(p)
	onPaths(t, func(t *testing.T) {
		h := New()
		h.Write(p[:100])
		c := h.Clone()
		h.Write(p[100:])
		c.Write(p[100:])
		if got := h.Sum256(); got != want {
			t.Fatalf("%x, want %x", got[:8], want[:8])
		}
		if got := c.Sum256(); got != want {
			t.Fatalf("clone: %x, want %x", got[:8], want[:8])
		}
		if (h.z != nil) != (chosen == pathZeebo) {
			t.Fatalf("on %v the hasher took the other path", chosen)
		}
		h.Reset()
		if got, w := h.Sum256(), blake3.Sum256(nil); got != w {
			t.Fatalf("after Reset: %x, want %x", got[:8], w[:8])
		}
	})
}
