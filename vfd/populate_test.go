package vfd_test

import (
	"bytes"
	"os"
	"testing"
	"unsafe"

	"github.com/ftigo/ftigo/vfd"
)

// TestPopulateKeepsBytes: Populate changes no byte, of the whole pages
// it populates or of the partial ones around them, and succeeds on
// ordinary Go memory (the kernels ftigo runs on have
// MADV_POPULATE_WRITE).
func TestPopulateKeepsBytes(t *testing.T) {
	ps := os.Getpagesize()
	for _, tc := range []struct {
		name     string
		from, to int
	}{
		{"whole buffer", 0, 64 * ps},
		{"unaligned", 123, 40*ps + 77},
		{"less than a page", 10, ps - 10},
		{"empty", 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := make([]byte, 65*ps)
			for i := range raw {
				raw[i] = byte(i*31 + i/4093)
			}
			want := bytes.Clone(raw)
			if !vfd.Populate(raw[tc.from:tc.to]) {
				t.Fatal("Populate refused ordinary Go memory")
			}
			if !bytes.Equal(raw, want) {
				t.Fatal("Populate changed bytes")
			}
		})
	}
}

// TestLoadInto: LoadInto fills the buffer it is given, and Bytes returns
// that very buffer.
func TestLoadInto(t *testing.T) {
	d := vfd.NewCore()
	data := loadFixture(t, d, 10000)
	f, err := vfd.OpenRead(d, "/f")
	if err != nil {
		t.Fatal(err)
	}
	buf := vfd.AlignedBytes(int64(len(data)), 64)
	vfd.Populate(buf)
	l := vfd.LoadInto(f, buf, 1000, 300)
	got, err := l.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(got) != unsafe.SliceData(buf) || len(got) != len(buf) {
		t.Fatal("Bytes is not the buffer given to LoadInto")
	}
	if !bytes.Equal(got, data) {
		t.Fatal("wrong bytes")
	}
}
