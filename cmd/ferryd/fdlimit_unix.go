//go:build unix

package main

import "syscall"

// fileLimit is the process's soft limit on open file descriptors (0 when
// it cannot be read or is unlimited).
func fileLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 0
	}
	return int(lim.Cur)
}
