package vfd_test

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/ftigo/ftigo/vfd"
)

// A crash test: write with the commit protocol, cut the power, look at
// what survived.
func ExampleCore_CrashClone() {
	c := vfd.NewCore()
	_ = vfd.WriteFileAtomic(c, "state", []byte("v1")) // synced and dir-synced

	f, _ := vfd.CreateTrunc(c, "scratch") // never synced, dir never synced
	_, _ = f.WriteAt([]byte("lost"), 0)
	_ = f.Close()

	after := c.CrashClone()
	b, _ := vfd.ReadFile(after, "state")
	_, err := after.Stat("scratch")
	fmt.Println(string(b), errors.Is(err, fs.ErrNotExist))
	// Output: v1 true
}

// Fail the second write with ENOSPC.
func ExampleNewFault() {
	d := vfd.NewFault(vfd.NewCore(), vfd.OnNth(vfd.OpWrite, 1, syscall.ENOSPC))
	f, _ := vfd.Create(d, "x")
	_, err1 := f.WriteAt([]byte("a"), 0)
	_, err2 := f.WriteAt([]byte("b"), 1)
	fmt.Println(err1 == nil, errors.Is(err2, syscall.ENOSPC), errors.Is(err2, vfd.ErrInjected))
	// Output: true true true
}

func ExampleParse() {
	d, err := vfd.Parse("stdio:buffer=64k;family:member=1m;sec2")
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Name(), d.(*vfd.Stdio).Inner().Name())
	_, err = vfd.Parse("family:member=huge")
	fmt.Println(errors.Is(err, vfd.ErrBadSpec))
	// Output:
	// stdio family
	// true
}

// A checkpoint writer that hashes each block: the hint after each write
// lets the device work while the next block is computed. The final Sync
// is still what makes the file durable; a Core, which has no device, shows
// that a crash before it keeps nothing.
func ExampleStartWriteback() {
	c := vfd.NewCore()
	f, _ := vfd.Create(c, "ckpt.bin")
	_ = c.SyncDir("/")
	block := make([]byte, 4096)
	for i := range 4 {
		block[0] = byte(i) // ... compute the block
		off := int64(i * len(block))
		_, _ = f.WriteAt(block, off)
		_ = vfd.StartWriteback(f, off, int64(len(block)))
	}
	before, _ := vfd.ReadFile(c.CrashClone(), "ckpt.bin")
	err := f.Sync()
	after, _ := vfd.ReadFile(c.CrashClone(), "ckpt.bin")
	fmt.Println(len(before), len(after), err)
	// Output: 0 16384 <nil>
}
