package transport

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// pipelineDepth bounds the appends of one pipeline in flight; raft's
// AppendEntries on the pipeline blocks beyond it (back-pressure).
const pipelineDepth = 2

// pipeline is raft's AppendPipeline to one follower on the shared bulk
// connection. Answers are handed to raft in send order. The goroutine that
// ends a call (the link's reader, as a rule) hands over the answers at the
// head of the line itself while raft's channel has room, so an answer
// reaches raft's decoder with one goroutine hand-off instead of two; when
// raft has not yet taken earlier answers (the channel is full), a drain
// goroutine takes over until none is in flight, as it waits on raft.
type pipeline struct {
	g      *GroupTransport
	p      *peer
	slots  chan struct{} // a slot per append in flight
	doneCh chan raft.AppendFuture
	closed chan struct{}
	once   sync.Once

	// convert, when set (before the first append), turns each answered
	// future into the future raft gets, or none (false); see
	// boundedPipeline. It is called in send order, one call at a time.
	convert func(raft.AppendFuture) (raft.AppendFuture, bool)

	mu       sync.Mutex
	inflight []*pipeFuture
	draining bool
	drains   int // drain goroutines started, for tests
}

// setConvert sets the pipeline's convert function; before any append.
func (pl *pipeline) setConvert(convert func(raft.AppendFuture) (raft.AppendFuture, bool)) {
	pl.convert = convert
}

// handOver gives raft what it gets of answered future f: never blocks
// while doneCh has room. It reports false when the pipeline is closed.
func (pl *pipeline) handOver(f *pipeFuture) bool {
	var out raft.AppendFuture = f
	if pl.convert != nil {
		var ok bool
		if out, ok = pl.convert(f); !ok {
			<-pl.slots
			return true
		}
	}
	select {
	case pl.doneCh <- out:
		<-pl.slots
		return true
	case <-pl.closed:
		return false
	}
}

func newPipeline(g *GroupTransport, p *peer) *pipeline {
	return &pipeline{g: g, p: p, slots: make(chan struct{}, pipelineDepth),
		doneCh: make(chan raft.AppendFuture, pipelineDepth), closed: make(chan struct{})}
}

// pipeFuture is one pipelined append.
type pipeFuture struct {
	start time.Time
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	c     *call
	err   error
	ready chan struct{} // closed once err and resp are final
}

func (f *pipeFuture) Error() error                          { <-f.ready; return f.err }
func (f *pipeFuture) Start() time.Time                      { return f.start }
func (f *pipeFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f *pipeFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// AppendEntries sends args and returns its future; it blocks while
// pipelineDepth appends are in flight.
func (pl *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	select {
	case pl.slots <- struct{}{}:
	case <-pl.closed:
		return nil, raft.ErrPipelineShutdown
	}
	f, err := pl.send(args, resp)
	if err != nil {
		<-pl.slots
		return nil, err
	}
	pl.mu.Lock()
	pl.inflight = append(pl.inflight, f)
	pl.handAnsweredLocked() // its answer may have come already
	pl.mu.Unlock()
	return f, nil
}

// callEnded is each call's ended function: the call of some append in
// flight is done.
func (pl *pipeline) callEnded() {
	pl.mu.Lock()
	pl.handAnsweredLocked()
	pl.mu.Unlock()
}

// handAnsweredLocked hands raft the answered appends at the head of the
// line, in send order, without blocking: while the drain goroutine runs,
// it hands them; when raft's channel is full, the drain goroutine is
// started for the rest. The caller holds mu.
func (pl *pipeline) handAnsweredLocked() {
	if pl.draining {
		return
	}
	for len(pl.inflight) > 0 {
		f := pl.inflight[0]
		if !f.answered() {
			return // its call's end hands it
		}
		select {
		case <-pl.closed:
			return
		default:
		}
		if len(pl.doneCh) == cap(pl.doneCh) {
			// Only this function and drain send on doneCh, both under
			// the rule that drain runs alone: so the send below never
			// blocks, and here the drain goroutine waits on raft instead.
			pl.draining = true
			pl.drains++
			go pl.drain()
			return
		}
		f.settle()
		pl.inflight[0] = nil
		pl.inflight = pl.inflight[1:]
		pl.handOver(f)
	}
}

// send writes one append on the bulk connection.
func (pl *pipeline) send(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (*pipeFuture, error) {
	if pl.g.isClosed() {
		return nil, ErrGroupClosed
	}
	l, err := pl.p.link(classBulk)
	if err != nil {
		return nil, err
	}
	c, id, err := l.start(pl.callEnded)
	if err != nil {
		return nil, err
	}
	e := beginPooledFrame(kindAppend, id, pl.g.id, 64+appendSizeHint(args))
	encodeAppendRequest(e, args)
	err = l.send(finishFrame(e))
	releaseFrame(e)
	if err != nil {
		l.finish(id, nil, err)
	}
	return &pipeFuture{start: time.Now(), req: args, resp: resp, c: c, ready: make(chan struct{})}, nil
}

// appendSizeHint is about the encoded size of a request's entries.
func appendSizeHint(args *raft.AppendEntriesRequest) int {
	n := 0
	for _, l := range args.Entries {
		n += len(l.Data) + len(l.Extensions) + 32
	}
	return n
}

// drain hands raft the answered appends at the head of the line, in send
// order, waiting for raft to take each; when the head has no answer yet
// (or none is in flight) it ends, and the calls' ends hand answers again.
func (pl *pipeline) drain() {
	for {
		pl.mu.Lock()
		if len(pl.inflight) == 0 || !pl.inflight[0].answered() {
			pl.draining = false
			pl.mu.Unlock()
			return
		}
		f := pl.inflight[0]
		f.settle()
		pl.inflight[0] = nil
		pl.inflight = pl.inflight[1:]
		pl.mu.Unlock()
		if !pl.handOver(f) {
			return
		}
	}
}

// answered reports whether f's call is done.
func (f *pipeFuture) answered() bool {
	select {
	case <-f.c.done:
		return true
	default:
		return false
	}
}

// settle decodes the answer into the response. On any failure the
// response says Success false (raft's pipeline reads Response, not Error,
// and must never take an unanswered append for a stored one).
func (f *pipeFuture) settle() {
	payload, err := f.c.result()
	if err == nil {
		d := &decoder{b: payload}
		decodeAppendResponse(d, f.resp)
		err = d.end()
	}
	if err != nil {
		*f.resp = raft.AppendEntriesResponse{}
		f.err = err
	}
	close(f.ready)
}

// Consumer yields the futures in send order once answered.
func (pl *pipeline) Consumer() <-chan raft.AppendFuture { return pl.doneCh }

// Close stops the pipeline; appends in flight are no longer handed to
// raft (their connection stays open for others).
func (pl *pipeline) Close() error {
	pl.once.Do(func() { close(pl.closed) })
	return nil
}
