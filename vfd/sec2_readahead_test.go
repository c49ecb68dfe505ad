package vfd_test

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/ftigo/ftigo/vfd"
)

// TestStartReadahead: the hint leaves the bytes as they are, reads them
// back whole, refuses a negative range and a closed file, and does
// nothing on a file without the capability.
func TestStartReadahead(t *testing.T) {
	d := vfd.Sec2{}
	name := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("readahead"), 100000)
	f, err := vfd.CreateTrunc(d, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := d.Open(name, vfd.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(vfd.ReadaheadStarter); !ok {
		t.Fatalf("a sec2 file has no StartReadahead")
	}
	for _, c := range []struct{ off, n int64 }{{0, 0}, {0, int64(len(want))}, {4096, 1 << 40}, {int64(len(want)) + 10, 5}} {
		if err := vfd.StartReadahead(r, c.off, c.n); err != nil {
			t.Fatalf("StartReadahead(%d, %d): %v", c.off, c.n, err)
		}
	}
	got := make([]byte, len(want))
	if err := vfd.ReadFull(r, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the file changed under the hint")
	}
	if err := vfd.StartReadahead(r, -1, 10); !errors.Is(err, vfd.ErrNegativeOffset) {
		t.Fatalf("negative offset: %v, want ErrNegativeOffset", err)
	}
	if err := vfd.StartReadahead(r, 0, -1); !errors.Is(err, vfd.ErrNegativeOffset) {
		t.Fatalf("negative length: %v, want ErrNegativeOffset", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := vfd.StartReadahead(r, 0, 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("closed file: %v, want fs.ErrClosed", err)
	}
	// Without the capability: nothing, no error.
	if err := vfd.StartReadahead(vfd.BytesFile("b", want), 0, 0); err != nil {
		t.Fatalf("bytes file: %v", err)
	}
}
