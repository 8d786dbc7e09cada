package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// Consume defaults.
const (
	// DefaultConsumeWait is the long-poll of Consume's receives.
	DefaultConsumeWait = 5 * time.Second
	// settleTimeout bounds the ack, nack or reject that follows a handler,
	// which runs even after Consume's context is done.
	settleTimeout = 10 * time.Second
	// maxReasonBytes bounds the reason sent for a handler's error.
	maxReasonBytes = 1024
)

// ConsumeOptions tune Consume. The zero value runs one handler at a time,
// holds one lease, and uses the queue's visibility timeout.
type ConsumeOptions struct {
	// Concurrency is how many handlers run at once; 0 means 1.
	Concurrency int
	// Prefetch bounds the leases held at once: being handled, received
	// and waiting for a handler, or being asked for. 0 means Concurrency.
	// A Prefetch below Concurrency leaves handlers idle; one below the
	// queue's partition count lets only that many partitions be polled at
	// a time (the others wait up to Wait for their turn).
	Prefetch int
	// Visibility is the lease length; 0 means the queue's
	// visibility_timeout.
	Visibility time.Duration
	// Wait is the long-poll of each receive; 0 means DefaultConsumeWait.
	Wait time.Duration
	// AutoExtend extends each lease by the visibility at half the
	// visibility while its handler runs, so handlers may outlive one
	// lease. If an extension finds the lease lost, the handler's context
	// is cancelled (with ErrLeaseLost as its cause).
	AutoExtend bool
	// Consumer names this consumer, as in ReceiveOptions.
	Consumer string
	// Stop, when closed, starts a soft stop (see Consume): receiving
	// stops, unstarted deliveries are released, and running handlers get
	// GracePeriod to finish. Nil means only ctx stops Consume.
	Stop <-chan struct{}
	// GracePeriod bounds how long a soft stop waits for running handlers
	// before cancelling their context (cause ErrStopping); 0 means
	// DefaultGracePeriod.
	GracePeriod time.Duration
	// OnSettle, when set, is called after each delivery a handler ran on
	// is settled, with the action taken and the settle's error, so that a
	// failed ack or nack reaches the service and not only a log line. It
	// is called from the handler's goroutine and must not block for long.
	OnSettle func(SettleOutcome)
}

// Consume receives messages from the queue and passes each to handler
// until ctx is done. After handler returns:
//
//   - nil: the delivery is acked;
//   - an error made with Reject(err): it is rejected (dead-lettered) with
//     err's text as the reason;
//   - any other error (or a panic): it is nacked with the queue's backoff
//     and the error's text as the reason.
//
// Each partition is long-polled by its own poller, and at most Prefetch
// leases are held at once, counting those being asked for: a lease that
// arrives after Consume stopped is given back at once with a release
// (which does not count as a delivery attempt), never kept. Deliveries waiting in the Queue's Receive buffer are handled
// first. The ack of a handled delivery rides on its partition's next
// receive, which the server applies with the new leases in one raft entry;
// an ack that finds no receive to ride on within a short time goes in a
// batched ack request. Either way OnSettle reports its outcome.
//
// Consume stops in one of two ways and returns nil once its goroutines
// have ended:
//
//   - soft stop, when opts.Stop is closed (a deploy): it stops receiving,
//     releases the deliveries no handler started on (a release does not
//     count a delivery attempt), and lets running handlers finish and be
//     settled as usual for up to opts.GracePeriod. A handler still running
//     then sees its context cancelled with cause ErrStopping; if it then
//     fails, its lease is released rather than nacked, so the stop spends
//     no attempt and adds no backoff.
//   - hard stop, when ctx is done: it stops receiving, cancels running
//     handlers' context, settles them by their result (a failure is
//     nacked with backoff) and gives back unstarted deliveries.
//
// A hard stop during a soft stop's grace period cuts it short. Transient failures are retried with backoff (and logged);
// Consume returns an error only for a fatal one: the queue does not exist,
// the options are invalid, or the client was closed.
//
//	err := c.Queue("emails").Consume(ctx, func(ctx context.Context, d *client.Delivery) error {
//		return send(ctx, d.Body)
//	}, client.ConsumeOptions{Concurrency: 8, AutoExtend: true})
func (q *Queue) Consume(ctx context.Context, handler func(context.Context, *Delivery) error, opts ConsumeOptions) error {
	if handler == nil {
		return invalidArg("nil handler")
	}
	if err := opts.normalize(q.c); err != nil {
		return err
	}
	n, err := q.c.partitions(ctx, q.name)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	s := newStopper(ctx, opts)
	defer s.finish()
	slots := make(chan struct{}, opts.Prefetch) // one token per lease held or asked for
	work := make(chan *Delivery, opts.Prefetch)
	var workers, pollers sync.WaitGroup
	acks := newAcker(s.work, s.recv, q, opts.Prefetch, func() { <-slots }, opts.report)
	for range opts.Concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for d := range work {
				if !q.handle(s, d, handler, opts, acks) {
					<-slots
				}
			}
		}()
	}
	workers.Add(1)
	go func() { defer workers.Done(); q.releaseUnstarted(s, work, slots) }()
	var fatal error
	var once sync.Once
	for p := range n {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			if err := q.pollLoop(s.recv, p, n, slots, work, opts, acks); err != nil {
				once.Do(func() { fatal = err; s.stopReceiving() })
			}
		}()
	}
	pollers.Wait()
	close(work)
	workers.Wait()
	acks.close()
	return fatal
}

