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
	match string
	left  int
}

func syncError(dir string) error {
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.left <= 0 || !strings.Contains(dir, state.match) {
		return nil
	}
	state.left--
	return fmt.Errorf("injected fsync failure in %s: %w", dir, syscall.EIO)
}

func arm(match string, count int) error {
	if count < 0 || count > SyncCountMax {
		return fmt.Errorf("diskfault: count %d outside 0..%d", count, SyncCountMax)
	}
	state.mu.Lock()
	defer state.mu.Unlock()
	state.match, state.left = match, count
	return nil
}

func remaining() int {
	state.mu.Lock()
	defer state.mu.Unlock()
	return state.left
}
