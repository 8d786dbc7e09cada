package transport

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// DefaultRPCBytesMax is the entry data one AppendEntries RPC carries at
// most (a single larger entry travels alone). raft fills a request with up
// to MaxAppendEntries entries whatever their size; a lagging follower could
// otherwise be sent hundreds of megabytes in one RPC that cannot arrive
// within the transport timeout, and retried for ever.
const DefaultRPCBytesMax = 8 << 20

// BoundedTransport is a raft transport whose AppendEntries requests are cut
// into RPCs of at most RPCBytesMax bytes of entry data, sent in order on
// the same path. Cutting is safe in raft: each part is the AppendEntries a
// leader with a smaller MaxAppendEntries would have sent (its PrevLogEntry
// is the last entry of the part before), and the caller sees the answer to
// the last part, or to the first part that failed.
type BoundedTransport struct {
	// Transport is the transport the parts are sent on: a group's
	// transport on a Shared, or a raft.NetworkTransport.
	Transport interface {
		raft.Transport
		raft.WithClose
		raft.WithPreVote
	}
	// RPCBytesMax bounds one RPC's entry data.
	RPCBytesMax int

	split atomic.Uint64
}

// Consumer returns the channel raft reads RPCs from.
func (t *BoundedTransport) Consumer() <-chan raft.RPC { return t.Transport.Consumer() }

// LocalAddr returns the local raft address.
func (t *BoundedTransport) LocalAddr() raft.ServerAddress { return t.Transport.LocalAddr() }

// RequestVote sends a vote request.
func (t *BoundedTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.Transport.RequestVote(id, target, args, resp)
}

// RequestPreVote sends a pre-vote request.
func (t *BoundedTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.Transport.RequestPreVote(id, target, args, resp)
}

// InstallSnapshot streams a snapshot to target.
func (t *BoundedTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.Transport.InstallSnapshot(id, target, args, resp, data)
}

// EncodePeer encodes a peer's address.
func (t *BoundedTransport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return t.Transport.EncodePeer(id, addr)
}

// DecodePeer decodes a peer's address.
func (t *BoundedTransport) DecodePeer(b []byte) raft.ServerAddress { return t.Transport.DecodePeer(b) }

// SetHeartbeatHandler sets raft's heartbeat fast path.
func (t *BoundedTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	t.Transport.SetHeartbeatHandler(cb)
}

// TimeoutNow asks target to start an election.
func (t *BoundedTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.Transport.TimeoutNow(id, target, args, resp)
}

// Close closes the underlying transport.
func (t *BoundedTransport) Close() error { return t.Transport.Close() }

// SplitRequests counts the AppendEntries requests sent in parts so far.
func (t *BoundedTransport) SplitRequests() uint64 { return t.split.Load() }

var (
	_ raft.Transport   = (*BoundedTransport)(nil)
	_ raft.WithClose   = (*BoundedTransport)(nil)
	_ raft.WithPreVote = (*BoundedTransport)(nil)
)

// splitAppend cuts args into requests of at most maxBytes of entry data
// each (at least one entry each). It returns args itself when it fits.
func splitAppend(args *raft.AppendEntriesRequest, maxBytes int) []*raft.AppendEntriesRequest {
	total := 0
	for _, e := range args.Entries {
		total += len(e.Data) + len(e.Extensions)
	}
	if total <= maxBytes || len(args.Entries) < 2 {
		return []*raft.AppendEntriesRequest{args}
	}
	var parts []*raft.AppendEntriesRequest
	prevIndex, prevTerm := args.PrevLogEntry, args.PrevLogTerm
	for start := 0; start < len(args.Entries); {
		end, size := start, 0
		for end < len(args.Entries) {
			n := len(args.Entries[end].Data) + len(args.Entries[end].Extensions)
			if end > start && size+n > maxBytes {
				break
			}
			size, end = size+n, end+1
		}
		part := *args
		part.Entries = args.Entries[start:end]
		part.PrevLogEntry, part.PrevLogTerm = prevIndex, prevTerm
		parts = append(parts, &part)
		last := args.Entries[end-1]
		prevIndex, prevTerm = last.Index, last.Term
		start = end
	}
	return parts
}

