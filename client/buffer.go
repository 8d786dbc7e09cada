package client

import (
	"context"
	"sync"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// Buffer rules. A lease that arrives for a Receive call that has already
// returned waits in the Queue's buffer. It is handed to the next Receive
// (one that is waiting right now takes it at once) only while at least
// half of the time it had left on arrival remains; after that it is given
// back to the server with a release, which does not count as a delivery
// attempt, so the message is delivered again at once with the same
// attempt number.
const (
	// releaseTimeout bounds the give-back of unused leases.
	releaseTimeout = 5 * time.Second
	// closeReleaseTimeout bounds the give-back of buffered leases by
	// Close.
	closeReleaseTimeout = time.Second
	// releaseTries bounds the attempts of one give-back. Only attempts
	// that surely did nothing (not leader, unavailable, not sent) are
	// repeated: a release repeated after an unknown outcome could give
	// back a newer delivery of the same message to someone else.
	releaseTries = 3
)

// bufferedLease is a lease waiting in the buffer.
type bufferedLease struct {
	d *Delivery
	// handBy is when the lease stops being handed out and is released.
	handBy time.Time
}

// handByFor returns until when a lease arriving now may be handed out:
// halfway to its deadline.
func handByFor(d *Delivery, now time.Time) time.Time {
	left := d.Deadline.Sub(now)
	if left <= 0 {
		return now
	}
	return now.Add(left / 2)
}

// stash puts leases nobody waits for into the buffer, wakes a Receive
// waiting for them, and releases those with too little time left.
func (q *Queue) stash(ds []*Delivery) {
	if len(ds) == 0 {
		return
	}
	now := time.Now()
	var stale []*Delivery
	q.mu.Lock()
	for _, d := range ds {
		hb := handByFor(d, now)
		if !hb.After(now) {
			stale = append(stale, d)
			continue
		}
		q.buf = append(q.buf, bufferedLease{d: d, handBy: hb})
	}
	if q.bufReady != nil {
		close(q.bufReady)
		q.bufReady = nil
	}
	q.armLocked(now)
	q.mu.Unlock()
	q.release(stale)
}

// bufferSignal returns a channel closed when leases are next buffered.
// Take it before looking at the buffer, so that nothing buffered in
// between is missed.
func (q *Queue) bufferSignal() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.bufReady == nil {
		q.bufReady = make(chan struct{})
	}
	return q.bufReady
}

// takeBuffered removes and returns up to maxN buffered deliveries that may
// still be handed out, oldest first; it releases those that may not.
func (q *Queue) takeBuffered(maxN int) []*Delivery {
	q.mu.Lock()
	stale := q.dropStaleLocked(time.Now())
	k := min(maxN, len(q.buf))
	var out []*Delivery
	for _, b := range q.buf[:k] {
		out = append(out, b.d)
	}
	rest := copy(q.buf, q.buf[k:])
	clear(q.buf[rest:])
	q.buf = q.buf[:rest]
	q.mu.Unlock()
	q.release(stale)
	return out
}

// dropStaleLocked removes and returns the buffered deliveries whose hand
// out time has passed.
func (q *Queue) dropStaleLocked(now time.Time) []*Delivery {
	var stale []*Delivery
	kept := q.buf[:0]
	for _, b := range q.buf {
		if b.handBy.After(now) {
			kept = append(kept, b)
		} else {
			stale = append(stale, b.d)
		}
	}
	clear(q.buf[len(kept):])
	q.buf = kept
	return stale
}

// armLocked sets the buffer's timer to the earliest hand out time.
func (q *Queue) armLocked(now time.Time) {
	if len(q.buf) == 0 {
		return
	}
	next := q.buf[0].handBy
	for _, b := range q.buf[1:] {
		if b.handBy.Before(next) {
			next = b.handBy
		}
	}
	if q.bufTimer == nil {
		q.bufTimer = time.AfterFunc(next.Sub(now), q.expireBuffered)
		return
	}
	q.bufTimer.Reset(next.Sub(now))
}

// expireBuffered releases the buffered leases that nobody took in time.
func (q *Queue) expireBuffered() {
	now := time.Now()
	q.mu.Lock()
	stale := q.dropStaleLocked(now)
	q.armLocked(now)
	q.mu.Unlock()
	q.release(stale)
}

// drainBuffer empties the buffer and stops its timer; it returns what was
// in it.
func (q *Queue) drainBuffer() []*Delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*Delivery
	for _, b := range q.buf {
		out = append(out, b.d)
	}
	q.buf = nil
	if q.bufTimer != nil {
		q.bufTimer.Stop()
	}
	return out
}

// Buffered returns how many received leases wait in the Queue's buffer
// for the next Receive.
func (q *Queue) Buffered() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.buf)
}

// release gives leases that no caller saw back to the server, in the
// background, without counting the attempt (see wire.NackItem.Release).
// What cannot be released expires on the server as usual.
func (q *Queue) release(ds []*Delivery) {
	for _, send := range q.releases(ds, releaseTimeout) {
		q.c.goBackground(send)
	}
}

// releaseWait is release that returns when the requests are done, each
// bounded by timeout.
func (q *Queue) releaseWait(ds []*Delivery, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, send := range q.releases(ds, timeout) {
		wg.Add(1)
		if !q.c.goBackground(func() { defer wg.Done(); send() }) {
			wg.Done()
		}
	}
	wg.Wait()
}

// releases returns the functions that release ds, one per request.
func (q *Queue) releases(ds []*Delivery, timeout time.Duration) []func() {
	var out []func()
	byPart := make(map[int][]int)
	for i, d := range ds {
		byPart[d.Partition] = append(byPart[d.Partition], i)
	}
	for p, idx := range byPart {
		for _, ch := range chunk(idx, nil) {
			req := wire.NackRequest{Queue: q.name, Partition: p, Items: make([]wire.NackItem, len(ch))}
			for k, i := range ch {
				req.Items[k] = wire.NackItem{Receipt: ds[i].receipt(), Release: true}
			}
			out = append(out, func() {
				ctx, cancel := context.WithTimeout(q.c.ctx, timeout)
				defer cancel()
				q.releaseNow(ctx, p, req)
			})
		}
	}
	return out
}

// releaseNow sends one release request, repeating it only while it surely
// did nothing.
func (q *Queue) releaseNow(ctx context.Context, p int, req wire.NackRequest) {
	rt := partRoute{q.c, q.name, p}
	for attempt := 0; attempt < releaseTries; attempt++ {
		_, cl, err := q.c.callOnce(ctx, rt, wire.OpNack, req)
		if cl != classRetry {
			if err != nil {
				q.c.log.Debug("ferry: release failed", "queue", q.name, "partition", p, "err", err)
			}
			return
		}
		if q.c.sleep(ctx, attempt) != nil {
			return
		}
	}
}
