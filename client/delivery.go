package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// Delivery is one leased message, returned by Receive or passed to a
// Consume handler. The lease gives its holder the message until Deadline;
// settle it with exactly one of Ack, Nack or Reject (Extend moves the
// deadline). The fields are read-only: the methods do not change them.
type Delivery struct {
	// ID is the message's id.
	ID string
	// Group is the message's group, if any.
	Group string
	// Headers are the message's headers.
	Headers map[string]string
	// Body is the payload.
	Body []byte
	// Partition and Seq identify the message in its queue.
	Partition int
	Seq       uint64
	// Attempt counts the deliveries of the message, 1 for the first.
	Attempt uint32
	// EnqueuedAt is when the message was accepted.
	EnqueuedAt time.Time
	// Priority is the message's priority, 0..MaxPriority.
	Priority Priority
	// Deadline is when the lease ends (by the leader's clock when
	// granted). A successful Extend or ExtendBatch moves it to the time the
	// request was sent plus the new visibility (an estimate that errs
	// early). Consume's AutoExtend runs beside the handler and so does not
	// write this field: LeaseDeadline follows every extension and is safe
	// to call from any goroutine.
	Deadline time.Time

	q        *Queue
	leaseEnd atomic.Int64 // unix nanoseconds of the latest known deadline
}

// LeaseDeadline returns when the lease ends as far as this client knows:
// Deadline, moved by every successful extension, including AutoExtend's.
// It is safe to call concurrently with extensions.
func (d *Delivery) LeaseDeadline() time.Time {
	if ns := d.leaseEnd.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return d.Deadline
}

// deliveries converts leased messages of the wire into Deliveries.
func (q *Queue) deliveries(ms []wire.Delivery) []*Delivery {
	out := make([]*Delivery, len(ms))
	for i, m := range ms {
		out[i] = &Delivery{
			ID: m.ID, Group: m.Group, Headers: m.Headers, Body: m.Body,
			Partition: m.Partition, Seq: m.Seq, Attempt: m.Attempt,
			EnqueuedAt: time.Unix(0, m.EnqueuedAt), Deadline: time.Unix(0, m.Deadline),
			Priority: m.Priority, q: q,
		}
		out[i].leaseEnd.Store(m.Deadline)
	}
	return out
}

func (d *Delivery) receipt() wire.Receipt {
	return wire.Receipt{Partition: d.Partition, Seq: d.Seq, Attempt: d.Attempt}
}

// NackOptions say when a nacked message is delivered again. The zero value
// uses the queue's backoff: d = min(BackoffMax, BackoffBase·2^(attempts-1)),
// plus a jitter of up to d/4 that never goes past BackoffMax, so the retry
// never comes sooner than d.
type NackOptions struct {
	// Reason is kept in the message's failure history.
	Reason string
	// Delay, when positive, makes the message visible again after exactly
	// this delay instead of the backoff.
	Delay time.Duration
	// Immediate makes the message visible again at once, skipping the
	// backoff; Delay must then be 0.
	Immediate bool
}

// Ack deletes the message: it has been handled. An ack whose first attempt
// had an unknown outcome and whose retry finds the message gone
// (ErrMessageNotFound) counts as a success, since the first attempt is
// what deleted it. ErrLeaseLost means the message was delivered to
// someone else since (the lease ran out).
//
//	if err := d.Ack(ctx); err != nil {
//		log.Printf("ack %s: %v", d.ID, err)
//	}
func (d *Delivery) Ack(ctx context.Context) error {
	return d.one(func(q *Queue) []error { return q.AckBatch(ctx, []*Delivery{d}) })
}

// Extend moves the lease's deadline to now plus visibility (the
// ChangeMessageVisibility of other queues), for a handler that needs more
// time.
//
//	_ = d.Extend(ctx, time.Minute)
func (d *Delivery) Extend(ctx context.Context, visibility time.Duration) error {
	return d.one(func(q *Queue) []error { return q.ExtendBatch(ctx, []*Delivery{d}, visibility) })
}

