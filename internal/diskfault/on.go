//go:build chaosdisk

package diskfault

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
)

// Armable reports whether this build can inject faults.
const Armable = true

var state struct {
	mu    sync.Mutex
	kind  Kind
	match string
	left  int
}

// fire returns the kind of the armed fault if it fires for an operation
// on path (an fsync, or a write if write is set), counting it; else 0.
func fire(path string, write bool) Kind {
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.left <= 0 || (state.kind != Sync) != write || !strings.Contains(path, state.match) {
		return 0
	}
	state.left--
	return state.kind
}

func syncError(path string) error {
	if fire(path, false) == 0 {
		return nil
	}
	return fmt.Errorf("injected fsync failure on %s: %w", path, syscall.EIO)
}

func writeFault(path string, n int) (int, error) {
	switch fire(path, true) {
	case Write:
		return 0, fmt.Errorf("injected write failure on %s: %w", path, syscall.EIO)
	case ShortWrite:
		return n / 2, fmt.Errorf("injected short write (%d of %d bytes) on %s: %w", n/2, n, path, syscall.EIO)
	}
	return n, nil
}

func arm(kind Kind, match string, count int) error {
	state.mu.Lock()
	defer state.mu.Unlock()
	state.kind, state.match, state.left = kind, match, count
	return nil
}

func remaining() int {
	state.mu.Lock()
	defer state.mu.Unlock()
	return state.left
}
