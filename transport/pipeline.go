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
// connection. Answers are handed to raft in send order by a goroutine
// that runs only while appends are in flight.
type pipeline struct {
	g      *GroupTransport
	p      *peer
	slots  chan struct{} // a slot per append in flight
	doneCh chan raft.AppendFuture
	closed chan struct{}
	once   sync.Once

	mu       sync.Mutex
	inflight []*pipeFuture
	draining bool
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
	start := !pl.draining
	pl.draining = true
	pl.mu.Unlock()
	if start {
		go pl.drain()
	}
	return f, nil
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
	c, id, err := l.start()
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

// drain hands answered futures to raft in send order until none is in
// flight.
func (pl *pipeline) drain() {
	for {
		pl.mu.Lock()
		if len(pl.inflight) == 0 {
			pl.draining = false
			pl.mu.Unlock()
			return
		}
		f := pl.inflight[0]
		pl.mu.Unlock()
		select {
		case <-f.c.done:
		case <-pl.closed:
			return
		}
		f.settle()
		pl.mu.Lock()
		pl.inflight[0] = nil
		pl.inflight = pl.inflight[1:]
		pl.mu.Unlock()
		select {
		case pl.doneCh <- f:
			<-pl.slots
		case <-pl.closed:
			return
		}
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