// Nack gives the message back for a retry, after the queue's backoff or
// the delay of opts. A retried group head keeps its group blocked, so
// retries never reorder a group. When the message has used its
// max_receives it is dead-lettered instead. A nack whose first attempt had
// an unknown outcome and whose retry finds the lease gone counts as a
// success.
//
//	d.Nack(ctx, client.NackOptions{Reason: "database down"})         // backoff
//	d.Nack(ctx, client.NackOptions{Delay: 30 * time.Second})         // fixed delay
//	d.Nack(ctx, client.NackOptions{Immediate: true, Reason: "shed"}) // at once
func (d *Delivery) Nack(ctx context.Context, opts NackOptions) error {
	return d.one(func(q *Queue) []error { return q.NackBatch(ctx, []*Delivery{d}, opts) })
}

// Reject dead-letters the message at once, keeping reason in its history:
// for messages that can never succeed. If the outcome stays unknown the
// error wraps ErrUnconfirmed.
//
//	_ = d.Reject(ctx, "unknown order type")
func (d *Delivery) Reject(ctx context.Context, reason string) error {
	return d.one(func(q *Queue) []error { return q.RejectBatch(ctx, []*Delivery{d}, reason) })
}

func (d *Delivery) one(f func(q *Queue) []error) error {
	if d == nil || d.q == nil {
		return invalidArg("delivery was not received from a queue")
	}
	return f(d.q)[0]
}

// AckBatch acks several deliveries of this queue, grouped by partition,
// and returns one error per delivery (nil for success); see Delivery.Ack.
//
//	for i, err := range q.AckBatch(ctx, ds) {
//		if err != nil {
//			log.Printf("ack %s: %v", ds[i].ID, err)
//		}
//	}
func (q *Queue) AckBatch(ctx context.Context, ds []*Delivery) []error {
	return q.settle(ctx, settleReq{op: wire.OpAck}, ds)
}

// ExtendBatch extends several leases of this queue to now plus
// visibility; one error per delivery. See Delivery.Extend.
// Each extended delivery's Deadline moves (see Delivery.Deadline).
func (q *Queue) ExtendBatch(ctx context.Context, ds []*Delivery, visibility time.Duration) []error {
	errs := q.extendBatch(ctx, ds, visibility)
	for i, err := range errs {
		if err == nil {
			ds[i].Deadline = ds[i].LeaseDeadline()
		}
	}
	return errs
}

// extendBatch is ExtendBatch without writing the Deadline fields: it moves
// only what LeaseDeadline reports, so it may run beside a handler.
func (q *Queue) extendBatch(ctx context.Context, ds []*Delivery, visibility time.Duration) []error {
	if visibility <= 0 {
		return fill(len(ds), invalidArg("extend visibility %v must be positive", visibility))
	}
	sent := time.Now()
	errs := q.settle(ctx, settleReq{op: wire.OpExtend, vis: visibility}, ds)
	for i, err := range errs {
		if err == nil {
			ds[i].leaseEnd.Store(sent.Add(visibility).UnixNano())
		}
	}
	return errs
}

// NackBatch nacks several deliveries of this queue with the same options;
// one error per delivery. See Delivery.Nack.
func (q *Queue) NackBatch(ctx context.Context, ds []*Delivery, opts NackOptions) []error {
	if opts.Delay < 0 || (opts.Immediate && opts.Delay != 0) {
		return fill(len(ds), invalidArg("nack delay %v (immediate %v)", opts.Delay, opts.Immediate))
	}
	return q.settle(ctx, settleReq{op: wire.OpNack, nack: opts}, ds)
}

// RejectBatch dead-letters several deliveries of this queue with the same
// reason; one error per delivery. See Delivery.Reject.
func (q *Queue) RejectBatch(ctx context.Context, ds []*Delivery, reason string) []error {
	return q.settle(ctx, settleReq{op: wire.OpReject, reason: reason}, ds)
}

