package vfd

import (
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// RefuseODirect makes d behave as on a file system that refuses O_DIRECT
// (tmpfs before Linux 6.6 returns EINVAL).
func RefuseODirect(d *Direct) { d.setDirect = func(int) error { return unix.EINVAL } }

// CountDirectPreads makes d count the preads its files issue and the
// bytes they ask of the device. Set it before opening files.
func CountDirectPreads(d *Direct) (calls, bytes *atomic.Int64) {
	calls, bytes = new(atomic.Int64), new(atomic.Int64)
	d.onPread = func(_ int64, n int) {
		calls.Add(1)
		bytes.Add(int64(n))
	}
	return calls, bytes
}

// WritebackRefused reports whether a sec2 file has stopped issuing
// sync_file_range because the kernel or file system refused it.
func WritebackRefused(f File) bool { return f.(*sec2File).noWriteback.Load() }

// OpenSec2AnyKind opens name as a sec2 file without Open's check that it
// is a regular file, so tests can reach code paths only other kinds of
// file take (sync_file_range refused on a FIFO).
func OpenSec2AnyKind(name string, flag Flag) (File, error) {
	fd, err := openRetry(name, osFlags(flag)|syscall.O_CLOEXEC, 0o666)
	if err != nil {
		return nil, err
	}
	return &sec2File{fd: fd, name: name, flag: flag}, nil
}
