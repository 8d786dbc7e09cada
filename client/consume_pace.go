package client

import (
	"sync/atomic"
	"time"
)

// Consume sizes its receives from two measured times: how long a handler
// takes (consumePace, shared by the Consume call) and how long a receive
// takes to be answered when work is ready (each partition's poller).
//
// When the handlers would get through a whole share of the prefetch in
// less than half a receive round, they are fast next to the network: the
// acks of the rest of the share come back almost at once, so a receive
// waits for them and asks for the whole share, as a batched receive + ack
// of that size would. Each receive costs the server about as much as
// several messages, so on a busy cluster half-size receives move less
// (at prefetch 32 and 4 x 8 handlers: 24,702 msg/s with half-size
// receives, 31,665 with whole ones; a batched receive of 32: 28,886).
//
// When handlers are slow next to a round, a receive leaves as soon as half
// the share is free, and a second may follow before the first is answered,
// so the deliveries still queued cover the round and handlers do not wait.
//
// A receive never waits for the rest of its share longer than one round
// (at most fullShareWaitMax): a handler stuck on one delivery holds up the
// others' next receive by that much, not for as long as it runs.
const (
	// fullShareWaitMax bounds how long a receive waits for the rest of its
	// share once half of it is ready.
	fullShareWaitMax = 20 * time.Millisecond
	// paceWeightShift sets the weight of a new sample in the running
	// averages: 1/8.
	paceWeightShift = 3
)

// consumePace measures the handlers of one Consume call.
type consumePace struct {
	concurrency int
	handleNs    atomic.Int64   // running average of a handler's duration
	limit       *prefetchLimit // nil when Prefetch was given
}

// handled records one handler's duration.
func (p *consumePace) handled(d time.Duration) {
	p.handleNs.Store(ewma(p.handleNs.Load(), int64(d)))
	if p.limit != nil {
		p.limit.update()
	}
}

// shareTime estimates how long the handlers take to get through n
// deliveries.
func (p *consumePace) shareTime(n int) time.Duration {
	return time.Duration(p.handleNs.Load() * int64(n) / int64(p.concurrency))
}

// ewma folds sample into the running average avg (the first sample when
// avg is 0).
func ewma(avg, sample int64) int64 {
	if avg == 0 {
		return max(sample, 1)
	}
	return max(avg+(sample-avg)>>paceWeightShift, 1)
}

// roundObserved records how long a receive that came back full took.
func (pp *partPoller) roundObserved(took time.Duration) {
	pp.roundNs = ewma(pp.roundNs, int64(took))
}

// handlersFast reports whether the handlers get through a share in less
// than half a round.
func (pp *partPoller) handlersFast() bool {
	return pp.roundNs > 0 && 2*pp.pace.shareTime(pp.share()) < time.Duration(pp.roundNs)
}

// waitForFullShare reports whether a receive that could leave with have
// (at least half a share) should wait for the rest, arming the wake-up
// that bounds the wait.
func (pp *partPoller) waitForFullShare(have int) bool {
	if have >= pp.share() || !pp.handlersFast() {
		return false
	}
	now := time.Now()
	if pp.fullSince.IsZero() {
		pp.fullSince = now
		wait := min(time.Duration(pp.roundNs), fullShareWaitMax)
		if pp.fullTimer == nil {
			pp.fullTimer = time.NewTimer(wait)
		} else {
			pp.fullTimer.Reset(wait)
		}
		return true
	}
	return now.Sub(pp.fullSince) < min(time.Duration(pp.roundNs), fullShareWaitMax)
}

// fullWake is the channel of the bounded wait for a full share, nil when
// no such wait is on.
func (pp *partPoller) fullWake() <-chan time.Time {
	if pp.fullSince.IsZero() || pp.fullTimer == nil {
		return nil
	}
	return pp.fullTimer.C
}