// AppendEntries sends args as one or more bounded RPCs.
func (t *BoundedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if len(args.Entries) < 2 { // heartbeats and single entries: nothing to cut
		return t.Transport.AppendEntries(id, target, args, resp)
	}
	parts := splitAppend(args, t.RPCBytesMax)
	if len(parts) == 1 {
		return t.Transport.AppendEntries(id, target, args, resp)
	}
	t.split.Add(1)
	for _, part := range parts {
		var r raft.AppendEntriesResponse
		if err := t.Transport.AppendEntries(id, target, part, &r); err != nil {
			return err
		}
		*resp = r
		if !r.Success || r.Term > args.Term {
			return nil
		}
	}
	return nil
}

// AppendEntriesPipeline returns a pipeline that cuts requests the same way.
func (t *BoundedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := t.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	p := &boundedPipeline{inner: inner, maxBytes: t.RPCBytesMax, split: &t.split,
		closed: make(chan struct{}), wake: make(chan struct{}, 1)}
	if c, ok := inner.(convertingPipeline); ok {
		// The shared transport's pipeline converts its answers as it hands
		// them over: raft reads them from it, with no goroutine between.
		c.setConvert(p.convert)
		p.out = inner.Consumer()
		return p, nil
	}
	p.gathered = make(chan raft.AppendFuture, 128)
	p.out = p.gathered
	go p.gather()
	return p, nil
}

// convertingPipeline is an inner pipeline that lets a function convert
// its answered futures, in send order, before raft gets them.
type convertingPipeline interface {
	setConvert(func(raft.AppendFuture) (raft.AppendFuture, bool))
}

// boundedPipeline sends each request's parts down the inner pipeline and
// hands raft one future per request once all its parts are answered.
type boundedPipeline struct {
	inner    raft.AppendPipeline
	maxBytes int
	split    *atomic.Uint64
	out      <-chan raft.AppendFuture // what raft reads: gather's, or the inner pipeline's
	gathered chan raft.AppendFuture   // gather's output; nil with a converting inner pipeline
	closed   chan struct{}
	wake     chan struct{}

	mu        sync.Mutex
	pending   []*splitFuture // in send order
	stopped   bool           // convert hands raft nothing more
	closeOnce sync.Once
}

// AppendEntries sends args's parts; the returned future resolves when the
// last part is answered (or a part fails).
func (p *boundedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	parts := splitAppend(args, p.maxBytes)
	if len(parts) == 1 {
		// Listed before it is sent: its answer may be handed over
		// before AppendEntries returns.
		sf := &splitFuture{start: time.Now(), req: args, resp: resp, want: 1, single: true}
		p.push(sf)
		f, err := p.inner.AppendEntries(args, resp)
		if err != nil {
			p.dropLast(sf)
			return nil, err
		}
		return f, nil
	}
	p.split.Add(1)
	sf := &splitFuture{start: time.Now(), req: args, resp: resp, want: len(parts), done: make(chan struct{})}
	p.push(sf)
	for i, part := range parts {
		if _, err := p.inner.AppendEntries(part, new(raft.AppendEntriesResponse)); err != nil {
			p.mu.Lock()
			sf.want = i // no more parts of it will come back
			sf.short = true
			p.mu.Unlock()
			return nil, err
		}
	}
	return sf, nil
}

// dropLast removes sf, the last request listed, which was not sent.
func (p *boundedPipeline) dropLast(sf *splitFuture) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.pending); n > 0 && p.pending[n-1] == sf {
		p.pending[n-1] = nil
		p.pending = p.pending[:n-1]
	}
}

