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
	// DefaultPrefetchPerHandler sets the most leases Consume holds with
	// Prefetch 0 when there are so many handlers that it exceeds
	// DefaultPrefetchMax (see consume_limit.go).
	DefaultPrefetchPerHandler = 4
)

// ConsumeOptions tune Consume. The zero value runs one handler at a time,
// holds one lease, and uses the queue's visibility timeout.
type ConsumeOptions struct {
	// Concurrency is how many handlers run at once; 0 means 1.
	Concurrency int
	// Prefetch bounds the leases held at once: being handled, received
	// and waiting for a handler, or being asked for. 0 lets Consume choose
	// from what it measures: up to DefaultPrefetchMax (or
	// DefaultPrefetchPerHandler times Concurrency, if more) while handlers
	// are fast, fewer when they are slow, so that a delivery waits for a
	// handler for at most about a quarter of its lease, and never fewer
	// than Concurrency. An explicit Prefetch is held as given: below
	// Concurrency it leaves handlers idle; below the queue's partition
	// count it lets only that many partitions be polled at a time (the
	// others wait up to Wait for their turn); and a delivery may wait for
	// a handler while about Prefetch/Concurrency others are handled before
	// it, with its lease running.
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
	auto := opts.Prefetch == 0
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
	acks := newAcker(s.work, s.recv, q, opts.Prefetch, func() { <-slots }, opts.report)
	pace := &consumePace{concurrency: opts.Concurrency}
	var workers, pollers sync.WaitGroup
	if auto {
		limit := newPrefetchLimit(slots, pace)
		pollers.Add(1)
		go func() { defer pollers.Done(); limit.run(s.recv.Done()) }()
	}
	for range opts.Concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for d := range work {
				if !q.handle(s, d, handler, opts, acks, pace) {
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
			if err := q.pollLoop(s.recv, p, n, slots, work, opts, acks, pace); err != nil {
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
		o.Prefetch = defaultPrefetch(o.Concurrency)
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
// handler; one whose lease ran out while it waited is reported expired and
// not handled (the queue may have given it to another consumer already).
func (q *Queue) handle(s *stopper, d *Delivery, handler func(context.Context, *Delivery) error, opts ConsumeOptions,
	acks *acker, pace *consumePace) (acking bool) {
	if s.recv.Err() != nil {
		q.giveBack([]*Delivery{d})
		return false
	}
	if !time.Now().Before(d.LeaseDeadline()) {
		q.c.log.Warn("ferry: consume: lease ran out before a handler was free; not handled (lower Prefetch or raise the visibility)",
			"queue", q.name, "id", d.ID)
		opts.report(SettleOutcome{Delivery: d, Action: SettleExpired,
			Err: &wire.Error{Code: wire.CodeLeaseLost, Message: "the lease ran out before a handler was free"}})
		return false
	}
	hctx, cancel := context.WithCancelCause(s.work)
	stop := func() {}
	if opts.AutoExtend {
		stop = q.autoExtend(hctx, cancel, d, q.visibility(d, opts))
	}
	start := time.Now()
	err := q.runHandler(hctx, handler, d)
	pace.handled(time.Since(start))
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
