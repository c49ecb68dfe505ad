package vfd_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftigo/ftigo/vfd"
)

func pageOff(b []byte) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b))) % uintptr(os.Getpagesize())
}

func filled(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

// TestMovePages: between two large Go slices at the same offset in a
// page, the whole pages are swapped (src holds dst's former bytes there,
// the bytes around them are copied) and dst holds src's bytes; at different
// offsets, below MinMovePages, or into a file mapping everything is
// copied and src keeps its bytes.
func TestMovePages(t *testing.T) {
	ps := os.Getpagesize()
	const n = 3<<20 + 123
	t.Run("aligned", func(t *testing.T) {
		for _, lead := range []int{0, 64, ps - 1} {
			rawS, rawD := make([]byte, n+2*ps), make([]byte, n+2*ps)
			// The same offset in a page for both.
			s := rawS[(ps-int(pageOff(rawS)))%ps+lead:][:n]
			d := rawD[(ps-int(pageOff(rawD)))%ps+lead:][:n]
			copy(s, filled(n, 7))
			for i := range d {
				d[i] = 0xee // the application's old values
			}
			want := bytes.Clone(s)
			moved := vfd.MovePages(d, s)
			if moved < n-2*ps || moved%ps != 0 {
				t.Fatalf("lead %d: moved %d of %d bytes", lead, moved, n)
			}
			if !bytes.Equal(d, want) {
				t.Fatalf("lead %d: dst does not hold src's bytes", lead)
			}
			head := (ps - int(pageOff(s))) % ps
			if !bytes.Equal(s[:head], want[:head]) || !bytes.Equal(s[head+moved:], want[head+moved:]) {
				t.Fatalf("lead %d: the copied ends of src changed", lead)
			}
			if !bytes.Equal(s[head:head+moved], bytes.Repeat([]byte{0xee}, moved)) {
				t.Fatalf("lead %d: the moved pages of src do not hold dst's former bytes (swapped)", lead)
			}
			// Both stay usable memory.
			s[head], d[head] = 1, 2
			if s[head] != 1 || d[head] != 2 {
				t.Fatalf("lead %d: memory not writable after the move", lead)
			}
			// The heap goes on: the memory is collected and reused.
			rawS, s = nil, nil
			runtime.GC()
			for range 4 {
				b := make([]byte, n)
				for i := 0; i < len(b); i += 512 {
					b[i] = byte(i)
				}
				runtime.GC()
			}
			if !bytes.Equal(d, append([]byte{}, d...)) || d[head] != 2 || !bytes.Equal(d[head+1:], want[head+1:]) {
				t.Fatalf("lead %d: dst changed after collections", lead)
			}
		}
	})
	t.Run("across mappings", func(t *testing.T) {
		// src: one anonymous mapping cut in three by a different advice
		// on its middle part; dst: a Go slice. Swapped piece by piece.
		m, err := unix.Mmap(-1, 0, 4<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		if err := unix.Madvise(m[1<<20:2<<20], unix.MADV_NOHUGEPAGE); err != nil {
			t.Skipf("madvise: %v", err)
		}
		copy(m, filled(len(m), 11))
		want := bytes.Clone(m)
		raw := make([]byte, len(m)+ps)
		d := raw[(ps-int(pageOff(raw)))%ps:][:len(m)]
		if moved := vfd.MovePages(d, m); moved != len(m) {
			t.Fatalf("moved %d of %d bytes across three mappings", moved, len(m))
		}
		if !bytes.Equal(d, want) {
			t.Fatalf("dst does not hold src's bytes")
		}
	})
	t.Run("copied", func(t *testing.T) {
		rawS, rawD := make([]byte, n+2*ps), make([]byte, n+2*ps)
		s := rawS[(ps-int(pageOff(rawS)))%ps:][:n]
		d := rawD[(ps-int(pageOff(rawD)))%ps+8:][:n] // another offset in the page
		copy(s, filled(n, 3))
		want := bytes.Clone(s)
		if moved := vfd.MovePages(d, s); moved != 0 {
			t.Fatalf("moved %d bytes between different page offsets", moved)
		}
		if !bytes.Equal(d, want) || !bytes.Equal(s, want) {
			t.Fatalf("copy: dst or src wrong")
		}
		small := s[:vfd.MinMovePages-1]
		sd := rawD[(ps-int(pageOff(rawD)))%ps:][:len(small)]
		if moved := vfd.MovePages(sd, small); moved != 0 || !bytes.Equal(sd, small) || !bytes.Equal(small, want[:len(small)]) {
			t.Fatalf("small run: moved %d", moved)
		}
	})
	t.Run("file mapping", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "mapped")
		if err := os.WriteFile(name, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(name, unix.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		m, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		raw := make([]byte, n+ps)
		s := raw[(ps-int(pageOff(raw)))%ps:][:n]
		copy(s, filled(n, 9))
		want := bytes.Clone(s)
		if moved := vfd.MovePages(m, s); moved != 0 {
			t.Fatalf("moved %d bytes into a file mapping", moved)
		}
		if err := unix.Msync(m, unix.MS_SYNC); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || !bytes.Equal(s, want) {
			t.Fatalf("the file did not get the bytes, or src changed")
		}
	})
}

// TestLoadAligned: the byte at offset align of the buffer starts a page,
// and the buffer holds the file.
func TestLoadAligned(t *testing.T) {
	want := filled(5<<20+77, 1)
	for _, align := range []int64{0, 64, 4095, -1} {
		l := vfd.LoadAligned(vfd.BytesFile("f", want), int64(len(want)), 1<<20, 1<<20, align)
		b, err := l.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("align %d: wrong bytes", align)
		}
		if align >= 0 && pageOff(b[align:]) != 0 {
			t.Fatalf("align %d: byte %d at page offset %d", align, align, pageOff(b[align:]))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
