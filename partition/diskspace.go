package partition

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDiskReserveBytes is Config.DiskReserveBytes when zero: room kept
// free for the small entries (receives, acks, nacks, ticks) that let
// consumers drain a partition whose disk is filling up.
const DefaultDiskReserveBytes = 64 << 20

// diskCheckInterval is how long a free-space reading is trusted.
const diskCheckInterval = 100 * time.Millisecond

// diskGuard refuses sends while the replica's file system has less free
// space than the reserve. Sends are the only commands that grow the disk by
// more than a few bytes; refusing them early, with a retryable error, keeps
// the room that receives and acks need, so that consumers can drain the
// queue and free space (like a broker's disk alarm blocking publishers).
// The check reads statfs at most every diskCheckInterval.
type diskGuard struct {
	dir          string
	reserveBytes uint64
	free         func(dir string) (uint64, error)

	mu        sync.Mutex
	checkedAt time.Time
	freeBytes uint64
	err       error
}

// freeBytesOf is the space available to unprivileged writers on dir's file
// system.
func freeBytesOf(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// check returns ErrDiskFull when the free space is below the reserve. A
// failing statfs is not treated as a full disk: the write itself will say.
func (g *diskGuard) check(now time.Time) error { return g.checkRoom(now, 0) }

// checkRoom is check for a command that will write about extraBytes: it
// needs that much free beyond the reserve.
func (g *diskGuard) checkRoom(now time.Time, extraBytes uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.checkedAt) >= diskCheckInterval {
		g.freeBytes, g.err = g.free(g.dir)
		g.checkedAt = now
	}
	if g.err == nil && g.freeBytes < g.reserveBytes+extraBytes {
		return fmt.Errorf("%w: %d bytes free, %d needed and %d kept for receives and acks",
			ErrDiskFull, g.freeBytes, extraBytes, g.reserveBytes)
	}
	return nil
}
