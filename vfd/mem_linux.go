package vfd

import (
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PhysicalMemory returns the machine's physical memory in bytes (the
// kernel's total RAM), or 0 when it cannot be known.
func PhysicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// MovePages makes dst hold the bytes of src (the first min(len(dst),
// len(src)) of them) and returns how many of them it moved rather than
// copied. Where the two lie at the same offset within a memory page, the
// whole pages of dst are taken over from src by remapping them (Linux
// mremap with MREMAP_DONTUNMAP): no byte is copied and no page of dst is
// touched, and those pages of src then read as zeros; the bytes before
// and after them are copied. It moves only between private anonymous
// read-write mappings (Go's heap, C's malloc; never a file mapping, whose
// writes would stop reaching the file) and only runs of at least
// [MinMovePages] bytes; otherwise, or where the kernel refuses, it copies
// everything, leaving src as it was. The moved pages of dst take the
// mapping attributes of src's (an mlock on dst's old pages, say, does not
// carry over).
//
// The caller gives src's bytes away: nothing may read them afterwards
// expecting the data, and nothing may use dst or src while it runs.
func MovePages(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	dst, src = dst[:n], src[:n]
	ps := uintptr(os.Getpagesize())
	d0 := uintptr(unsafe.Pointer(unsafe.SliceData(dst)))
	s0 := uintptr(unsafe.Pointer(unsafe.SliceData(src)))
	head := int((ps - d0%ps) % ps)
	if d0%ps != s0%ps || n-head < MinMovePages {
		copy(dst, src)
		return 0
	}
	body := (n - head) / int(ps) * int(ps)
	if !anonPrivate(d0+uintptr(head), body) || !anonPrivate(s0+uintptr(head), body) {
		copy(dst, src)
		return 0
	}
	_, _, errno := unix.Syscall6(unix.SYS_MREMAP, s0+uintptr(head), uintptr(body), uintptr(body),
		unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED|unix.MREMAP_DONTUNMAP, d0+uintptr(head), 0)
	if errno != 0 {
		copy(dst, src)
		return 0
	}
	copy(dst[:head], src[:head])
	copy(dst[head+body:], src[head+body:])
	return body
}

// MinMovePages is the smallest run of whole pages [MovePages] remaps
// rather than copies: below it a copy costs less than reading the
// process's memory map.
const MinMovePages = 1 << 20

// anonPrivate reports whether [addr, addr+n) lies in private anonymous
// read-write mappings of this process (/proc/self/maps), one after the
// other.
func anonPrivate(addr uintptr, n int) bool {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false
	}
	next, end := uint64(addr), uint64(addr)+uint64(n)
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		stop, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || stop <= next || start > next {
			continue
		}
		name := ""
		if len(f) > 5 {
			name = f[5]
		}
		if f[1] != "rw-p" || f[4] != "0" || (name != "" && name != "[heap]") {
			return false
		}
		next = stop
		if next >= end {
			return true
		}
	}
	return false
}
