package dhdf

import (
	"testing"

	"github.com/ftigo/ftigo/vfd"
)

// FuzzOpen replaces the main file of the golden tiny set with arbitrary
// bytes (its AHFs stay intact): Open and every read must return an error
// or data, never panic.
func FuzzOpen(f *testing.F) {
	files := map[string][]byte{}
	for _, n := range []string{"tiny.h5", "tiny.1.h5", "tiny.2.h5"} {
		b, err := vfd.ReadFile(vfd.Sec2{}, "testdata/"+n)
		if err != nil {
			f.Fatal(err)
		}
		files[n] = b
	}
	f.Add(files["tiny.h5"])
	f.Add(files["tiny.h5"][:len(files["tiny.h5"])/2])
	f.Fuzz(func(t *testing.T, mhf []byte) {
		c := vfd.NewCore()
		for n, b := range files {
			if n == "tiny.h5" {
				b = mhf
			}
			if err := vfd.WriteFileAtomic(c, n, b); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open("tiny.h5", Options{Driver: c, MaxRead: 1 << 20})
		if err != nil {
			return
		}
		defer s.Close()
		for _, x := range s.SDSs() {
			_, _ = s.ReadSDS(x.Name)
			for _, ch := range x.Chunks {
				_, _ = s.ReadChunk(x.Name, ch.Name)
			}
		}
	})
}