func fill(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// settleReq is one kind of lease operation with its parameters.
type settleReq struct {
	op     wire.Op
	vis    time.Duration // extend
	nack   NackOptions
	reason string // reject
}

// settle runs a lease operation over ds: per partition, in requests of up
// to 1000 receipts, partitions concurrently.
func (q *Queue) settle(ctx context.Context, s settleReq, ds []*Delivery) []error {
	errs := make([]error, len(ds))
	byPart := make(map[int][]int)
	for i, d := range ds {
		if d == nil || d.q != q {
			errs[i] = invalidArg("delivery %d was not received from queue %q", i, q.name)
			continue
		}
		byPart[d.Partition] = append(byPart[d.Partition], i)
	}
	if q.c.isClosed() {
		return fill(len(ds), ErrClosed)
	}
	var wg sync.WaitGroup
	for p, idx := range byPart {
		for _, ch := range chunk(idx, nil) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runBatch(ctx, q.c, batchSpec[wire.ItemResult]{
					rt:     partRoute{q.c, q.name, p},
					op:     s.op,
					build:  func(idx []int) any { return s.body(q.name, p, ds, idx) },
					decode: func(resp wire.Response) ([]wire.ItemResult, error) { return decodeItems(s.op, resp) },
					code:   func(r wire.ItemResult) wire.Code { return r.Code },
					done: func(i int, r wire.ItemResult, err error, amb bool) {
						errs[i] = s.outcome(r, err, amb)
					},
				}, ch)
			}()
		}
	}
	wg.Wait()
	return errs
}

// body builds the request for the deliveries at idx, all of partition p.
func (s settleReq) body(queue string, p int, ds []*Delivery, idx []int) any {
	switch s.op {
	case wire.OpAck:
		req := wire.AckRequest{Queue: queue, Partition: p, Receipts: make([]wire.Receipt, len(idx))}
		for k, i := range idx {
			req.Receipts[k] = ds[i].receipt()
		}
		return req
	case wire.OpExtend:
		req := wire.ExtendRequest{Queue: queue, Partition: p, Items: make([]wire.ExtendItem, len(idx))}
		for k, i := range idx {
			req.Items[k] = wire.ExtendItem{Receipt: ds[i].receipt(), Visibility: s.vis}
		}
		return req
	case wire.OpNack:
		req := wire.NackRequest{Queue: queue, Partition: p, Items: make([]wire.NackItem, len(idx))}
		explicit := s.nack.Immediate || s.nack.Delay > 0
		for k, i := range idx {
			req.Items[k] = wire.NackItem{Receipt: ds[i].receipt(), ExplicitDelay: explicit,
				Delay: s.nack.Delay, Reason: s.nack.Reason}
		}
		return req
	default:
		req := wire.RejectRequest{Queue: queue, Partition: p, Items: make([]wire.RejectItem, len(idx))}
		for k, i := range idx {
			req.Items[k] = wire.RejectItem{Receipt: ds[i].receipt(), Reason: s.reason}
		}
		return req
	}
}

// outcome turns an item's final result into the error reported for it.
// After an attempt whose outcome is unknown, a result saying the lease or
// message is gone may be that attempt's own doing: for an ack
// (ErrMessageNotFound) and a nack (ErrMessageNotFound, ErrLeaseLost) it is
// a success; for a reject the error wraps ErrUnconfirmed.
func (s settleReq) outcome(r wire.ItemResult, err error, amb bool) error {
	if err != nil {
		if amb {
			return unconfirmed(err)
		}
		return err
	}
	if r.Code == wire.CodeOK || !amb {
		return r.Err()
	}
	gone := r.Code == wire.CodeMessageNotFound
	switch {
	case s.op == wire.OpAck && gone:
		return nil
	case s.op == wire.OpNack && (gone || r.Code == wire.CodeLeaseLost):
		return nil
	case s.op == wire.OpReject && (gone || r.Code == wire.CodeLeaseLost):
		return unconfirmed(r.Err())
	}
	return r.Err()
}

// decodeItems returns the per-item results of a lease operation's answer.
func decodeItems(op wire.Op, resp wire.Response) ([]wire.ItemResult, error) {
	var err error
	switch op {
	case wire.OpAck:
		var r wire.AckResponse
		err = resp.Decode(&r)
		return r.Results, err
	case wire.OpExtend:
		var r wire.ExtendResponse
		err = resp.Decode(&r)
		return r.Results, err
	case wire.OpNack:
		var r wire.NackResponse
		err = resp.Decode(&r)
		return r.Results, err
	default:
		var r wire.RejectResponse
		err = resp.Decode(&r)
		return r.Results, err
	}
}
