package client

import (
	"sync/atomic"
	"time"
)

// With ConsumeOptions.Prefetch left at 0, Consume chooses how many leases
// to hold from what it measures, so that neither fast nor slow handlers
// need the option tuned:
//
//   - fast handlers (next to a receive round) get up to DefaultPrefetchMax
//     leases, which is what moves a backlog at the speed of a large batched
//     receive;
//   - slow handlers get as many as they finish within a quarter of a
//     lease (leaseWaitShare), so that a prefetched delivery does not wait
//     out its lease behind the others, and never fewer than Concurrency;
//   - the bodies held stay under prefetchBytesMax;
//   - until a handler has finished, Consume holds prefetchStartPerHandler
//     leases per handler: a handler that takes minutes is not handed a
//     whole batch of leases before its pace is known.
//
// An explicit Prefetch is held as given.
const (
	// DefaultPrefetchMax is the most leases Consume holds with Prefetch 0
	// (or 4 per handler, if that is more). On a three-node cluster with 4
	// clients (ferry bench consume, 256-byte messages, handlers that return
	// at once), 8 handlers each drained 27,500 msg/s at prefetch 32,
	// 53,200 at 100, 62,900 at 128 and 66,400 at 256; one handler each
	// 31,600 at 32, 57,000 at 128 and 74,100 at 256.
	DefaultPrefetchMax = 256
	// prefetchStartPerHandler is the leases per handler held before any
	// handler has finished.
	prefetchStartPerHandler = 2
	// leaseWaitShare: a prefetched delivery waits for a handler for at most
	// about 1/leaseWaitShare of its lease.
	leaseWaitShare = 4
	// prefetchBytesMax bounds the bodies of the leases held, by their
	// running average size.
	prefetchBytesMax = 16 << 20
)

// defaultPrefetch is the most leases Consume holds with Prefetch 0.
func defaultPrefetch(concurrency int) int {
	return max(DefaultPrefetchMax, DefaultPrefetchPerHandler*concurrency)
}

// prefetchLimit lowers Consume's prefetch below the slots' capacity while
// the handlers are slow next to the lease. It holds the slots it takes from
// the pollers as tokens of its own in the slots channel, so the pollers,
// handlers and acker take and give back slots as they do at a fixed
// prefetch.
type prefetchLimit struct {
	slots       chan struct{}
	pace        *consumePace
	most        int // cap(slots)
	least       int // never fewer: Concurrency, or most if that is less
	start       int // before any handler has finished
	concurrency int

	// held is how many of the slots the limit holds as its own tokens;
	// newPrefetchLimit takes the first ones, run owns it after.
	held int

	leaseNs   atomic.Int64 // what a lease had left when it was handed to the handlers
	bodyBytes atomic.Int64 // running average of a body's size
	target    atomic.Int64 // the leases to hold now
	changed   chan struct{}
}

// newPrefetchLimit returns the limit of a Consume whose slots channel is
// slots, whose handlers pace measures.
func newPrefetchLimit(slots chan struct{}, pace *consumePace) *prefetchLimit {
	most, concurrency := cap(slots), pace.concurrency
	l := &prefetchLimit{slots: slots, pace: pace, most: most, concurrency: concurrency,
		least: min(concurrency, most), start: min(prefetchStartPerHandler*concurrency, most),
		changed: make(chan struct{}, 1)}
	l.start = max(l.start, l.least)
	l.target.Store(int64(l.start))
	// Hold the slots above the starting target before any poller runs:
	// left to run, a poller scheduled first could ask for every slot
	// before a handler's pace is known. slots is new and empty, so this
	// never blocks.
	for ; l.held < most-l.start; l.held++ {
		slots <- struct{}{}
	}
	pace.limit = l
	return l
}

// current is how many leases the pollers should hold now.
func (l *prefetchLimit) current() int {
	if l == nil {
		return 0
	}
	return int(l.target.Load())
}

// received records what was handed to the handlers: the lease left on
// the first delivery and the bodies' sizes.
func (l *prefetchLimit) received(ds []*Delivery) {
	if l == nil || len(ds) == 0 {
		return
	}
	l.leaseNs.Store(int64(time.Until(ds[0].LeaseDeadline())))
	var sum int64
	for _, d := range ds {
		sum += int64(len(d.Body))
	}
	l.bodyBytes.Store(ewma(l.bodyBytes.Load(), sum/int64(len(ds))))
	l.update()
}

// update recomputes the target and wakes run when it moved.
func (l *prefetchLimit) update() {
	t := int64(l.compute())
	if l.target.Swap(t) == t {
		return
	}
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// compute derives the target from the measurements.
func (l *prefetchLimit) compute() int {
	h := l.pace.handleNs.Load()
	if h <= 0 {
		return l.start
	}
	n := l.most
	if lease := l.leaseNs.Load(); lease > 0 {
		runs := lease / leaseWaitShare / h // handler runs in a quarter lease
		if runs < int64(n/l.concurrency)+1 {
			n = min(n, int(runs)*l.concurrency)
		}
	}
	if b := l.bodyBytes.Load(); b > 0 && prefetchBytesMax/b < int64(n) {
		n = int(prefetchBytesMax / b)
	}
	return max(n, l.least)
}

// run holds most-target slots until done is closed, taking a slot when
// one frees and giving slots back as soon as the target rises.
func (l *prefetchLimit) run(done <-chan struct{}) {
	held := l.held
	for {
		want := l.most - l.current()
		switch {
		case held > want:
			<-l.slots // one of the held tokens: never blocks
			held--
			continue
		case held < want:
			select {
			case l.slots <- struct{}{}:
				held++
			case <-l.changed:
			case <-done:
				return
			}
		default:
			select {
			case <-l.changed:
			case <-done:
				return
			}
		}
	}
}
