package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ferrymq/ferry/wire"
)

// laneInFlight is how many send requests one partition's lane keeps in
// flight at once; sends arriving while that many are out wait and leave
// together in the next request.
const laneInFlight = 2

// sendLane merges the sends of concurrent callers to one partition of a
// queue into shared requests, the way a database merges concurrent
// commits: a caller whose send finds fewer than laneInFlight requests out
// sends at once; one that finds them all out waits, and when a request
// comes back, everything that waited leaves in one request (up to the
// batch limits). A lone caller is never delayed, and many concurrent ones
// pay one request, one raft round trip and one answer between them.
//
// A caller's messages (one Send, or one SendBatch's messages for the
// partition when they fit one request) stay together and in order in one
// request; requests in flight at once may be stored in either order,
// which only concerns sends that were concurrent to begin with.
type sendLane struct {
	mu       sync.Mutex
	waiting  []*laneUnit // in arrival order
	inflight int         // requests out, including the ones being started
}

// laneUnit is one caller's messages on a lane.
type laneUnit struct {
	ctx context.Context
	wms []wire.Message
	// res and errs are the outcomes, written by whoever sends the unit
	// and read by the caller only after done is closed.
	res  []wire.SendResult
	errs []error
	done chan struct{}
	// slot is set, under the lane's lock, while this unit's caller holds a
	// request slot it has not used yet: it must send what waits or hand
	// the slot on. wake is signalled when a slot is handed to it.
	slot bool
	wake chan struct{} // buffered
}

// lane returns partition p's lane.
func (q *Queue) lane(p int) *sendLane {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lanes == nil {
		q.lanes = make(map[int]*sendLane)
	}
	l := q.lanes[p]
	if l == nil {
		l = &sendLane{}
		q.lanes[p] = l
	}
	return l
}

// sendShared sends the messages at idx (one request's worth) to partition
// p through its lane and records their outcomes in results and errs.
func (q *Queue) sendShared(ctx context.Context, p int, idx []int, wms []wire.Message, results []SendResult, errs []error) {
	u := &laneUnit{ctx: ctx, wms: make([]wire.Message, len(idx)), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	for k, i := range idx {
		u.wms[k] = wms[i]
	}
	l := q.lane(p)
	l.enqueue(u)
	settled := func() {
		if l.claim(u) {
			q.lead(l, p, u)
		}
		for k, i := range idx {
			errs[i] = u.errs[k]
			if u.errs[k] == nil {
				results[i].Seq, results[i].Duplicate = u.res[k].Seq, u.res[k].Duplicate
			}
		}
	}
	for {
		if l.claim(u) {
			q.lead(l, p, u)
		}
		select {
		case <-u.done:
			settled()
			return
		case <-u.wake:
		case <-ctx.Done():
			select {
			case <-u.done: // settled as ctx ended: the outcome stands
				settled()
				return
			default:
			}
			withdrawn := l.withdraw(u)
			if !withdrawn && l.claim(u) {
				q.lead(l, p, u)
			}
			err := context.Cause(ctx)
			if !withdrawn {
				err = unconfirmed(err) // it may be on its way
			}
			for _, i := range idx {
				errs[i] = err
			}
			return
		}
	}
}

// lead uses the request slot the caller of own holds: it takes what waits
// on the lane and sends it, on this goroutine when it is only own (whose
// context then governs the request, as for a send of its own), else on a
// goroutine of its own whose context ends when every caller's has, so
// that no caller waits on another's deadline. The slot is then handed on.
func (q *Queue) lead(l *sendLane, p int, own *laneUnit) {
	units := l.take()
	switch {
	case len(units) == 0:
		l.release()
	case len(units) == 1 && units[0] == own:
		q.sendUnits(own.ctx, p, units)
		l.release()
	default:
		started := q.c.goBackground(func() {
			ctx, stop := mergedContext(units)
			defer stop()
			q.sendUnits(ctx, p, units)
			l.release()
		})
		if !started {
			for _, u := range units {
				u.fail(ErrClosed)
			}
			l.release()
		}
	}
}

// enqueue adds u to the lane, with a request slot when one is free.
func (l *sendLane) enqueue(u *laneUnit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting = append(l.waiting, u)
	if l.inflight < laneInFlight {
		l.inflight++
		u.slot = true
	}
}

// claim reports whether u's caller holds an unused request slot, and
// takes it.
func (l *sendLane) claim(u *laneUnit) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := u.slot
	u.slot = false
	return held
}

