package h5

import (
	"bytes"
	"testing"

	"github.com/ftigo/ftigo/vfd"
)

// FuzzReader feeds arbitrary bytes to Open: it must return an error or a
// file whose every dataset can be read back, never panic.
func FuzzReader(f *testing.F) {
	if b, err := vfd.ReadFile(vfd.Sec2{}, "testdata/sample.h5"); err == nil {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(signature))
	// Sizes far beyond the file.
	for _, size := range []uint64{1 << 40, ^uint64(0), 1 << 20} {
		b := hugeRootHeader(0, size)
		f.Add(withEOF(b, uint64(len(b))))
		s := sampleBytes(f)
		f.Add(hugeHeap(f, uint64(len(s)), size))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Open(bytes.NewReader(b), int64(len(b)), "fuzz.h5")
		if err != nil {
			return
		}
		_ = r.Walk(func(p string, l Link) error {
			if !l.External && l.Object.Kind == KindDataset && !l.Object.IsVirtual() {
				if _, err := r.ReadData(l.Object); err != nil {
					t.Fatalf("%s: %v", p, err)
				}
			}
			for _, a := range l.ObjectAttrs() {
				_ = a.String()
			}
			return nil
		})
	})
}
