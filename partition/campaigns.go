package partition

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// DefaultCampaignsMax is how many of a node's replicas may campaign at
// once (Config.Campaigns): enough that thousands of groups whose leader's
// node died elect new leaders within a few seconds, few enough that their
// votes and first entries never swamp the surviving nodes so badly that
// rounds outlast the election timeout and restart without end.
const DefaultCampaignsMax = 32

// Campaigns bounds the replicas of one node that campaign at once; see
// raft.CampaignLimiter in third_party/raft. Replicas that find every slot
// taken queue, and each released slot wakes the first in line (no polling
// and no stampede). Create one per node and give it to every replica's
// Config. Safe for concurrent use.
type Campaigns struct {
	mu      sync.Mutex
	slots   int
	free    int
	waiters []*campaignWaiter // FIFO; gone ones are skipped and compacted
	gone    int               // waiters in the queue that left
}

type campaignWaiter struct {
	wake chan struct{} // one token, buffered
	left bool          // done was called, or the wake was sent
}

var _ raft.CampaignLimiter = (*Campaigns)(nil)

// NewCampaigns returns a bound of n campaigns at once, 1..65536.
func NewCampaigns(n int) (*Campaigns, error) {
	if n < 1 || n > 1<<16 {
		return nil, fmt.Errorf("%w: %d campaigns at once, want 1..65536", ErrInvalidConfig, n)
	}
	return &Campaigns{slots: n, free: n}, nil
}

// TryAcquire takes a slot, reporting false when all are taken.
func (c *Campaigns) TryAcquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.free == 0 {
		return false
	}
	c.free--
	return true
}

// Release returns a slot and wakes the first replica waiting for one.
// Releasing more than was taken is a bug, and panics.
func (c *Campaigns) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.free == c.slots {
		panic("partition: campaign slot released but none was taken")
	}
	c.free++
	c.wakeNextLocked()
}

// Wait queues the caller for a slot; see raft.CampaignLimiter.
func (c *Campaigns) Wait() (<-chan struct{}, func(tookSlot bool)) {
	w := &campaignWaiter{wake: make(chan struct{}, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.free > 0 {
		w.left = true
		w.wake <- struct{}{}
	} else {
		c.waiters = append(c.waiters, w)
	}
	return w.wake, func(tookSlot bool) { c.leave(w, tookSlot) }
}

// leave ends w's wait. A wake that w received, or that is on its way, and
// did not use goes to the next in line while a slot is free.
func (c *Campaigns) leave(w *campaignWaiter, tookSlot bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !w.left {
		w.left = true
		c.gone++
		c.compactLocked()
	}
	if !tookSlot {
		c.wakeNextLocked()
	}
}

// wakeNextLocked sends the first waiting replica its wake, while a slot is
// free.
func (c *Campaigns) wakeNextLocked() {
	for c.free > 0 && len(c.waiters) > 0 {
		w := c.waiters[0]
		c.waiters[0] = nil
		c.waiters = c.waiters[1:]
		if w.left {
			c.gone--
			continue
		}
		w.left = true
		w.wake <- struct{}{}
		return
	}
}

// compactLocked drops the waiters that left once they are half the queue,
// so that a queue of N live waiters holds at most 2N entries.
func (c *Campaigns) compactLocked() {
	if c.gone*2 < len(c.waiters) {
		return
	}
	live := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.left {
			live = append(live, w)
		}
	}
	clear(c.waiters[len(live):])
	c.waiters, c.gone = live, 0
}

// InUse returns the slots taken now.
func (c *Campaigns) InUse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slots - c.free
}

// Waiting returns the replicas queued for a slot now.
func (c *Campaigns) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters) - c.gone
}
