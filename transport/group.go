package transport

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// GroupTransport is one group's raft.Transport on a Shared transport. Its
// RPCs travel on the connections the node shares with every other group;
// it owns no connection and no goroutine while idle. Get it (wrapped in a
// BoundedTransport) from Shared.Group.
type GroupTransport struct {
	s         *Shared
	id        string
	consumeCh chan raft.RPC
	heartbeat atomic.Pointer[func(raft.RPC)]
	done      chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	queue    []*inboundRPC // appends waiting for raft, in arrival order
	draining bool          // a goroutine is handing queue to raft
	direct   uint64        // appends handed to a waiting raft by the reader, for tests
}

var (
	_ raft.Transport   = (*GroupTransport)(nil)
	_ raft.WithClose   = (*GroupTransport)(nil)
	_ raft.WithPreVote = (*GroupTransport)(nil)
)

func newGroupTransport(s *Shared, id string) *GroupTransport {
	return &GroupTransport{s: s, id: id, consumeCh: make(chan raft.RPC), done: make(chan struct{})}
}

// ID returns the group id.
func (g *GroupTransport) ID() string { return g.id }

// Consumer returns the channel raft reads this group's RPCs from.
func (g *GroupTransport) Consumer() <-chan raft.RPC { return g.consumeCh }

// LocalAddr returns the node's advertised raft address.
func (g *GroupTransport) LocalAddr() raft.ServerAddress {
	return raft.ServerAddress(g.s.mux.advertise.String())
}

// SetHeartbeatHandler sets the function heartbeats are handed to, on the
// connection's own goroutine, bypassing the consumer channel (raft's
// fast path). Until it is set, heartbeats are refused.
func (g *GroupTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		g.heartbeat.Store(nil)
		return
	}
	g.heartbeat.Store(&cb)
}

// EncodePeer encodes a peer's address as its bytes.
func (g *GroupTransport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(addr)
}

// DecodePeer decodes what EncodePeer encoded.
func (g *GroupTransport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// Close unregisters the group: its queued and later RPCs from peers are
// answered with an error, and its own RPCs fail with ErrGroupClosed. The
// node's connections stay open for the other groups. Close is idempotent.
func (g *GroupTransport) Close() error {
	g.closeOnce.Do(func() {
		g.s.unregister(g)
		close(g.done)
		g.mu.Lock()
		queued := g.queue
		g.queue = nil
		g.mu.Unlock()
		for _, r := range queued {
			r.answer(nil, ErrGroupClosed)
		}
	})
	return nil
}

// isClosed reports whether Close was called.
func (g *GroupTransport) isClosed() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// enqueue hands an append to raft, which answers it through
// raft.RPC.Reply: the answer goes to the connection's answer writer
// (inbound.queueAnswer), which writes what queued meanwhile together, and
// raft never waits on the network nor on a goroutine to take its answer. When
// raft is waiting for an RPC and no earlier append of the group is queued,
// the append goes to raft at once; otherwise it is queued, and appends of
// a group are handed over in arrival order by at most one goroutine,
// which ends when the queue is empty.
func (g *GroupTransport) enqueue(r *inboundRPC) {
	r.rpc.Reply = r.answerQueued
	g.mu.Lock()
	if g.isClosed() {
		g.mu.Unlock()
		r.answer(nil, ErrGroupClosed)
		return
	}
	if !g.draining && len(g.queue) == 0 {
		select {
		case g.consumeCh <- r.rpc:
			g.direct++
			g.mu.Unlock()
			return
		default:
		}
	}
	if len(g.queue) >= g.s.cfg.MaxQueuedPerGroup {
		g.mu.Unlock()
		r.answer(nil, fmt.Errorf("%w: %d appends queued for group %q", ErrBusy, g.s.cfg.MaxQueuedPerGroup, g.id))
		return
	}
	g.queue = append(g.queue, r)
	start := !g.draining
	g.draining = true
	g.mu.Unlock()
	if start {
		go g.drain()
	}
}

// drain hands queued appends to raft, one at a time in arrival order,
// until none is left; raft answers each (see enqueue).
func (g *GroupTransport) drain() {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.draining = false
			g.mu.Unlock()
			return
		}
		r := g.queue[0]
		g.queue[0] = nil
		g.queue = g.queue[1:]
		g.mu.Unlock()
		if waited := time.Since(r.arrived); waited > g.s.cfg.Timeout/2 {
			// Its sender gives up at Timeout: answer now, so that the
			// sender can tell a stuck group from a dead connection.
			r.answer(nil, fmt.Errorf("%w: group %q took no append for %v", ErrBusy, g.id, waited.Round(time.Millisecond)))
			continue
		}
		if err := g.handOver(r.rpc, g.s.cfg.Timeout/2); err != nil {
			r.answer(nil, err)
		}
	}
}

