package client_test

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// fakeCluster is an in-process stand-in for a Ferry cluster: a few
// "nodes" listening on loopback TCP and speaking the wire protocol, over
// one shared in-memory state. Each queue partition has a leader node;
// partition requests sent to another node get CodeNotLeader with the
// leader's address, catalog changes sent to a node other than node 0 (the
// meta leader) too. A hook injects faults per request.
type fakeCluster struct {
	nodes []*fakeNode

	mu         sync.Mutex
	queues     map[string]*fakeQueue
	metaIndex  uint64
	hook       func(node int, op wire.Op, body any) fault
	hideLeader bool      // NotLeader answers carry no leader address
	token      string    // when set, the hello must carry it
	log        []fakeReq // every request, in arrival order
	changed    chan struct{}
	polls      int // long polls waiting right now
	inFlight   int // leases held right now
	inFlightHi int // the most leases ever held at once
	closed     bool

	ackRides           int  // acks applied from receives
	receiveIgnoresAcks bool // receives ignore their acks, as an older server does
}

// fakeReq is one recorded request.
type fakeReq struct {
	node int
	op   wire.Op
	body any
}

// fault is what the hook asks the fake to do with one request.
type fault struct {
	code      wire.Code       // answer with this code instead of applying
	leader    string          // the Leader of that answer
	drop      bool            // close the connection without applying
	dropAfter bool            // apply, then close the connection without answering
	codeAfter wire.Code       // apply, then answer with this code
	hold      <-chan struct{} // apply, then wait for this before answering
	wait      <-chan struct{} // wait for this before anything else
	msg       string          // the error text of code (default "injected")
	itemCode  wire.Code       // answer every item of a send or ack (or a receive's acks) with this code (and msg)
}

// fakeNode is one listening "node".
type fakeNode struct {
	idx  int
	id   string
	addr string
	fc   *fakeCluster
	ln   net.Listener
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[*fakeConn]bool
}

// fakeConn is one accepted client connection.
type fakeConn struct {
	nc     net.Conn
	wmu    sync.Mutex
	closed chan struct{}
	once   sync.Once
}

func (fc *fakeConn) close() {
	fc.once.Do(func() {
		close(fc.closed)
		fc.nc.Close()
	})
}

// newFake starts a fake cluster of n nodes. t may be nil (examples); the
// caller then closes it.
func newFake(t testing.TB, n int) *fakeCluster {
	fc := &fakeCluster{queues: make(map[string]*fakeQueue), changed: make(chan struct{})}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		nd := &fakeNode{idx: i, id: fmt.Sprintf("node-%d", i), addr: ln.Addr().String(), fc: fc, ln: ln,
			conns: make(map[*fakeConn]bool)}
		fc.nodes = append(fc.nodes, nd)
		nd.wg.Add(1)
		go nd.serve()
	}
	if t != nil {
		t.Cleanup(fc.Close)
	}
	return fc
}

// Addrs returns the nodes' client addresses.
func (fc *fakeCluster) Addrs() []string {
	var out []string
	for _, n := range fc.nodes {
		out = append(out, n.addr)
	}
	return out
}

// Close stops every node and ends every connection.
func (fc *fakeCluster) Close() {
	fc.mu.Lock()
	if fc.closed {
		fc.mu.Unlock()
		return
	}
	fc.closed = true
	fc.notifyLocked()
	fc.mu.Unlock()
	for _, n := range fc.nodes {
		n.ln.Close()
		n.dropAll()
		n.wg.Wait()
	}
}

// setHook installs the fault injector (nil removes it).
func (fc *fakeCluster) setHook(h func(node int, op wire.Op, body any) fault) {
	fc.mu.Lock()
	fc.hook = h
	fc.mu.Unlock()
}

// requests returns the recorded requests of one op.
func (fc *fakeCluster) requests(op wire.Op) []fakeReq {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []fakeReq
	for _, r := range fc.log {
		if r.op == op {
			out = append(out, r)
		}
	}
	return out
}

// notifyLocked wakes long polls after a state change.
func (fc *fakeCluster) notifyLocked() {
	close(fc.changed)
	fc.changed = make(chan struct{})
}

func (n *fakeNode) serve() {
	defer n.wg.Done()
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		c := &fakeConn{nc: nc, closed: make(chan struct{})}
		n.mu.Lock()
		n.conns[c] = true
		n.mu.Unlock()
		n.wg.Add(1)
		go n.serveConn(c)
	}
}

