package client

import (
	"context"
	"sync"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// Receive limits.
const (
	// MaxReceive is the most messages one Receive returns.
	MaxReceive = 1000
	// MaxWait is the longest long-poll; a longer ReceiveOptions.Wait is
	// cut to it.
	MaxWait = wire.ReceiveWaitMax
	// receiveGrace is how long past its wait a receive request may take
	// before the client gives up on it.
	receiveGrace = 10 * time.Second
)

// ReceiveOptions tune Receive. The zero value receives one message without
// waiting, with the queue's visibility timeout.
type ReceiveOptions struct {
	// Max is the most messages to return, 1..MaxReceive; 0 means 1.
	Max int
	// Visibility is the lease length; 0 means the queue's
	// visibility_timeout.
	Visibility time.Duration
	// Wait is how long to wait for a message when none is ready (a long
	// poll); 0 returns at once. At most MaxWait.
	Wait time.Duration
	// Consumer names the receiver in lease records and dead-letter
	// history; empty means the client's name with a random suffix, fixed
	// for the Client's lifetime.
	Consumer string
}

func (o *ReceiveOptions) normalize(c *Client) error {
	switch {
	case o.Max < 0 || o.Max > MaxReceive:
		return invalidArg("receive max %d out of 1..%d", o.Max, MaxReceive)
	case o.Visibility < 0:
		return invalidArg("negative visibility %v", o.Visibility)
	case o.Wait < 0:
		return invalidArg("negative wait %v", o.Wait)
	}
	if o.Max == 0 {
		o.Max = 1
	}
	o.Wait = min(o.Wait, MaxWait)
	if o.Consumer == "" {
		o.Consumer = c.consumer
	}
	return nil
}

// Receive leases up to opts.Max messages from the queue's partitions.
//
// Without Wait it asks the partitions one after the other, starting with a
// different one on each call, for as many messages as are still missing,
// and returns what it got (possibly nothing). With Wait, when nothing was
// ready it long-polls every partition at once and returns as soon as one of
// them answers with messages, or with nothing once Wait has passed (or
// shortly before ctx's deadline, when that comes first).
//
// No lease is left to expire unseen. Messages that arrive for a call after
// it returned (from the other partitions of a long poll, whose requests
// keep waiting on the servers, or after ctx was cancelled) go to the
// Queue's buffer: a Receive that is waiting right now takes them at once,
// and otherwise the next Receive on the Queue returns them first, without
// asking the server. Those requests still waiting are not repeated: a
// later long poll leaves their partitions to them and waits for their
// answers, so a loop of Receive calls keeps one request per partition at
// the servers. A buffered lease is handed out only while at least
// half of the time it had left when it arrived remains; after that the
// client releases it, which gives the message back at once without
// counting a delivery attempt (no backoff, no step towards max_receives;
// the next delivery has the same Attempt). So a delivery from the buffer
// always has at least half its remaining lease left (see
// Delivery.Deadline), and a message is never seen at a later attempt
// because of a lease nobody saw.
//
// Transient failures (not leader, unavailable, lost connections) are
// retried until ctx is done; a partition that fails while others answer is
// skipped for that call. Receive never returns more than Max messages.
//
//	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 10, Wait: 5 * time.Second})
//	for _, d := range ds {
//		process(d.Body)
//		_ = d.Ack(ctx)
//	}
func (q *Queue) Receive(ctx context.Context, opts ReceiveOptions) ([]*Delivery, error) {
	if err := opts.normalize(q.c); err != nil {
		return nil, err
	}
	if q.c.isClosed() {
		return nil, ErrClosed
	}
	if ds := q.takeBuffered(opts.Max); len(ds) > 0 {
		return ds, nil
	}
	n, err := q.c.partitions(ctx, q.name)
	if err != nil {
		return nil, err
	}
	until := time.Now().Add(opts.Wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(until) {
		// End the wait a little before ctx does, so that an empty answer
		// comes back as such rather than as the context's error.
		until = dl.Add(-min(time.Second, time.Until(dl)/10))
	}
	g := newGather(q, q.stash)
	g.orphans = true
	defer g.close()
	ds, err := q.sweep(ctx, g, n, opts)
	if len(ds) > 0 || err != nil || opts.Wait == 0 || !time.Now().Before(until) {
		return ds, err
	}
	return q.longPoll(ctx, g, n, opts, until)
}

// sweep asks the partitions in turn, without waiting, for the messages
// still missing. It repeats (after a backoff) only while no partition
// answered at all.
func (q *Queue) sweep(ctx context.Context, g *gather, n int, opts ReceiveOptions) ([]*Delivery, error) {
	var out []*Delivery
	var last error // the last partition failure, for the error when ctx ends
	for attempt := 0; ; attempt++ {
		start := int(q.rr.Add(1) % uint64(n))
		answered := false
		for k := 0; k < n && len(out) < opts.Max; k++ {
			if err := context.Cause(ctx); err != nil {
				return out, unlessGot(out, gaveUp(err, last)) // lease nothing for a caller who left
			}
			p := (start + k) % n
			req := q.receiveRequest(p, opts.Max-len(out), opts)
			if !g.launch(p, req, time.Time{}) {
				return out, ErrClosed
			}
			r, err := g.next(ctx)
			if err != nil {
				return out, unlessGot(out, gaveUp(err, last))
			}
			switch {
			case r.err == nil:
				answered = true
				out = append(out, q.trim(r.ds, opts.Max-len(out))...)
			case r.cl == classDone:
				return out, unlessGot(out, r.err)
			default:
				last = r.err
				q.c.log.Debug("ferry: receive skipped a partition", "queue", q.name, "partition", p, "err", r.err)
			}
		}
		if answered || len(out) > 0 {
			return out, nil
		}
		if serr := q.c.sleep(ctx, attempt); serr != nil {
			return nil, gaveUp(serr, last)
		}
	}
}

// unlessGot returns err unless some messages were received, in which case the
// messages win and the error is dropped (the next call will meet it).
func unlessGot(ds []*Delivery, err error) error {
	if len(ds) > 0 {
		return nil
	}
	return err
}

// longPoll polls every partition at once until until and returns the
// first non-empty answer, or what the buffer receives meanwhile (answers
// to earlier calls); the answers that come later go to the buffer. A
// partition that a poll of an earlier call still waits on (an orphan,
// whose answer goes to the buffer) gets no second poll: the call waits
// for that answer, and polls the partition itself only if the orphan
// ends empty before until. So a consumer that calls Receive in a loop
// keeps at most one long poll per partition, not one per call.
func (q *Queue) longPoll(ctx context.Context, g *gather, n int, opts ReceiveOptions, until time.Time) ([]*Delivery, error) {
	expired := time.NewTimer(time.Until(until))
	defer expired.Stop()
	launched := make([]bool, n)
	left, waiting := n, 0 // partitions not yet polled; polls not yet answered
	var fatal error
	for {
		buffered := q.bufferSignal()
		if ds := q.takeBuffered(opts.Max); len(ds) > 0 {
			return ds, nil
		}
		for p := 0; p < n && left > 0; p++ {
			if launched[p] || q.orphanPolls(p) > 0 {
				continue
			}
			if !g.launch(p, q.receiveRequest(p, opts.Max, opts), until) {
				return nil, ErrClosed
			}
			launched[p], left, waiting = true, left-1, waiting+1
		}
		if left == 0 && waiting == 0 {
			return nil, fatal
		}
		r, ok, err := g.nextOr(ctx, buffered, expired.C)
		if err != nil {
			return nil, err
		}
		if !ok {
			if !time.Now().Before(until) {
				return q.takeBuffered(opts.Max), fatal
			}
			continue // something was buffered or an orphan ended: look again
		}
		waiting--
		if len(r.ds) > 0 {
			return q.trim(r.ds, opts.Max), nil
		}
		if r.err != nil && r.cl == classDone && fatal == nil {
			fatal = r.err
		}
	}
}

// receiveRequest builds the request for one partition.
func (q *Queue) receiveRequest(p, maxN int, opts ReceiveOptions) wire.ReceiveRequest {
	return wire.ReceiveRequest{
		Queue: q.name, Partition: p, Consumer: opts.Consumer,
		Max: maxN, Visibility: opts.Visibility,
	}
}

// trim returns at most maxN of ds and buffers the rest.
func (q *Queue) trim(ds []*Delivery, maxN int) []*Delivery {
	if len(ds) <= maxN {
		return ds
	}
	q.stash(ds[maxN:])
	return ds[:maxN:maxN]
}

// pollResult is the outcome of one partition's receive.
type pollResult struct {
	part  int
	asked int           // the receive's Max
	took  time.Duration // from launch to answer
	long  bool          // a long poll of a Receive call (see gather.orphans)
	ds    []*Delivery
	err   error
	cl    class
}

// gather collects the partition receives of one Receive call. Each runs in
// a background goroutine bound to the client, not to the caller's
// context, so that its answer is never lost: once the call has returned
// (close), answers go to the Queue's buffer instead.
type gather struct {
	q    *Queue
	late func([]*Delivery) // takes the deliveries that come after close
	wake chan struct{}
	// orphans: the long polls still running at close are counted as the
	// Queue's orphan polls (Receive's gathers; a consumer's poller keeps
	// its own count of the polls it runs).
	orphans bool
	mu      sync.Mutex
	closed  bool
	results []pollResult
	live    map[int]int // by partition: long polls launched, not answered
}

// newGather returns a gather whose late deliveries go to late.
func newGather(q *Queue, late func([]*Delivery)) *gather {
	return &gather{q: q, late: late, wake: make(chan struct{}, 1)}
}

// launch starts the receive of one partition. A zero until makes one
// attempt (not-leader redirects followed); otherwise transient failures are
// retried, each attempt waiting for what is left of the time until until.
// It reports false when the client is closed.
func (g *gather) launch(p int, req wire.ReceiveRequest, until time.Time) bool {
	c := g.q.c
	long := g.orphans && !until.IsZero()
	if long {
		g.mu.Lock()
		if g.live == nil {
			g.live = make(map[int]int) // only calls that long-poll need it
		}
		g.live[p]++
		g.mu.Unlock()
	}
	launched := c.goBackground(func() {
		limit := time.Now().Add(receiveGrace)
		if !until.IsZero() {
			limit = until.Add(receiveGrace)
		}
		ctx, cancel := context.WithDeadline(c.ctx, limit)
		defer cancel()
		start := time.Now()
		r := g.q.poll(ctx, req, until)
		r.part, r.asked, r.took, r.long = p, req.Max, time.Since(start), long
		g.deliver(r)
	})
	if !launched && long {
		g.mu.Lock()
		g.live[p]--
		g.mu.Unlock()
	}
	return launched
}

// launchAcks starts the receive of one partition carrying the acks of
// acks, without waiting for messages; settled gets the acks' outcomes
// whatever becomes of the call. It reports false (and settles nothing)
// when the client is closed.
func (g *gather) launchAcks(p int, req wire.ReceiveRequest, acks []*Delivery, settled func([]*Delivery, []error)) bool {
	c := g.q.c
	return c.goBackground(func() {
		ctx, cancel := context.WithTimeout(c.ctx, settleTimeout)
		defer cancel()
		start := time.Now()
		r, errs := g.q.pollAcks(ctx, req, acks, time.Time{})
		settled(acks, errs)
		r.part, r.asked, r.took = p, req.Max, time.Since(start)
		g.deliver(r)
	})
}

// deliver hands a result to the call, or to the buffer once the call has
// returned.
func (g *gather) deliver(r pollResult) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		if len(r.ds) > 0 {
			g.late(r.ds)
		}
		if r.long {
			g.q.orphanEnded(r.part)
		}
		return
	}
	if r.long {
		g.live[r.part]--
	}
	g.results = append(g.results, r)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// next waits for the next result.
func (g *gather) next(ctx context.Context) (pollResult, error) {
	r, _, err := g.nextOr(ctx, nil, nil)
	return r, err
}

// nextOr waits for the next result (ok true), or for stop to be closed
// or expired to fire (ok false).
func (g *gather) nextOr(ctx context.Context, stop <-chan struct{}, expired <-chan time.Time) (r pollResult, ok bool, err error) {
	for {
		g.mu.Lock()
		if len(g.results) > 0 {
			r := g.results[0]
			g.results = g.results[1:]
			g.mu.Unlock()
			return r, true, nil
		}
		g.mu.Unlock()
		select {
		case <-g.wake:
		case <-stop:
			return pollResult{}, false, nil
		case <-expired:
			return pollResult{}, false, nil
		case <-ctx.Done():
			return pollResult{}, false, context.Cause(ctx)
		}
	}
}

// takeAll returns the results that have arrived, without waiting.
func (g *gather) takeAll() []pollResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.results
	g.results = nil
	return out
}