// deliver hands an RPC to raft and waits for its response.
func (g *GroupTransport) deliver(rpc raft.RPC) (any, error) { return g.deliverWithin(rpc, 0) }

// deliverWithin is deliver, giving up with ErrBusy when raft has not
// taken the RPC within wait (no limit when wait is 0). Once taken, raft
// answers it (or shuts down, and the group is closed).
func (g *GroupTransport) deliverWithin(rpc raft.RPC, wait time.Duration) (any, error) {
	ch := make(chan raft.RPCResponse, 1)
	rpc.RespChan = ch
	select {
	case g.consumeCh <- rpc: // raft was waiting for it: no timer needed
	default:
		if err := g.handOver(rpc, wait); err != nil {
			return nil, err
		}
	}
	select {
	case resp := <-ch:
		return resp.Response, resp.Error
	case <-g.done:
		return nil, ErrGroupClosed
	}
}

// handOver waits until raft takes rpc, the group closes (ErrGroupClosed)
// or wait passes (ErrBusy; no limit when wait is 0).
func (g *GroupTransport) handOver(rpc raft.RPC, wait time.Duration) error {
	var expired <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		expired = t.C
	}
	select {
	case g.consumeCh <- rpc:
		return nil
	case <-g.done:
		return ErrGroupClosed
	case <-expired:
		return fmt.Errorf("%w: group %q took no RPC for %v", ErrBusy, g.id, wait)
	}
}

// peerOf resolves a target to its peer, through the AddressProvider when
// one is set.
func (g *GroupTransport) peerOf(id raft.ServerID, target raft.ServerAddress) (*peer, error) {
	if g.isClosed() {
		return nil, ErrGroupClosed
	}
	if ap := g.s.cfg.AddressProvider; ap != nil {
		if addr, err := ap.ServerAddr(id); err == nil && addr != "" {
			target = addr
		}
	}
	return g.s.peer(string(target))
}

// call sends one request of a kind on a class of connection and decodes
// its answer with dec.
func (g *GroupTransport) call(id raft.ServerID, target raft.ServerAddress, class, kind byte, enc func(*encoder), dec func(*decoder)) error {
	p, err := g.peerOf(id, target)
	if err != nil {
		return err
	}
	l, err := p.link(class)
	if err != nil {
		return err
	}
	payload, err := l.roundTrip(func(cid uint64) []byte {
		e := beginFrame(kind, cid, g.id, 128)
		enc(e)
		return finishFrame(e)
	})
	if err != nil {
		return fmt.Errorf("group %q to %s: %w", g.id, target, err)
	}
	d := &decoder{b: payload}
	dec(d)
	return d.end()
}

// AppendEntries sends one AppendEntries; heartbeats join the peer's next
// coalesced heartbeat frame.
func (g *GroupTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if isHeartbeat(args) {
		p, err := g.peerOf(id, target)
		if err != nil {
			return err
		}
		return p.hb.send(g.id, args, resp)
	}
	return g.call(id, target, classBulk, kindAppend,
		func(e *encoder) { encodeAppendRequest(e, args) },
		func(d *decoder) { decodeAppendResponse(d, resp) })
}

// AppendEntriesPipeline returns a pipeline of appends to target.
func (g *GroupTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := g.peerOf(id, target)
	if err != nil {
		return nil, err
	}
	return newPipeline(g, p), nil
}

// RequestVote sends a vote request on the control connection.
func (g *GroupTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return g.call(id, target, classControl, kindVote,
		func(e *encoder) { encodeVoteRequest(e, args) },
		func(d *decoder) { decodeVoteResponse(d, resp) })
}

// RequestPreVote sends a pre-vote request on the control connection.
func (g *GroupTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return g.call(id, target, classControl, kindPreVote,
		func(e *encoder) { encodePreVoteRequest(e, args) },
		func(d *decoder) { decodePreVoteResponse(d, resp) })
}

// TimeoutNow asks target to start an election now, on the control
// connection.
func (g *GroupTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return g.call(id, target, classControl, kindTimeoutNow,
		func(e *encoder) { encodeTimeoutNowRequest(e, args) },
		func(d *decoder) { decodeTimeoutNowResponse(d, resp) })
}

// InstallSnapshot streams a snapshot to target on a connection of its own
// (see snapshot.go).
func (g *GroupTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	p, err := g.peerOf(id, target)
	if err != nil {
		return err
	}
	return p.sendSnapshot(g.id, args, resp, data)
}
