package vfd

import "golang.org/x/sys/unix"

// PhysicalMemory returns the machine's physical memory in bytes (the
// kernel's total RAM), or 0 when it cannot be known.
func PhysicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