func (p *boundedPipeline) push(sf *splitFuture) {
	p.mu.Lock()
	p.pending = append(p.pending, sf)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// gather matches the inner pipeline's answers, in order, to the requests
// they belong to. After an answer that failed to arrive (an error rather
// than a response) it emits that answer and stops: raft aborts the
// pipeline on it, and a response read off the same connection after a
// timeout may be a late answer to an earlier request, which must never be
// taken for the answer to a later one.
func (p *boundedPipeline) gather() {
	in := p.inner.Consumer()
	for {
		var f raft.AppendFuture
		select {
		case f = <-in:
		case <-p.closed:
			return
		}
		sf := p.head()
		if sf == nil {
			return // an answer to nothing sent: the pipeline is broken
		}
		if sf.single {
			p.pop()
			if !p.emit(f) || f.Error() != nil {
				return
			}
			continue
		}
		if complete := p.record(sf, f); complete {
			p.pop()
			close(sf.done)
			if !p.emit(sf) || sf.err != nil || sf.short {
				return
			}
		}
	}
}

// convert is gather's work done by a converting inner pipeline as it
// hands over each answer f: it returns the future raft gets for f, or
// false while f's request has parts unanswered, and once raft has been
// handed a failed answer (see gather).
func (p *boundedPipeline) convert(f raft.AppendFuture) (raft.AppendFuture, bool) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil, false
	}
	if len(p.pending) == 0 { // an answer to nothing sent: the pipeline is broken
		p.stopped = true
		p.mu.Unlock()
		return nil, false
	}
	sf := p.pending[0]
	p.mu.Unlock()
	if sf.single {
		p.pop()
		p.stopIf(f.Error() != nil)
		return f, true
	}
	if !p.record(sf, f) {
		return nil, false
	}
	p.pop()
	close(sf.done)
	p.stopIf(sf.err != nil || sf.short)
	return sf, true
}

// stopIf stops convert handing raft anything more when stop is set.
func (p *boundedPipeline) stopIf(stop bool) {
	if stop {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
	}
}

// head returns the oldest request awaiting answers, waiting for it to be
// pushed if the answer beat the push.
func (p *boundedPipeline) head() *splitFuture {
	for {
		p.mu.Lock()
		if len(p.pending) > 0 {
			sf := p.pending[0]
			p.mu.Unlock()
			return sf
		}
		p.mu.Unlock()
		select {
		case <-p.wake:
		case <-p.closed:
			return nil
		}
	}
}

func (p *boundedPipeline) pop() {
	p.mu.Lock()
	p.pending[0] = nil
	p.pending = p.pending[1:]
	p.mu.Unlock()
}

// record notes one part's answer; it reports whether sf is complete.
//
// A request counts as appended only if every one of its parts was sent and
// answered with success: raft's pipeline reads only Response (never Error)
// and, on Success, takes the follower to hold the whole request's entries.
// So a complete request with a part that failed, errored or was never sent
// answers Success = false, whatever the parts before it answered (an
// earlier part's success left in the response would let the leader count
// entries the follower never stored toward a commit).
func (p *boundedPipeline) record(sf *splitFuture, f raft.AppendFuture) bool {
	err := f.Error()
	p.mu.Lock()
	defer p.mu.Unlock()
	sf.got++
	if sf.err == nil && !sf.failed {
		if err != nil {
			sf.err = err
		} else {
			*sf.resp = *f.Response()
			sf.failed = !sf.resp.Success || sf.resp.Term > sf.req.Term
		}
	}
	complete := sf.got >= sf.want
	if complete && (sf.err != nil || sf.short) {
		sf.resp.Success = false
	}
	return complete
}

func (p *boundedPipeline) emit(f raft.AppendFuture) bool {
	select {
	case p.gathered <- f:
		return true
	case <-p.closed:
		return false
	}
}

// Consumer yields one future per request, in order.
func (p *boundedPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// Close closes the inner pipeline and stops gathering.
func (p *boundedPipeline) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	return p.inner.Close()
}

// splitFuture is the future of a request sent in parts.
type splitFuture struct {
	start  time.Time
	req    *raft.AppendEntriesRequest
	resp   *raft.AppendEntriesResponse
	want   int
	single bool // the request went whole: its one answer is handed on as it is
	done   chan struct{}

	// Guarded by the pipeline's mu until done is closed.
	got    int
	err    error
	failed bool
	short  bool // a part could not be sent; want counts those that were
}

// Error waits for every part and returns the first part's error.
func (f *splitFuture) Error() error {
	<-f.done
	return f.err
}

// Start is when the request was handed to the pipeline.
func (f *splitFuture) Start() time.Time { return f.start }

// Request is the whole request, as raft built it.
func (f *splitFuture) Request() *raft.AppendEntriesRequest { return f.req }

// Response is the last part's answer, or the first failing part's.
func (f *splitFuture) Response() *raft.AppendEntriesResponse { return f.resp }
