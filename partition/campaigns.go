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
// rounds outlast the election timeout and restart without end. An
// election is mostly waiting (a pre-vote and a vote round trip, a durable
// write on each side), so the slots bound latency more than CPU: with
// 10,000 groups on three nodes of a 2-core machine, killing one node,
// 32 slots kept each survivor at 60-75% of a core and elected about 330
// groups a second per node (6.3-7.4 s in all); 96 elected them in 3.5 s,
// and a busy partition beside them still failed over in 1.0-1.6 s.
const DefaultCampaignsMax = 96

// CampaignsReserved is how many slots beyond the bound only busy groups
// (raft's priority asks: the follower was not quiesced when its leader
// went silent) may take, so that a partition clients are using never
// queues behind thousands of idle ones after a node dies.
const CampaignsReserved = 8

// Campaigns bounds the replicas of one node that campaign at once; see
// raft.CampaignLimiter in third_party/raft. Replicas that find every slot
// taken queue, busy ones first, and each released slot wakes the first in
// line (no polling and no stampede). Create one per node and give it to
// every replica's Config. Safe for concurrent use.
type Campaigns struct {
	mu       sync.Mutex
	slots    int // the bound plus the reserved slots
	reserved int
	free     int
	busy     waitQueue // priority asks, served first
	idle     waitQueue
}

// waitQueue is a FIFO of waiting replicas; gone ones are skipped and
// compacted.
type waitQueue struct {
	waiters []*campaignWaiter
	gone    int // waiters in the queue that left
}

type campaignWaiter struct {
	wake     chan struct{} // one token, buffered
	left     bool          // done was called, or the wake was sent
	priority bool
}

var _ raft.CampaignLimiter = (*Campaigns)(nil)

// NewCampaigns returns a bound of n campaigns at once, 1..65536, plus
// CampaignsReserved slots for busy groups.
func NewCampaigns(n int) (*Campaigns, error) {
	if n < 1 || n > 1<<16 {
		return nil, fmt.Errorf("%w: %d campaigns at once, want 1..65536", ErrInvalidConfig, n)
	}
	slots := n + CampaignsReserved
	return &Campaigns{slots: slots, reserved: CampaignsReserved, free: slots}, nil
}

// mayTakeLocked reports whether a free slot may go to an ask of this
// priority: an idle group leaves the reserved slots alone.
func (c *Campaigns) mayTakeLocked(priority bool) bool {
	if priority {
		return c.free > 0
	}
	return c.free > c.reserved
}

// TryAcquire takes a slot, reporting false when none is free for an ask
// of this priority.
func (c *Campaigns) TryAcquire(priority bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mayTakeLocked(priority) {
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
func (c *Campaigns) Wait(priority bool) (<-chan struct{}, func(tookSlot bool)) {
	w := &campaignWaiter{wake: make(chan struct{}, 1), priority: priority}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.mayTakeLocked(priority):
		w.left = true
		w.wake <- struct{}{}
	case priority:
		c.busy.waiters = append(c.busy.waiters, w)
	default:
		c.idle.waiters = append(c.idle.waiters, w)
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
		q := &c.idle
		if w.priority {
			q = &c.busy
		}
		q.gone++
		q.compact()
	}
	if !tookSlot {
		c.wakeNextLocked()
	}
}

// wakeNextLocked sends the first waiting replica that may take a free
// slot its wake: a busy one first.
func (c *Campaigns) wakeNextLocked() {
	if c.mayTakeLocked(true) && c.busy.wakeFirst() {
		return
	}
	if c.mayTakeLocked(false) {
		c.idle.wakeFirst()
	}
}

// wakeFirst wakes the first waiter still there, reporting whether there
// was one.
func (q *waitQueue) wakeFirst() bool {
	for len(q.waiters) > 0 {
		w := q.waiters[0]
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		if w.left {
			q.gone--
			continue
		}
		w.left = true
		w.wake <- struct{}{}
		return true
	}
	return false
}

// compact drops the waiters that left once they are half the queue, so
// that a queue of N live waiters holds at most 2N entries.
func (q *waitQueue) compact() {
	if q.gone*2 < len(q.waiters) {
		return
	}
	live := q.waiters[:0]
	for _, w := range q.waiters {
		if !w.left {
			live = append(live, w)
		}
	}
	clear(q.waiters[len(live):])
	q.waiters, q.gone = live, 0
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
	return len(c.busy.waiters) - c.busy.gone + len(c.idle.waiters) - c.idle.gone
}
