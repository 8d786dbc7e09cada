package transport

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A heartbeat frame's payload is a count and, per heartbeat, the group id
// and the encoded request; its answer is the same count and, per
// heartbeat in the same order, a status (0: the group's own response
// follows; 1: an error message follows) and those bytes. Every heartbeat
// is handed to its own group's raft on the receiving node, which answers
// it: a node never answers for a group.
const (
	hbAnswered byte = 0
	hbFailed   byte = 1
)

// hbItem is one group's heartbeat waiting for its frame and its answer.
type hbItem struct {
	group string
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	err   error
	done  chan struct{}
}

// heartbeats coalesces the heartbeats of every group to one peer: the
// first waits HeartbeatLinger for others, then all leave in one frame on
// the control connection (sooner when MaxHeartbeatsPerFrame are waiting).
type heartbeats struct {
	p       *peer
	mu      sync.Mutex
	pending []*hbItem
	timer   *time.Timer // armed while pending is not empty
}

func newHeartbeats(p *peer) *heartbeats { return &heartbeats{p: p} }

// send queues one heartbeat and waits for its answer.
func (h *heartbeats) send(group string, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	it := &hbItem{group: group, req: req, resp: resp, done: make(chan struct{})}
	h.mu.Lock()
	h.pending = append(h.pending, it)
	var full []*hbItem
	switch {
	case len(h.pending) >= h.p.s.cfg.MaxHeartbeatsPerFrame:
		full = h.take()
	case len(h.pending) == 1:
		h.timer = time.AfterFunc(h.p.s.cfg.HeartbeatLinger, h.flush)
	}
	h.mu.Unlock()
	if full != nil {
		go h.deliver(full)
	}
	<-it.done
	if it.err != nil {
		return fmt.Errorf("group %q heartbeat to %s: %w", group, h.p.addr, it.err)
	}
	return nil
}

// take removes and returns the pending heartbeats; h.mu is held.
func (h *heartbeats) take() []*hbItem {
	items := h.pending
	h.pending = nil
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	return items
}

// flush sends what is pending (the linger timer's function).
func (h *heartbeats) flush() {
	h.mu.Lock()
	items := h.take()
	h.mu.Unlock()
	if len(items) > 0 {
		h.deliver(items)
	}
}

// deliver sends one frame of heartbeats and hands each its answer.
func (h *heartbeats) deliver(items []*hbItem) {
	h.p.s.heartbeats.Add(uint64(len(items)))
	h.p.s.heartbeatFrames.Add(1)
	payload, err := h.roundTrip(items)
	if err == nil {
		err = decodeHeartbeatAnswers(payload, items)
	}
	for _, it := range items {
		if err != nil && it.err == nil {
			it.err = err
		}
		close(it.done)
	}
}

func (h *heartbeats) roundTrip(items []*hbItem) ([]byte, error) {
	l, err := h.p.link(classControl)
	if err != nil {
		return nil, err
	}
	return l.roundTrip(func(id uint64) []byte {
		e := beginFrame(kindHeartbeats, id, "", 96*len(items))
		e.uint(uint64(len(items)))
		var req encoder
		for _, it := range items {
			e.bytes([]byte(it.group))
			req.b = req.b[:0]
			encodeAppendRequest(&req, it.req)
			e.bytes(req.b)
		}
		return finishFrame(e)
	})
}

// decodeHeartbeatAnswers fills each item's response or error from a
// heartbeat frame's answer. An answer that does not match the items
// fails them all.
func decodeHeartbeatAnswers(payload []byte, items []*hbItem) error {
	d := &decoder{b: payload}
	if n := d.uint(); d.err == nil && n != uint64(len(items)) {
		return fmt.Errorf("%w: %d heartbeat answers for %d heartbeats", ErrBadFrame, n, len(items))
	}
	for _, it := range items {
		status := d.uint()
		body := d.bytes(len(d.b))
		if d.err != nil {
			return d.err
		}
		switch status {
		case uint64(hbAnswered):
			bd := &decoder{b: body}
			decodeAppendResponse(bd, it.resp)
			it.err = bd.end()
		case uint64(hbFailed):
			it.err = fmt.Errorf("%w: %s", ErrRemote, body)
		default:
			return fmt.Errorf("%w: heartbeat status %d", ErrBadFrame, status)
		}
	}
	return d.end()
}