// close ends the call: the deliveries of results not taken, and of all
// later ones, go to late.
func (g *gather) close() {
	g.mu.Lock()
	g.closed = true
	left := g.results
	g.results = nil
	for p, k := range g.live {
		g.q.orphansStarted(p, k)
	}
	clear(g.live)
	g.mu.Unlock()
	for _, r := range left {
		if len(r.ds) > 0 {
			g.late(r.ds)
		}
	}
}

// poll performs one partition's receive (see gather.launch).
func (q *Queue) poll(ctx context.Context, req wire.ReceiveRequest, until time.Time) pollResult {
	rt := partRoute{q.c, q.name, req.Partition}
	for attempt := 0; ; attempt++ {
		if !until.IsZero() {
			req.Wait = min(time.Until(until), MaxWait)
			if req.Wait <= 0 && attempt > 0 {
				return pollResult{cl: classRetry, err: wire.Errorf(wire.CodeUnavailable, "partition %d did not answer in time", req.Partition)}
			}
			req.Wait = max(req.Wait, 0)
		}
		resp, cl, err := q.c.callOnce(ctx, rt, wire.OpReceive, req)
		if cl == classDone && err == nil {
			var rr wire.ReceiveResponse
			if err := resp.Decode(&rr); err != nil {
				return pollResult{cl: classDone, err: err}
			}
			return pollResult{ds: q.deliveries(rr.Messages)}
		}
		// A receive that may have been applied is retried like one that
		// was not: leases it granted expire and are delivered again.
		if cl == classDone || until.IsZero() {
			return pollResult{cl: cl, err: err}
		}
		if serr := q.c.sleep(ctx, attempt); serr != nil {
			return pollResult{cl: classRetry, err: gaveUp(serr, err)}
		}
	}
}