// dropAll closes every connection of the node.
func (n *fakeNode) dropAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.conns {
		c.close()
	}
}

func (n *fakeNode) serveConn(c *fakeConn) {
	defer n.wg.Done()
	defer func() {
		c.close()
		n.mu.Lock()
		delete(n.conns, c)
		n.mu.Unlock()
	}()
	rd := wire.NewReader(bufio.NewReader(c.nc))
	checkToken := func(h wire.Hello) error {
		n.fc.mu.Lock()
		want := n.fc.token
		n.fc.mu.Unlock()
		if want != "" && h.Token != want {
			return wire.Errorf(wire.CodeUnauthorized, "unknown token")
		}
		return nil
	}
	if _, err := wire.ServerHandshakeCheck(c.nc, rd, wire.Welcome{NodeID: n.id, Server: "fake"}, checkToken); err != nil {
		return
	}
	for {
		req, err := rd.ReadRequest()
		if err != nil {
			return
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.handle(c, req)
		}()
	}
}

// handle answers one request, applying the hook's fault.
func (n *fakeNode) handle(c *fakeConn, req wire.Request) {
	body := wire.NewRequestBody(req.Op)
	if body == nil {
		n.reply(c, wire.ErrorResponse(req.ID, wire.Errorf(wire.CodeMalformed, "unknown op")))
		return
	}
	if err := req.Decode(body); err != nil {
		n.reply(c, wire.ErrorResponse(req.ID, err))
		return
	}
	fc := n.fc
	fc.mu.Lock()
	fc.log = append(fc.log, fakeReq{node: n.idx, op: req.Op, body: body})
	var f fault
	if fc.hook != nil {
		f = fc.hook(n.idx, req.Op, body)
	}
	fc.mu.Unlock()
	if f.wait != nil {
		select {
		case <-f.wait:
		case <-c.closed:
			return
		}
	}
	switch {
	case f.code != wire.CodeOK:
		msg := f.msg
		if msg == "" {
			msg = "injected"
		}
		n.reply(c, wire.Response{ID: req.ID, Code: f.code, Error: msg, Leader: f.leader})
		return
	case f.itemCode != wire.CodeOK:
		n.replyItems(c, req.ID, body, f.itemCode, f.msg)
		return
	case f.drop:
		c.close()
		return
	}
	out, err := n.apply(c, req.Op, body)
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-c.closed:
		}
	}
	switch {
	case f.dropAfter:
		c.close()
		return
	case f.codeAfter != wire.CodeOK:
		n.reply(c, wire.Response{ID: req.ID, Code: f.codeAfter, Error: "injected after apply"})
		return
	}
	if err != nil {
		n.reply(c, wire.ErrorResponse(req.ID, err))
		return
	}
	resp, err := wire.NewResponse(req.ID, out)
	if err != nil {
		resp = wire.ErrorResponse(req.ID, err)
	}
	n.reply(c, resp)
}

// replyItems answers a send or ack with code for every item.
func (n *fakeNode) replyItems(c *fakeConn, id uint64, body any, code wire.Code, msg string) {
	var out any
	switch b := body.(type) {
	case *wire.SendRequest:
		r := wire.SendResponse{}
		for range b.Messages {
			r.Results = append(r.Results, wire.SendResult{Code: code, Error: msg})
		}
		out = r
	case *wire.AckRequest:
		r := wire.AckResponse{}
		for range b.Receipts {
			r.Results = append(r.Results, wire.ItemResult{Code: code, Error: msg})
		}
		out = r
	case *wire.ReceiveRequest: // its acks; nothing is leased
		r := wire.ReceiveResponse{}
		for range b.Acks {
			r.AckResults = append(r.AckResults, wire.ItemResult{Code: code, Error: msg})
		}
		out = r
	default:
		n.reply(c, wire.ErrorResponse(id, wire.Errorf(wire.CodeMalformed, "no items in %T", body)))
		return
	}
	resp, err := wire.NewResponse(id, out)
	if err != nil {
		resp = wire.ErrorResponse(id, err)
	}
	n.reply(c, resp)
}

func (n *fakeNode) reply(c *fakeConn, resp wire.Response) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = wire.WriteFrame(c.nc, resp)
}