// heartbeatWorkers bounds the heartbeats of one frame handed to their
// groups at once. Most are answered in microseconds, but one that carries
// a new term makes its group write the term durably first: handled one
// after another, a burst of term changes (an election storm) would hold
// every other group's heartbeat behind their fsyncs, time them out and
// feed the storm. In parallel, those writes also share the shared log
// store's group commit.
const heartbeatWorkers = 64

// answerHeartbeats hands each heartbeat of a frame to its group's raft and
// returns the encoded answers. A malformed frame is answered with every
// heartbeat failed, never with responses made up for a group.
func (s *Shared) answerHeartbeats(payload []byte) []byte {
	d := &decoder{b: payload}
	n := d.uint()
	if d.err == nil && n > uint64(s.cfg.MaxHeartbeatsPerFrame) {
		d.fail("%d heartbeats in a frame (at most %d)", n, s.cfg.MaxHeartbeatsPerFrame)
	}
	out := &encoder{b: make([]byte, 0, 16+int(min(n, 1<<16))*24)}
	if d.err != nil {
		out.uint(0)
		return out.b
	}
	type answer struct {
		group string
		body  []byte
		resp  *raft.AppendEntriesResponse
		err   error
	}
	answers := make([]answer, n)
	for i := range answers {
		answers[i].group = string(d.bytes(MaxGroupIDLen))
		answers[i].body = d.bytes(len(d.b))
		answers[i].err = d.err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(int(n), heartbeatWorkers) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				a := &answers[i]
				a.resp, a.err = s.heartbeatOne(a.group, a.body, a.err)
			}
		})
	}
	wg.Wait()
	out.uint(n)
	var resp encoder
	for _, a := range answers {
		if a.err != nil {
			out.uint(uint64(hbFailed))
			out.bytes(errorPayload(a.err))
			continue
		}
		resp.b = resp.b[:0]
		encodeAppendResponse(&resp, a.resp)
		out.uint(uint64(hbAnswered))
		out.bytes(resp.b)
	}
	return out.b
}

// heartbeatOne decodes one heartbeat and has its group's raft answer it.
func (s *Shared) heartbeatOne(group string, body []byte, decodeErr error) (*raft.AppendEntriesResponse, error) {
	if decodeErr != nil {
		return nil, decodeErr
	}
	req := new(raft.AppendEntriesRequest)
	d := &decoder{b: body}
	decodeAppendRequest(d, req)
	if err := d.end(); err != nil {
		return nil, err
	}
	if !isHeartbeat(req) {
		return nil, fmt.Errorf("%w: an append in a heartbeat frame", ErrBadFrame)
	}
	g := s.group(group)
	if g == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	fn := g.heartbeat.Load()
	if fn == nil {
		return nil, fmt.Errorf("%w: group %q is not ready for heartbeats", ErrRemote, group)
	}
	ch := make(chan raft.RPCResponse, 1)
	(*fn)(raft.RPC{Command: req, RespChan: ch})
	select {
	case r := <-ch:
		if r.Error != nil {
			return nil, r.Error
		}
		resp, ok := r.Response.(*raft.AppendEntriesResponse)
		if !ok {
			return nil, fmt.Errorf("%w: heartbeat answered with %T", ErrRemote, r.Response)
		}
		return resp, nil
	default:
		return nil, fmt.Errorf("%w: group %q did not answer its heartbeat (shutting down)", ErrRemote, group)
	}
}
