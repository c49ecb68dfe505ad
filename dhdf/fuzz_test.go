package dhdf

import (
	"bytes"
	"encoding/binary"
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
	// The global heap claiming far more than the file.
	if i := bytes.Index(files["tiny.h5"], []byte("GCOL")); i > 0 {
		for _, size := range []uint64{1 << 40, ^uint64(0), 1 << 28} {
			b := bytes.Clone(files["tiny.h5"])
			binary.LittleEndian.PutUint64(b[i+8:], size)
			f.Add(b)
		}
	}
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