// apply routes a request to its operation, checking leadership.
func (n *fakeNode) apply(c *fakeConn, op wire.Op, body any) (any, error) {
	fc := n.fc
	switch b := body.(type) {
	case *wire.MetadataRequest:
		return fc.metadata(b.Queue)
	case *wire.ListQueuesRequest:
		return fc.listQueues(b.Prefix), nil
	case *wire.QueueStatsRequest:
		return fc.stats(n.idx, *b)
	case *wire.CreateQueueRequest, *wire.UpdateQueueRequest, *wire.DeleteQueueRequest:
		if n.idx != 0 {
			return nil, fc.notLeader(fc.nodes[0].addr)
		}
		return fc.catalog(body)
	case *wire.ReceiveRequest:
		return fc.receive(n.idx, c, *b)
	}
	queue, part := partitionOf(body)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	p, err := fc.partLocked(queue, part)
	if err != nil {
		return nil, err
	}
	if p.leader != n.idx {
		return nil, fc.notLeaderLocked(fc.nodes[p.leader].addr)
	}
	defer fc.notifyLocked()
	return fc.partOp(p, body, time.Now())
}

func (fc *fakeCluster) notLeader(addr string) error {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.notLeaderLocked(addr)
}

func (fc *fakeCluster) notLeaderLocked(addr string) error {
	e := &wire.Error{Code: wire.CodeNotLeader, Message: "not the leader"}
	if !fc.hideLeader {
		e.Leader = addr
	}
	return e
}

// partitionOf returns the queue and partition a partition request names.
func partitionOf(body any) (string, int) {
	switch b := body.(type) {
	case *wire.SendRequest:
		return b.Queue, b.Partition
	case *wire.AckRequest:
		return b.Queue, b.Partition
	case *wire.ExtendRequest:
		return b.Queue, b.Partition
	case *wire.NackRequest:
		return b.Queue, b.Partition
	case *wire.RejectRequest:
		return b.Queue, b.Partition
	case *wire.DeadListRequest:
		return b.Queue, b.Partition
	case *wire.DeadPeekRequest:
		return b.Queue, b.Partition
	case *wire.DeadRedriveRequest:
		return b.Queue, b.Partition
	case *wire.DeadDeleteRequest:
		return b.Queue, b.Partition
	case *wire.PurgeRequest:
		return b.Queue, b.Partition
	}
	return "", -1
}

// receive leases messages, long-polling when asked to.
func (fc *fakeCluster) receive(node int, c *fakeConn, req wire.ReceiveRequest) (any, error) {
	deadline := time.Now().Add(min(req.Wait, wire.ReceiveWaitMax))
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var acks []wire.ItemResult
	for {
		p, err := fc.partLocked(req.Queue, req.Partition)
		if err != nil {
			return nil, err
		}
		if p.leader != node {
			return nil, fc.notLeaderLocked(fc.nodes[p.leader].addr)
		}
		if acks == nil && len(req.Acks) > 0 && !fc.receiveIgnoresAcks {
			acks = make([]wire.ItemResult, 0, len(req.Acks))
			for _, r := range req.Acks {
				acks = append(acks, item(p.settle(r, func(m *fakeMsg) { p.remove(m) })))
			}
			fc.ackRides += len(req.Acks)
		}
		now := time.Now()
		ds := fc.leaseLocked(p, req, now)
		if len(ds) > 0 || !now.Before(deadline) || fc.closed {
			if len(ds) > 0 {
				fc.notifyLocked()
			}
			return wire.ReceiveResponse{Messages: ds, AckResults: acks}, nil
		}
		changed := fc.changed
		fc.polls++
		fc.mu.Unlock()
		t := time.NewTimer(min(time.Until(deadline), 50*time.Millisecond))
		select {
		case <-changed:
		case <-t.C:
		case <-c.closed:
		}
		t.Stop()
		fc.mu.Lock()
		fc.polls--
		select {
		case <-c.closed:
			return wire.ReceiveResponse{AckResults: acks}, nil
		default:
		}
	}
}

// waitingPolls returns how many long polls are waiting.
func (fc *fakeCluster) waitingPolls() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.polls
}

// leases returns the current and the highest number of leases held.
func (fc *fakeCluster) leases() (now, high int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.inFlight, fc.inFlightHi
}
