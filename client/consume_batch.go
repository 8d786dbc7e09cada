package client

import (
	"context"
	"sync"
)

// Consume acks the deliveries its handlers succeeded on in batches: while
// one ack request is on its way, the acks that come in meanwhile gather
// and leave together in the next one, so a busy consumer pays one request
// for many messages and an idle one still acks at once.
const (
	// ackBatchMax bounds the deliveries of one batched ack.
	ackBatchMax = 256
	// acksInFlightMax bounds the batched acks on their way at once. One:
	// whatever finishes meanwhile joins the next batch. With four,
	// TestCluster_GroupOrder saw 2-9 leases per run expire before a
	// handler got them (0 with one), on a loaded machine.
	acksInFlightMax = 1
)

// acker batches the acks of one Consume call. A delivery handed to it keeps
// its prefetch slot until its ack is answered: the slot is given back by
// the release function after the ack.
type acker struct {
	q       *Queue
	ctx     context.Context // Consume's; acks run past its end, bounded by settleTimeout
	release func()          // gives back one prefetch slot
	report  func(SettleOutcome)
	in      chan *Delivery
	sem     chan struct{} // acks in flight
	wg      sync.WaitGroup
	ran     chan struct{}
}

// newAcker starts an acker taking up to capacity deliveries at once (the
// prefetch: one per slot, so add never blocks for long).
func newAcker(ctx context.Context, q *Queue, capacity int, release func(), report func(SettleOutcome)) *acker {
	a := &acker{
		q: q, ctx: ctx, release: release, report: report,
		in:  make(chan *Delivery, capacity),
		sem: make(chan struct{}, acksInFlightMax),
		ran: make(chan struct{}),
	}
	go a.run()
	return a
}

// add queues d for acking.
func (a *acker) add(d *Delivery) { a.in <- d }

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

// ack acks one batch, logs the failures, reports every outcome, and gives
// back the slots.
func (a *acker) ack(batch []*Delivery) {
	defer a.wg.Done()
	defer func() { <-a.sem }()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), settleTimeout)
	defer cancel()
	for i, err := range a.q.AckBatch(ctx, batch) {
		if err != nil {
			a.q.c.log.Warn("ferry: consume: settle failed", "queue", a.q.name, "id", batch[i].ID, "action", string(SettleAck), "err", err)
		}
		a.report(SettleOutcome{Delivery: batch[i], Action: SettleAck, Err: err})
	}
	for range batch {
		a.release()
	}
}

// close acks what is queued and waits for every ack to be answered.
func (a *acker) close() {
	close(a.in)
	<-a.ran
	a.wg.Wait()
}

// acquireRefill takes the prefetch slots of a partition's next receive:
// it waits for least slots (freed by handled and acked deliveries), then
// takes up to most that are free at once. Waiting for a refill of half a
// share, rather than for one slot, keeps receives large when acks come
// back in a trickle: each receive is a raft round, whatever its size. It
// returns how many it took, 0 when ctx is done (the slots taken then are
// given back).
func acquireRefill(ctx context.Context, slots chan struct{}, least, most int) int {
	k := 0
	for k < least {
		select {
		case slots <- struct{}{}:
			k++
		case <-ctx.Done():
			for range k {
				<-slots
			}
			return 0
		}
	}
	for k < most {
		select {
		case slots <- struct{}{}:
			k++
		default:
			return k
		}
	}
	return k
}