func (o *ConsumeOptions) normalize(c *Client) error {
	if o.Concurrency < 0 || o.Prefetch < 0 || o.Visibility < 0 || o.Wait < 0 || o.GracePeriod < 0 {
		return invalidArg("negative consume option")
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Prefetch == 0 {
		o.Prefetch = o.Concurrency
	}
	if o.Wait == 0 {
		o.Wait = DefaultConsumeWait
	}
	if o.GracePeriod == 0 {
		o.GracePeriod = DefaultGracePeriod
	}
	o.Wait = min(o.Wait, MaxWait)
	if o.Consumer == "" {
		o.Consumer = c.consumer
	}
	return nil
}

// pollLoop feeds work from partition p while lease slots are free, until
// ctx is done (nil) or a fatal error (returned). Each receive carries the
// acks waiting for a ride on p (see acker); their slots pass to it.
func (q *Queue) pollLoop(ctx context.Context, p, n int, slots chan struct{}, work chan<- *Delivery, opts ConsumeOptions, acks *acker) error {
	share := min(MaxReceive, (cap(slots)+n-1)/n)
	riding, wake := acks.riding(p)
	for attempt := 0; ; {
		k := acquireRefillRiding(ctx, slots, max(1, share/2), share, riding, wake)
		if ctx.Err() != nil {
			for range k {
				<-slots
			}
			return nil
		}
		ds := q.takeBuffered(k)
		var err error
		var cl class
		if len(ds) == 0 {
			rides := acks.takeRides(p, min(maxBatch, MaxReceive-k))
			k += len(rides) // the acked deliveries' slots pass to the receive
			if k == 0 {
				continue // the acks rode elsewhere meanwhile
			}
			ds, cl, err = q.pollOnce(ctx, p, k, rides, opts, acks)
		}
		for range k - len(ds) {
			<-slots
		}
		for _, d := range ds {
			work <- d // never blocks: work holds as many as there are slots
		}
		switch {
		case err == nil:
			attempt = 0
			continue
		case ctx.Err() != nil:
			return nil
		case cl == classDone:
			return err
		}
		q.c.log.Warn("ferry: consume: receive failed", "queue", q.name, "partition", p, "err", err)
		if q.c.sleep(ctx, attempt) != nil {
			return nil
		}
		attempt++
	}
}

// pollOnce long-polls one partition for up to k leases. An answer that
// arrives after ctx is done is given back. A receive carrying rides (acks)
// does not wait: its acks are answered after one raft round, and reported
// through acks whatever ctx says.
func (q *Queue) pollOnce(ctx context.Context, p, k int, rides []*Delivery, opts ConsumeOptions, acks *acker) ([]*Delivery, class, error) {
	g := newGather(q, q.giveBack)
	defer g.close()
	req := q.receiveRequest(p, k, ReceiveOptions{Visibility: opts.Visibility, Consumer: opts.Consumer})
	launched := false
	if len(rides) > 0 {
		launched = g.launchAcks(p, req, rides, acks.settledRides)
		if !launched {
			acks.settledRides(rides, fill(len(rides), ErrClosed))
		}
	} else {
		launched = g.launch(p, req, time.Now().Add(opts.Wait))
	}
	if !launched {
		return nil, classDone, ErrClosed
	}
	r, err := g.next(ctx)
	if err != nil {
		return nil, classDone, err
	}
	if len(r.ds) > k {
		q.giveBack(r.ds[k:])
		r.ds = r.ds[:k:k]
	}
	return r.ds, r.cl, r.err
}

// giveBack releases leases nobody will handle (without counting the
// attempt) and returns when that is done.
func (q *Queue) giveBack(ds []*Delivery) {
	q.releaseWait(ds, releaseTimeout)
}

// handle runs the handler on one delivery and settles it: a success goes
// to acks, which then holds d's prefetch slot and reports the outcome
// (handle reports true); a failure is nacked, rejected or, when a soft
// stop's grace period cut the handler short, released here. A delivery
// taken after receiving stopped is given back without running the
// handler.
func (q *Queue) handle(s *stopper, d *Delivery, handler func(context.Context, *Delivery) error, opts ConsumeOptions,
	acks *acker) (acking bool) {
	if s.recv.Err() != nil {
		q.giveBack([]*Delivery{d})
		return false
	}
	hctx, cancel := context.WithCancelCause(s.work)
	stop := func() {}
	if opts.AutoExtend {
		stop = q.autoExtend(hctx, cancel, d, q.visibility(d, opts))
	}
	err := q.runHandler(hctx, handler, d)
	stop()
	cancel(nil)

	if err == nil {
		acks.add(d)
		return true
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(s.work), settleTimeout)
	defer scancel()
	out := SettleOutcome{Delivery: d, HandlerErr: err}
	var rej *rejectError
	switch {
	case s.cutShort():
		out.Action = SettleRelease
		q.giveBack([]*Delivery{d})
	case errors.As(err, &rej):
		out.Action, out.Err = SettleReject, d.Reject(sctx, truncate(rej.reason(), maxReasonBytes))
	default:
		out.Action, out.Err = SettleNack, d.Nack(sctx, NackOptions{Reason: truncate(err.Error(), maxReasonBytes)})
	}
	if out.Err != nil {
		q.c.log.Warn("ferry: consume: settle failed", "queue", q.name, "id", d.ID, "action", string(out.Action), "err", out.Err)
	}
	opts.report(out)
	return false
}

// runHandler calls the handler, turning a panic into an error.
func (q *Queue) runHandler(ctx context.Context, handler func(context.Context, *Delivery) error, d *Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			q.c.log.Error("ferry: consume: handler panicked", "queue", q.name, "id", d.ID, "panic", r)
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return handler(ctx, d)
}

// visibility returns the lease length to extend by: the option, else the
// queue's configured visibility, else what the lease had left when it was
// received.
func (q *Queue) visibility(d *Delivery, opts ConsumeOptions) time.Duration {
	if opts.Visibility > 0 {
		return opts.Visibility
	}
	if cfg, ok := q.c.queueConfig(q.name); ok && cfg.VisibilityTimeout > 0 {
		return cfg.VisibilityTimeout
	}
	return max(time.Until(d.LeaseDeadline()), time.Second)
}

// autoExtend extends d's lease by vis every vis/2 (the first time at half
// of what is left of the lease) until the returned stop is called. When
// the lease is lost it cancels the handler's context with the cause.
func (q *Queue) autoExtend(ctx context.Context, cancel context.CancelCauseFunc, d *Delivery, vis time.Duration) (stop func()) {
	ctx, stopCtx := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := vis / 2
		if left := time.Until(d.LeaseDeadline()) / 2; left > 0 && left < first {
			first = left
		}
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := q.extendBatch(ctx, []*Delivery{d}, vis)[0]
			if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrMessageNotFound) {
				if !errors.Is(err, ErrLeaseLost) {
					err = &wire.Error{Code: wire.CodeLeaseLost, Message: bare(err)}
				}
				cancel(err)
				return
			}
			if err != nil && ctx.Err() == nil {
				q.c.log.Warn("ferry: consume: extend failed", "queue", q.name, "id", d.ID, "err", err)
			}
			t.Reset(vis / 2)
		}
	}()
	return func() {
		stopCtx()
		<-done
	}
}
