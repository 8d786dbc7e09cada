package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// Publisher defaults.
const (
	// DefaultPublishInFlightMessages bounds the messages a Publisher holds
	// (queued or being sent) at once.
	DefaultPublishInFlightMessages = 4096
	// DefaultPublishInFlightBytes bounds their weight.
	DefaultPublishInFlightBytes = 32 << 20
	// DefaultPublishBatchMessages is the most messages one batch carries.
	DefaultPublishBatchMessages = 256
	// DefaultPublishBatchBytes is the weight at which a batch leaves.
	DefaultPublishBatchBytes = 1 << 20
	// DefaultPublishLinger is how long a batch that is not full waits for
	// more messages.
	DefaultPublishLinger = time.Millisecond
	// DefaultPublishTimeout bounds the sending (with retries) of a batch.
	DefaultPublishTimeout = 30 * time.Second
)

// PublisherOptions tune a Publisher; zero fields take the defaults above.
type PublisherOptions struct {
	// MaxInFlightMessages and MaxInFlightBytes bound the messages held at
	// once: Publish blocks while a new message would pass either (a
	// single message heavier than MaxInFlightBytes goes alone).
	MaxInFlightMessages int
	MaxInFlightBytes    int
	// BatchMessages and BatchBytes send a batch once it holds this many
	// messages or this much weight.
	BatchMessages int
	BatchBytes    int
	// Linger sends a batch that is not full this long after its first
	// message was published.
	Linger time.Duration
	// Timeout bounds each batch's sending, retries included; a message
	// whose outcome is still unknown then fails with ErrUnconfirmed.
	Timeout time.Duration
}