// take removes the waiting units that fit one request (at least the
// first) and returns them.
func (l *sendLane) take() []*laneUnit {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, count, weight := 0, 0, 0
	for _, u := range l.waiting {
		w := 0
		for _, m := range u.wms {
			w += messageWeight(m)
		}
		if n > 0 && (count+len(u.wms) > maxBatch || weight+w > maxBatchBytes) {
			break
		}
		n, count, weight = n+1, count+len(u.wms), weight+w
	}
	units := make([]*laneUnit, n)
	copy(units, l.waiting)
	l.waiting = append(l.waiting[:0], l.waiting[n:]...)
	return units
}

// release hands the slot of a request that ended (or found nothing to
// send) to the first waiting unit without one, or frees it.
func (l *sendLane) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handOn()
}

// handOn is release with l.mu held.
func (l *sendLane) handOn() {
	for _, u := range l.waiting {
		if !u.slot {
			u.slot = true
			select {
			case u.wake <- struct{}{}:
			default: // a wake is pending already
			}
			return
		}
	}
	l.inflight--
}

// withdraw removes u from the lane if it still waits (nothing of it was
// sent) and reports whether it did; a slot u held goes on to the next
// waiting unit.
func (l *sendLane) withdraw(u *laneUnit) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, w := range l.waiting {
		if w != u {
			continue
		}
		l.waiting = append(l.waiting[:k], l.waiting[k+1:]...)
		if u.slot {
			u.slot = false
			l.handOn()
		}
		return true
	}
	return false
}

// sendUnits sends the units' messages in one request (with runBatch's
// retries; a unit's messages are not sent again once its caller's context
// has ended) and settles every unit.
func (q *Queue) sendUnits(ctx context.Context, p int, units []*laneUnit) {
	wms, owner := units[0].wms, []*laneUnit(nil)
	if len(units) > 1 {
		wms, owner = nil, nil
		for _, u := range units {
			wms = append(wms, u.wms...)
			for range u.wms {
				owner = append(owner, u)
			}
		}
	}
	res := make([]wire.SendResult, len(wms))
	errs := make([]error, len(wms))
	spec := q.sendSpec(p, wms, func(i int, r wire.SendResult, err error, amb bool) {
		res[i], errs[i] = r, sendOutcome(r, err, amb)
	})
	if owner != nil {
		spec.stopped = func(i int) error { return context.Cause(owner[i].ctx) }
	}
	idx := make([]int, len(wms))
	for i := range idx {
		idx[i] = i
	}
	runBatch(ctx, q.c, spec, idx)
	off := 0
	for _, u := range units {
		n := len(u.wms)
		u.res, u.errs = res[off:off+n], errs[off:off+n]
		close(u.done)
		off += n
	}
}

// fail settles every message of the unit with err.
func (u *laneUnit) fail(err error) {
	u.res, u.errs = make([]wire.SendResult, len(u.wms)), make([]error, len(u.wms))
	for k := range u.errs {
		u.errs[k] = err
	}
	close(u.done)
}

// mergedContext returns a context that ends once every unit's context has
// ended (with the last one's cause), and its release. Callers usually
// share one context or a few, so it watches each distinct Done channel
// once (contexts sharing one end together, with one cause); a context that
// can never end keeps the merged one alive, so nothing is watched then.
func mergedContext(units []*laneUnit) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(units[0].ctx))
	watched := distinctEndings(units)
	if watched == nil {
		return ctx, func() { cancel(nil) }
	}
	left := atomic.Int64{}
	left.Store(int64(len(watched)))
	stops := make([]func() bool, len(watched))
	for k, wctx := range watched {
		stops[k] = context.AfterFunc(wctx, func() {
			if left.Add(-1) == 0 {
				cancel(context.Cause(wctx))
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel(nil)
	}
}

// distinctEndingsScanMax is how many distinct Done channels
// distinctEndings compares by scanning before it indexes them.
const distinctEndingsScanMax = 8

// distinctEndings returns one context of the units' per distinct Done
// channel, or nil when one of them can never end.
func distinctEndings(units []*laneUnit) []context.Context {
	var ctxs []context.Context
	var dones []<-chan struct{}
	var index map[<-chan struct{}]struct{}
	for _, u := range units {
		d := u.ctx.Done()
		if d == nil {
			return nil
		}
		if index != nil {
			if _, ok := index[d]; ok {
				continue
			}
			index[d] = struct{}{}
		} else if slices.Contains(dones, d) {
			continue
		}
		ctxs, dones = append(ctxs, u.ctx), append(dones, d)
		if index == nil && len(dones) > distinctEndingsScanMax {
			index = make(map[<-chan struct{}]struct{}, len(units))
			for _, d := range dones {
				index[d] = struct{}{}
			}
		}
	}
	return ctxs
}
