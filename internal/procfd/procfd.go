// Package procfd counts this process's open file descriptors by what they
// point to, from /proc/self/fd (Linux). Tests use it to check bounds on
// open files. It owns nothing else and never opens or closes a
// descriptor it did not create.
package procfd

import (
	"os"
	"path/filepath"
)

// Count returns how many of this process's descriptors point to a path for
// which match is true. Listing and resolving are separate steps, so a
// descriptor closed and reused meanwhile is seen on its new target.
func Count(match func(target string) bool) (int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && match(target) {
			n++
		}
	}
	return n, nil
}
