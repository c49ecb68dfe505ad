package vfd

import (
	"os"
	"slices"
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
// whole pages of dst and src are swapped by remapping them (Linux mremap
// with MREMAP_DONTUNMAP): no byte is copied, dst's pages become src's
// and src's become dst's (src then holds dst's former bytes there, and
// its memory stays as resident as it was); the bytes before and after
// them are copied. It moves only between private anonymous read-write
// mappings (Go's heap, C's malloc; never a file mapping, whose writes
// would stop reaching the file) and only runs of at least
// [MinMovePages] bytes; otherwise, or where the kernel refuses, it
// copies everything, leaving src as it was. The swapped pages take the
// mapping attributes of the range they land in's source (an mlock on
// dst's old pages, say, does not carry over).
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
	da, sa := d0+uintptr(head), s0+uintptr(head)
	dcut, dok := anonPrivate(da, body)
	scut, sok := anonPrivate(sa, body)
	if !dok || !sok {
		copy(dst, src)
		return 0
	}
	// A remap stays within one mapping: cut the run where either side's
	// mappings end, and swap piece by piece (copy a piece refused).
	cuts := append(append([]int{}, dcut...), scut...)
	slices.Sort(cuts)
	moved, from := 0, 0
	for _, to := range append(slices.Compact(cuts), body) {
		if to <= from {
			continue
		}
		if swapPages(da+uintptr(from), sa+uintptr(from), uintptr(to-from)) {
			moved += to - from
		} else {
			copy(dst[head+from:head+to], src[head+from:head+to])
		}
		from = to
	}
	copy(dst[:head], src[:head])
	copy(dst[head+body:], src[head+body:])
	return moved
}

// mremap moves the n bytes of pages at from to to (MREMAP_FIXED) or,
// when to is 0, wherever the kernel likes; with keep (MREMAP_DONTUNMAP)
// from stays mapped, empty. It returns the new address.
func mremap(from, n, to uintptr, keep bool) (uintptr, bool) {
	flags := uintptr(unix.MREMAP_MAYMOVE)
	if to != 0 {
		flags |= unix.MREMAP_FIXED
	}
	if keep {
		flags |= unix.MREMAP_DONTUNMAP
	}
	r, _, errno := unix.Syscall6(unix.SYS_MREMAP, from, n, n, flags, to, 0)
	return r, errno == 0
}

// swapPages swaps the n bytes of pages at d and s without ever leaving
// either range unmapped: d's pages are parked elsewhere (d stays mapped,
// empty), s's are moved onto d (s stays mapped, empty), the parked ones
// onto s. It reports false, with d's bytes as they were and s's
// untouched, when the kernel refuses the first steps.
func swapPages(d, s, n uintptr) bool {
	parked, ok := mremap(d, n, 0, true)
	if !ok {
		return false
	}
	if _, ok := mremap(s, n, d, true); !ok {
		// Put d's pages back (d is mapped and empty meanwhile).
		if _, ok := mremap(parked, n, d, false); !ok {
			// Cannot happen short of the kernel running out of map
			// entries; d reads as zeros then, which the caller's copy
			// fixes: MovePages copies when swapPages fails.
			munmap(parked, n)
		}
		return false
	}
	if _, ok := mremap(parked, n, s, false); !ok {
		munmap(parked, n) // s stays mapped, empty
	}
	return true
}

// MinMovePages is the smallest run of whole pages [MovePages] remaps
// rather than copies: below it a copy costs less than reading the
// process's memory map.
const MinMovePages = 1 << 20

// anonPrivate reports whether [addr, addr+n) lies in private anonymous
// read-write mappings of this process (/proc/self/maps), one after the
// other, and returns the offsets in the range where one of them ends and
// the next begins.
func anonPrivate(addr uintptr, n int) ([]int, bool) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, false
	}
	next, end := uint64(addr), uint64(addr)+uint64(n)
	var cuts []int
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
			return nil, false
		}
		next = stop
		if next >= end {
			return cuts, true
		}
		cuts = append(cuts, int(next-uint64(addr)))
	}
	return nil, false
}

// munmap unmaps the n bytes at a, a mapping of MovePages' own.
func munmap(a, n uintptr) { _, _, _ = unix.Syscall(unix.SYS_MUNMAP, a, n, 0) }