func (o *PublisherOptions) normalize() error {
	for _, f := range []struct {
		v   *int
		def int
		n   string
	}{
		{&o.MaxInFlightMessages, DefaultPublishInFlightMessages, "MaxInFlightMessages"},
		{&o.MaxInFlightBytes, DefaultPublishInFlightBytes, "MaxInFlightBytes"},
		{&o.BatchMessages, DefaultPublishBatchMessages, "BatchMessages"},
		{&o.BatchBytes, DefaultPublishBatchBytes, "BatchBytes"},
	} {
		if *f.v < 0 {
			return invalidArg("publisher option %s %d is negative", f.n, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.Linger < 0 || o.Timeout < 0 {
		return invalidArg("publisher Linger %v / Timeout %v is negative", o.Linger, o.Timeout)
	}
	if o.Linger == 0 {
		o.Linger = DefaultPublishLinger
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultPublishTimeout
	}
	o.BatchMessages = min(o.BatchMessages, o.MaxInFlightMessages)
	return nil
}

// Publisher sends messages asynchronously: Publish queues a message and
// returns a future at once; queued messages leave in batches (by count,
// weight or linger time) through SendBatch, several batches in flight at
// a time. It is safe for concurrent use.
//
// Each message's id is assigned in Publish (when the caller gives none)
// and kept across every retry, so a message whose future reports
// ErrUnconfirmed can be published again with the same id safely. Messages
// of one group leave in publish order but batches in flight at once may
// be stored in either order; publish a group's messages with Send when
// their order matters.
//
//	p, _ := q.Publisher(client.PublisherOptions{})
//	defer p.Close(ctx)
//	f, err := p.Publish(ctx, client.Message{Body: body})
//	...
//	res, err := f.Wait(ctx) // err may wrap ErrUnconfirmed
type Publisher struct {
	q    *Queue
	opts PublisherOptions

	mu        sync.Mutex
	space     *sync.Cond // signalled when in-flight room frees up
	held      int        // messages queued or being sent
	heldBytes int
	batch     []published
	batchSize int
	timer     *time.Timer // the linger of the batch; nil when none is armed
	closed    bool
	sending   map[chan struct{}]struct{} // batches in flight, closed when settled
	ctx       context.Context            // of the sends; cancelled when Close gives up
	cancel    context.CancelFunc
}

// published is one message waiting for its batch.
type published struct {
	m      Message
	weight int
	f      *PublishFuture
}

// PublishFuture is the outcome of one published message.
type PublishFuture struct {
	done chan struct{}
	res  SendResult
	err  error
}

// Done is closed once the outcome is known.
func (f *PublishFuture) Done() <-chan struct{} { return f.done }

// Wait returns the outcome once it is known, or ctx's error if ctx ends
// first (the message is still being sent then). The result's ID is always
// set.
func (f *PublishFuture) Wait(ctx context.Context) (SendResult, error) {
	select {
	case <-f.done:
		return f.res, f.err
	case <-ctx.Done():
		return SendResult{ID: f.res.ID}, context.Cause(ctx)
	}
}

// Publisher returns an asynchronous publisher on the queue.
func (q *Queue) Publisher(opts PublisherOptions) (*Publisher, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{q: q, opts: opts, ctx: ctx, cancel: cancel, sending: make(map[chan struct{}]struct{})}
	p.space = sync.NewCond(&p.mu)
	return p, nil
}

// Publish queues m and returns its future. It blocks while the in-flight
// bounds are full, until room frees up or ctx is done. Invalid messages
// and a closed publisher or client are refused at once.
func (p *Publisher) Publish(ctx context.Context, m Message) (*PublishFuture, error) {
	if _, err := m.delayOf(0, time.Now()); err != nil {
		return nil, err
	}
	if m.Priority > MaxPriority {
		return nil, invalidPriority("", m.Priority)
	}
	if m.ID == "" {
		m.ID = newID()
	}
	w := messageWeight(wire.Message{ID: m.ID, Group: m.Group, Headers: m.Headers, Body: m.Body})
	f := &PublishFuture{done: make(chan struct{}), res: SendResult{ID: m.ID}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.waitRoom(ctx, w); err != nil {
		return nil, err
	}
	p.held++
	p.heldBytes += w
	p.batch = append(p.batch, published{m: m, weight: w, f: f})
	p.batchSize += w
	switch {
	case len(p.batch) >= p.opts.BatchMessages || p.batchSize >= p.opts.BatchBytes:
		p.sendLocked()
	case p.timer == nil:
		p.timer = time.AfterFunc(p.opts.Linger, p.lingerDone)
	}
	return f, nil
}

// waitRoom waits, under p.mu, until a message of weight w fits.
func (p *Publisher) waitRoom(ctx context.Context, w int) error {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.space.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	for {
		switch {
		case p.closed:
			return ErrClosed
		case p.q.c.isClosed():
			return ErrClosed
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case p.held == 0,
			p.held < p.opts.MaxInFlightMessages && p.heldBytes+w <= p.opts.MaxInFlightBytes:
			return nil
		}
		if len(p.batch) > 0 {
			p.sendLocked() // what waits for room must not wait for the linger
		}
		p.space.Wait()
	}
}

// lingerDone sends the batch whose linger ran out.
func (p *Publisher) lingerDone() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	if len(p.batch) > 0 {
		p.sendLocked()
	}
}

// sendLocked starts sending the current batch.
func (p *Publisher) sendLocked() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	batch := p.batch
	p.batch, p.batchSize = nil, 0
	done := make(chan struct{})
	p.sending[done] = struct{}{}
	go p.send(batch, done)
}

// send sends one batch and settles its futures.
func (p *Publisher) send(batch []published, done chan struct{}) {
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.Timeout)
	defer cancel()
	msgs := make([]Message, len(batch))
	for i, b := range batch {
		msgs[i] = b.m
	}
	res, err := p.q.SendBatch(ctx, msgs)
	var be *BatchError
	errors.As(err, &be)
	weight := 0
	for i, b := range batch {
		switch {
		case be != nil:
			b.f.res, b.f.err = res[i], be.Errors[i]
		case err != nil:
			b.f.err = err
		default:
			b.f.res = res[i]
		}
		close(b.f.done)
		weight += b.weight
	}
	p.mu.Lock()
	p.held -= len(batch)
	p.heldBytes -= weight
	delete(p.sending, done)
	close(done)
	p.space.Broadcast()
	p.mu.Unlock()
}

// Flush sends what is queued now and waits until every message published
// before the call has its outcome, or ctx is done.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	if len(p.batch) > 0 {
		p.sendLocked()
	}
	waits := make([]chan struct{}, 0, len(p.sending))
	for done := range p.sending {
		waits = append(waits, done)
	}
	p.mu.Unlock()
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// Close refuses further messages, sends what is queued and waits for every
// outcome. If ctx ends first, the sends still running are cancelled: their
// messages fail with ErrUnconfirmed (or their refusal), and Close returns
// ctx's error once every future is settled.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.space.Broadcast()
	p.mu.Unlock()
	err := p.Flush(ctx)
	if err != nil {
		p.cancel() // the sends end soon, settling their futures
		_ = p.Flush(context.Background())
	}
	p.cancel()
	return err
}
