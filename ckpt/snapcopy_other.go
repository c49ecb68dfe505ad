//go:build !linux

package ckpt

// defaultSnapBudget is 1 GiB where the node's memory is not known.
func defaultSnapBudget(int) int64 { return 1 << 30 }
