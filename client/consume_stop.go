package client

import (
	"context"
	"sync"
	"time"
)

// DefaultGracePeriod is how long a soft stop of Consume (ConsumeOptions.Stop)
// lets running handlers finish when ConsumeOptions.GracePeriod is 0.
const DefaultGracePeriod = 30 * time.Second

// SettleAction names how Consume settled a delivery.
type SettleAction string

// The settle actions reported in SettleOutcome.
const (
	// SettleAck: the handler returned nil.
	SettleAck SettleAction = "ack"
	// SettleNack: the handler failed and the message goes back with backoff.
	SettleNack SettleAction = "nack"
	// SettleReject: the handler returned Reject(err); the message is
	// dead-lettered.
	SettleReject SettleAction = "reject"
	// SettleRelease: a soft stop's grace period cut the handler short;
	// the lease was given back without counting the attempt.
	SettleRelease SettleAction = "release"
	// SettleExpired: the lease ran out while the delivery waited for a
	// handler, so no handler ran on it (the queue delivers it again; Err
	// matches ErrLeaseLost). Seen often, Prefetch is too high for how long
	// the handlers take, or the visibility too short.
	SettleExpired SettleAction = "expired"
)

// SettleOutcome reports how Consume settled one delivery its handler ran
// on: the action taken, the handler's error (nil for an ack) and the
// settle's own error (nil when the broker confirmed it). A failed settle
// means the broker still holds the lease: the message comes back after
// its deadline, and the work may be repeated.
type SettleOutcome struct {
	Delivery   *Delivery
	Action     SettleAction
	HandlerErr error
	Err        error
}

// stopper carries a soft stop through Consume: recv ends when receiving
// must stop (soft or hard), work is the context of handlers, which ends
// at a hard stop or when the grace period after a soft stop runs out.
type stopper struct {
	recv, work   context.Context
	cancelRecv   context.CancelFunc
	cancelWork   context.CancelCauseFunc
	graceExpired chan struct{} // closed when the grace period ran out
	done         chan struct{} // closed by finish
	wg           sync.WaitGroup
}

// newStopper derives the receive and handler contexts of a Consume from
// ctx and watches opts.Stop.
func newStopper(ctx context.Context, opts ConsumeOptions) *stopper {
	s := &stopper{graceExpired: make(chan struct{}), done: make(chan struct{})}
	s.recv, s.cancelRecv = context.WithCancel(ctx)
	s.work, s.cancelWork = context.WithCancelCause(ctx)
	if opts.Stop == nil {
		return s
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-opts.Stop:
		case <-s.done:
			return
		}
		s.cancelRecv()
		t := time.NewTimer(opts.GracePeriod)
		defer t.Stop()
		select {
		case <-t.C:
			close(s.graceExpired)
			s.cancelWork(ErrStopping)
		case <-s.done:
		}
	}()
	return s
}

// stopReceiving ends receiving as a fatal error does.
func (s *stopper) stopReceiving() { s.cancelRecv() }

// cutShort reports whether a handler's failure came from a soft stop's
// grace period running out (its lease is then released, not nacked).
func (s *stopper) cutShort() bool {
	select {
	case <-s.graceExpired:
		return true
	default:
		return false
	}
}

// finish ends the watcher and the contexts once Consume's goroutines are
// done.
func (s *stopper) finish() {
	close(s.done)
	s.wg.Wait()
	s.cancelRecv()
	s.cancelWork(nil)
}

// releaseUnstarted gives back, in batches, the deliveries waiting in work
// once receiving has stopped, so that leases no handler started on return
// to the queue at once (without counting an attempt) instead of waiting
// for a busy handler. It returns when work is closed.
func (q *Queue) releaseUnstarted(s *stopper, work <-chan *Delivery, slots <-chan struct{}) {
	<-s.recv.Done()
	for d := range work {
		batch := []*Delivery{d}
	more:
		for len(batch) < MaxReceive {
			select {
			case d2, ok := <-work:
				if !ok {
					break more
				}
				batch = append(batch, d2)
			default:
				break more
			}
		}
		q.giveBack(batch)
		for range batch {
			<-slots
		}
	}
}

// report hands out to the OnSettle callback, if any.
func (o ConsumeOptions) report(out SettleOutcome) {
	if o.OnSettle != nil {
		o.OnSettle(out)
	}
}
