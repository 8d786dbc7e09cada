package client

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Consume acks the deliveries its handlers succeeded on in two ways. An
// ack first waits, for up to ackRideLinger, to ride on the next receive of
// its partition: the server acks and leases in one raft entry, and the
// acked deliveries' prefetch slots pass to the new leases. An ack that
// finds no ride in time (its partition's poller is in a long poll, or
// receiving stopped) goes in a batched ack: while one ack request is on
// its way, the acks that come in meanwhile gather and leave together in
// the next one, so a busy consumer pays one request for many messages and
// an idle one still acks soon.
const (
	// ackBatchMax bounds the deliveries of one batched ack.
	ackBatchMax = 256
	// acksInFlightMax bounds the batched acks on their way at once. One:
	// whatever finishes meanwhile joins the next batch. With four,
	// TestCluster_GroupOrder saw 2-9 leases per run expire before a
	// handler got them (0 with one), on a loaded machine.
	acksInFlightMax = 1
	// ackRideLinger is how long an ack waits for a receive to ride on
	// before it goes in a batched ack. Longer than a receive round under
	// load, so that a busy partition's acks ride; short next to a lease.
	ackRideLinger = 20 * time.Millisecond
)

// acker settles the acks of one Consume call. A delivery handed to it keeps
// its prefetch slot until its ack is answered: a batched ack gives it back
// with the release function; a ride passes it to the receive's leases.
type acker struct {
	q       *Queue
	ctx     context.Context // Consume's; acks run past its end, bounded by settleTimeout
	release func()          // gives back one prefetch slot
	report  func(SettleOutcome)
	in      chan *Delivery
	sem     chan struct{} // acks in flight
	wg      sync.WaitGroup
	ran     chan struct{}

	mu      sync.Mutex
	rides   map[int]*rideQueue // by partition; nil once riding ended
	quit    chan struct{}      // ends the linger flusher
	flushed chan struct{}      // closed when the flusher has ended
}

// rideQueue holds the acks of one partition waiting for a receive.
type rideQueue struct {
	ds   []*Delivery
	at   []time.Time   // when each was added
	wake chan struct{} // poked when ds grows
}

// newAcker starts an acker taking up to capacity deliveries at once (the
// prefetch: one per slot, so add never blocks for long). Acks ride on
// receives until recv ends.
func newAcker(ctx, recv context.Context, q *Queue, capacity int, release func(), report func(SettleOutcome)) *acker {
	a := &acker{
		q: q, ctx: ctx, release: release, report: report,
		in:      make(chan *Delivery, capacity),
		sem:     make(chan struct{}, acksInFlightMax),
		ran:     make(chan struct{}),
		rides:   make(map[int]*rideQueue),
		quit:    make(chan struct{}),
		flushed: make(chan struct{}),
	}
	go a.run()
	go a.flushLoop(recv)
	return a
}

// add queues d for acking: on a ride while receiving goes on, else in a
// batched ack.
func (a *acker) add(d *Delivery) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rides == nil {
		a.in <- d
		return
	}
	rq := a.rideQueueLocked(d.Partition)
	rq.ds = append(rq.ds, d)
	rq.at = append(rq.at, time.Now())
	select {
	case rq.wake <- struct{}{}:
	default:
	}
}

func (a *acker) rideQueueLocked(p int) *rideQueue {
	rq := a.rides[p]
	if rq == nil {
		rq = &rideQueue{wake: make(chan struct{}, 1)}
		a.rides[p] = rq
	}
	return rq
}

// riding returns how many acks of partition p wait for a ride, and the
// channel poked when more come.
func (a *acker) riding(p int) (func() int, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rides == nil {
		return func() int { return 0 }, nil
	}
	rq := a.rideQueueLocked(p)
	return func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(rq.ds)
	}, rq.wake
}

// takeRides removes up to n acks of partition p, oldest first, for a
// receive to carry. The caller settles them with settledRides.
func (a *acker) takeRides(p, n int) []*Delivery {
	a.mu.Lock()
	defer a.mu.Unlock()
	rq := a.rides[p]
	if rq == nil || n <= 0 {
		return nil
	}
	n = min(n, len(rq.ds))
	if n == 0 {
		return nil
	}
	out := slices.Clone(rq.ds[:n])
	rq.ds, rq.at = rq.ds[n:], rq.at[n:]
	a.wg.Add(1)
	return out
}

// settledRides reports the outcomes of acks that rode on a receive. Their
// slots went to the receive.
func (a *acker) settledRides(ds []*Delivery, errs []error) {
	defer a.wg.Done()
	a.reportAcks(ds, errs)
}

// flushLoop sends acks that waited ackRideLinger for a ride in batched
// acks, and all of them once recv ends; then acks no longer ride.
func (a *acker) flushLoop(recv context.Context) {
	defer close(a.flushed)
	t := time.NewTicker(ackRideLinger / 2)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			a.flushRides(time.Now().Add(-ackRideLinger), false)
		case <-recv.Done():
			a.flushRides(time.Time{}, true)
			return
		case <-a.quit:
			a.flushRides(time.Time{}, true)
			return
		}
	}
}

// flushRides moves the acks added before cutoff (all, when end is set) to
// the batched path; end also stops riding.
func (a *acker) flushRides(cutoff time.Time, end bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rq := range a.rides {
		n := 0
		for n < len(rq.ds) && (end || rq.at[n].Before(cutoff)) {
			a.in <- rq.ds[n] // never blocks for long: in holds one per slot
			n++
		}
		rq.ds, rq.at = rq.ds[n:], rq.at[n:]
	}
	if end {
		a.rides = nil
	}
}

// run gathers what is queued into batches and acks them.
func (a *acker) run() {
	defer close(a.ran)
	for d := range a.in {
		batch := []*Delivery{d}
	gather:
		for len(batch) < ackBatchMax {
			select {
			case d, ok := <-a.in:
				if !ok {
					break gather
				}
				batch = append(batch, d)
			default:
				break gather
			}
		}
		a.sem <- struct{}{}
		a.wg.Add(1)
		go a.ack(batch)
	}
}

// ack acks one batch, reports every outcome, and gives back the slots.
func (a *acker) ack(batch []*Delivery) {
	defer a.wg.Done()
	defer func() { <-a.sem }()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), settleTimeout)
	defer cancel()
	a.reportAcks(batch, a.q.AckBatch(ctx, batch))
	for range batch {
		a.release()
	}
}

// reportAcks logs the failed acks and reports every outcome.
func (a *acker) reportAcks(ds []*Delivery, errs []error) {
	for i, err := range errs {
		if err != nil {
			a.q.c.log.Warn("ferry: consume: settle failed", "queue", a.q.name, "id", ds[i].ID, "action", string(SettleAck), "err", err)
		}
		a.report(SettleOutcome{Delivery: ds[i], Action: SettleAck, Err: err})
	}
}

// close acks what is queued or waiting for a ride and waits for every ack
// to be answered. The pollers have ended.
func (a *acker) close() {
	close(a.quit)
	<-a.flushed
	close(a.in)
	<-a.ran
	a.wg.Wait()
}
