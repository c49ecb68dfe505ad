package vfd

import "golang.org/x/sys/unix"

// RefuseODirect makes d behave as on a file system that refuses O_DIRECT
// (tmpfs before Linux 6.6 returns EINVAL).
func RefuseODirect(d *Direct) { d.setDirect = func(int) error { return unix.EINVAL } }
