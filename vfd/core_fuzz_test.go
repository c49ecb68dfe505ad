package vfd_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ftigo/ftigo/vfd"
)

// FuzzCoreOps decodes the input as a sequence of file operations (write,
// truncate, sync, crash clone) on a core file and checks the file and its
// crash clones against a byte-slice model after each one.
func FuzzCoreOps(f *testing.F) {
	f.Add([]byte{0, 0, 10, 0, 5, 2, 3, 1, 0, 3})
	f.Add([]byte{0, 255, 255, 0, 200, 2, 1, 0, 100, 3, 0, 1, 0, 1, 0, 3, 1, 255, 255, 3})
	f.Add(bytes.Repeat([]byte{0, 17, 3, 9, 0, 2, 1, 30, 40, 3}, 8))
	f.Fuzz(func(t *testing.T, prog []byte) {
		c := vfd.NewCore()
		file, err := vfd.Create(c, "f")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		var cur, synced []byte
		for len(prog) >= 3 {
			op, arg := prog[0]%4, int64(binary.BigEndian.Uint16(prog[1:3]))*13 // up to ~850 KiB
			prog = prog[3:]
			switch op {
			case 0: // write arg2 bytes at arg
				n := 1
				if len(prog) > 0 {
					n = int(prog[0])*97 + 1
					prog = prog[1:]
				}
				b := bytes.Repeat([]byte{byte(arg) | 1}, n)
				if _, err := file.WriteAt(b, arg); err != nil {
					t.Fatal(err)
				}
				if end := int(arg) + n; end > len(cur) {
					cur = append(cur, make([]byte, end-len(cur))...)
				}
				copy(cur[arg:], b)
			case 1:
				if err := file.Truncate(arg); err != nil {
					t.Fatal(err)
				}
				if int(arg) < len(cur) {
					cur = cur[:arg]
				} else {
					cur = append(cur, make([]byte, int(arg)-len(cur))...)
				}
			case 2:
				if err := file.Sync(); err != nil {
					t.Fatal(err)
				}
				synced = append([]byte(nil), cur...)
			case 3:
				got, err := vfd.ReadFile(c.CrashClone(), "f")
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, synced) {
					t.Fatalf("crash clone has %d bytes, want the %d synced", len(got), len(synced))
				}
			}
			got := make([]byte, len(cur)+1)
			n, _ := file.ReadAt(got, 0)
			if !bytes.Equal(got[:n], cur) {
				t.Fatalf("file has %d bytes, model %d, or they differ", n, len(cur))
			}
		}
	})
}
