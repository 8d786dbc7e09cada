package partition

import (
	"errors"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// snapshotBytesMin is the least log data applied between two snapshots
// that the bytes trigger waits for.
const snapshotBytesMin = 128 << 20

// snapshotTrigger takes a snapshot once the entry data applied since the
// last one exceeds the larger of snapshotBytesMin and twice the last
// snapshot's size. raft's own trigger counts entries, and merged entries
// hold up to a megabyte each: 8,192 of them would leave gigabytes of log
// for a restart to replay (and to hold in memory while it does). Tying the
// interval to the snapshot's own size keeps snapshot writes at most half
// the log written. A local snapshot costs about 50-70 bytes per queued
// message to freeze and to write (fsm's compact version 4 records), so
// with 1,000,000 messages queued one is taken every ~140 MB of log.
type snapshotTrigger struct {
	appliedBytes  atomic.Int64 // entry data applied since the last snapshot
	snapshotBytes atomic.Int64 // size of the last persisted snapshot
	running       atomic.Bool  // a snapshot by size is being taken
}

func newSnapshotTrigger() *snapshotTrigger {
	return &snapshotTrigger{}
}

// applied counts entry data applied; it reports whether a snapshot is due.
func (s *snapshotTrigger) applied(bytes int) bool {
	n := s.appliedBytes.Add(int64(bytes))
	return n >= max(snapshotBytesMin, 2*s.snapshotBytes.Load())
}

// frozen is called when a snapshot freezes the state: the bytes applied
// so far are in it. It returns them, for persisted to take off.
func (s *snapshotTrigger) frozen() int64 { return s.appliedBytes.Load() }

// persisted records a snapshot of size bytes that covered covered bytes of
// applied data.
func (s *snapshotTrigger) persisted(size, covered int64) {
	s.snapshotBytes.Store(size)
	s.appliedBytes.Add(-covered)
}

// snapshotBySize has raft take the snapshot the bytes trigger asks for, on
// a goroutine of its own that ends with it (raft.Snapshot waits for the
// snapshot, which needs raft's FSM goroutine, the caller). One at a time:
// a request while one runs is dropped, and the applies after it ask again.
func (p *Partition) snapshotBySize() {
	p.mu.Lock()
	r := p.raft
	p.mu.Unlock()
	if r == nil || !p.snaps.running.CompareAndSwap(false, true) {
		return
	}
	started := p.goTracked(func() {
		defer p.snaps.running.Store(false)
		err := r.Snapshot().Error()
		if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
			p.logger.Warn("snapshot by size failed", "err", err)
		}
	})
	if !started {
		p.snaps.running.Store(false)
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
