package vfd_test

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/ftigo/ftigo/vfd"
)

func loadFixture(t *testing.T, d vfd.Driver, n int) []byte {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	if err := vfd.WriteFileAtomic(d, "/f", data); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLoadServesEveryRange(t *testing.T) {
	for _, tc := range []struct {
		name        string
		size, piece int
		tail        int64
	}{
		{"empty", 0, 16, 0},
		{"one piece", 100, 1000, 0},
		{"pieces", 1000, 64, 0},
		{"tail first", 1000, 64, 200},
		{"tail is everything", 1000, 64, 5000},
		{"uneven", 1001, 7, 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := vfd.NewCore()
			data := loadFixture(t, d, tc.size)
			f, err := vfd.OpenRead(d, "/f")
			if err != nil {
				t.Fatal(err)
			}
			l := vfd.Load(f, int64(tc.size), tc.piece, tc.tail)
			if n, _ := l.Size(); n != int64(tc.size) {
				t.Fatalf("Size %d, want %d", n, tc.size)
			}
			// Read the tail first (as an FTI-FF reader does), then the rest in odd pieces.
			for _, r := range [][2]int{{tc.size - min(tc.size, 50), tc.size}, {0, tc.size / 3}, {tc.size / 3, tc.size}} {
				p := make([]byte, r[1]-r[0])
				if err := vfd.ReadFull(l, p, int64(r[0])); err != nil && len(p) > 0 {
					t.Fatalf("read [%d,%d): %v", r[0], r[1], err)
				}
				if !bytes.Equal(p, data[r[0]:r[1]]) {
					t.Fatalf("read [%d,%d): wrong bytes", r[0], r[1])
				}
			}
			// Past the end: short read with io.EOF.
			p := make([]byte, 10)
			n, err := l.ReadAt(p, int64(tc.size)-3)
			if tc.size >= 3 && (n != 3 || !errors.Is(err, io.EOF) || !bytes.Equal(p[:3], data[tc.size-3:])) {
				t.Fatalf("short read: %d, %v", n, err)
			}
			if _, err := l.ReadAt(p, -1); !errors.Is(err, vfd.ErrNegativeOffset) {
				t.Fatalf("negative offset: %v", err)
			}
			if _, err := l.WriteAt(p, 0); !errors.Is(err, vfd.ErrReadOnly) {
				t.Fatalf("WriteAt: %v, want ErrReadOnly", err)
			}
			if err := l.Truncate(0); !errors.Is(err, vfd.ErrReadOnly) {
				t.Fatalf("Truncate: %v, want ErrReadOnly", err)
			}
			b, err := l.Bytes()
			if err != nil || !bytes.Equal(b, data) {
				t.Fatalf("Bytes: %v, equal %v", err, bytes.Equal(b, data))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, data) {
				t.Fatal("Bytes changed by Close")
			}
		})
	}
}

// A read error of the underlying file reaches every reader waiting for
// the bytes it would have brought, and Bytes; nothing hangs.
func TestLoadReadError(t *testing.T) {
	core := vfd.NewCore()
	loadFixture(t, core, 1000)
	d := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpRead && op.Off >= 512 {
			return errors.New("bad sector")
		}
		return nil
	}))
	f, err := vfd.OpenRead(d, "/f")
	if err != nil {
		t.Fatal(err)
	}
	l := vfd.Load(f, 1000, 128, 0)
	p := make([]byte, 100)
	if err := vfd.ReadFull(l, p, 0); err != nil {
		t.Fatalf("bytes before the bad sector: %v", err)
	}
	if err := vfd.ReadFull(l, p, 600); !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("bytes after the bad sector: %v, want ErrInjected", err)
	}
	if _, err := l.Bytes(); !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("Bytes: %v, want ErrInjected", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// Close stops a load midway, and waiting readers return.
func TestLoadCloseStops(t *testing.T) {
	core := vfd.NewCore()
	loadFixture(t, core, 1<<20)
	gate := make(chan struct{})
	d := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpRead && op.Off == 4096 {
			<-gate
		}
		return nil
	}))
	f, err := vfd.OpenRead(d, "/f")
	if err != nil {
		t.Fatal(err)
	}
	l := vfd.Load(f, 1<<20, 4096, 0)
	closed := make(chan error)
	go func() { closed <- l.Close() }()
	close(gate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := l.Bytes(); err == nil {
		// The load may have finished before Close asked it to stop.
		return
	}
	// Stopped before the end: the load reads in order, so the last bytes
	// never arrived (bytes before the stop may have: they stay readable).
	if _, err := l.ReadAt(make([]byte, 10), 1<<20-10); err == nil {
		t.Fatal("read of a stopped load succeeded")
	}
}

func TestBytesFile(t *testing.T) {
	data := []byte("0123456789")
	f := vfd.BytesFile("mem", data)
	p := make([]byte, 4)
	if err := vfd.ReadFull(f, p, 3); err != nil || string(p) != "3456" {
		t.Fatalf("ReadFull: %q, %v", p, err)
	}
	if n, err := f.ReadAt(p, 8); n != 2 || !errors.Is(err, io.EOF) {
		t.Fatalf("short read: %d, %v", n, err)
	}
	if _, err := f.ReadAt(p, -1); !errors.Is(err, vfd.ErrNegativeOffset) {
		t.Fatalf("negative offset: %v", err)
	}
	if _, err := f.WriteAt(p, 0); !errors.Is(err, vfd.ErrReadOnly) {
		t.Fatalf("WriteAt: %v", err)
	}
	if n, _ := f.Size(); n != 10 || f.Name() != "mem" {
		t.Fatalf("Size %d Name %q", n, f.Name())
	}
}

func TestPhysicalMemory(t *testing.T) {
	n := vfd.PhysicalMemory()
	if runtime.GOOS == "linux" && n < 64<<20 {
		t.Fatalf("PhysicalMemory %d on Linux", n)
	}
	if n < 0 {
		t.Fatalf("PhysicalMemory %d", n)
	}
}
