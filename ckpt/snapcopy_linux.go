package ckpt

import "syscall"

// defaultSnapBudget is a quarter of the node's memory shared by its
// nodeSize ranks, or 1 GiB when the kernel does not say.
func defaultSnapBudget(nodeSize int) int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 1 << 30
	}
	total := int64(si.Totalram) * int64(si.Unit)
	return max(total/4/int64(max(nodeSize, 1)), 1<<20)
}
