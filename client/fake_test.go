package client_test

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wire"
)

// fakeCluster is an in-process stand-in for a Ferry cluster: a few
// "nodes" listening on loopback TCP and speaking the wire protocol, over
// one shared state. That state is held by the state machines a real node
// runs (fake_state_test.go): a meta.FSM for the catalog and an fsm.FSM per
// partition, so the fake has no queue rule of its own to drift from
// theirs. What the fake adds is the part of a cluster that client tests
// steer: which node leads each partition (partition requests sent to
// another node get CodeNotLeader with the leader's address, catalog
// changes sent to a node other than node 0, the meta leader, too), long
// polls, and a hook that injects faults per request.
type fakeCluster struct {
	nodes []*fakeNode
	// clock stamps every command the fake applies. The client's own
	// timers (lease deadlines, buffered leases) run on the wall clock, so
	// it is time.Now unless a test sets it before any traffic.
	clock func() time.Time

	mu         sync.Mutex
	catalog    *meta.FSM             // the queues and their configs
	queues     map[string]*fakeQueue // the partitions of each catalog queue
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
	fc := &fakeCluster{clock: time.Now, catalog: meta.New(), queues: make(map[string]*fakeQueue),
		changed: make(chan struct{})}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		nd := &fakeNode{idx: i, id: fmt.Sprintf("node-%d", i), addr: ln.Addr().String(), fc: fc, ln: ln,
			conns: make(map[*fakeConn]bool)}
		fc.nodes = append(fc.nodes, nd)
		fc.register(nd)
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
	out, err := n.apply(c, body)
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
		n.reply(c, wire.ErrorResponse(req.ID, wireErrorOf(err)))
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
func (n *fakeNode) apply(c *fakeConn, body any) (any, error) {
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
		return fc.changeCatalog(body)
	case *wire.ReceiveRequest:
		return fc.receive(n.idx, c, *b)
	}
	queue, index := partitionOf(body)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	p, err := fc.leaderLocked(n.idx, queue, index)
	if err != nil {
		return nil, err
	}
	return fc.partOpLocked(p, index, body)
}

// notLeader is the not-leader error naming addr (unless hideLeader).
func (fc *fakeCluster) notLeader(addr string) error {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.notLeaderLocked(addr)
}

// notLeaderLocked is notLeader with fc.mu held.
func (fc *fakeCluster) notLeaderLocked(addr string) error {
	e := &wire.Error{Code: wire.CodeNotLeader, Message: "not the leader"}
	if !fc.hideLeader {
		e.Leader = addr
	}
	return e
}

// leaderLocked returns partition index of queue if node leads it, else
// the error a node answers.
func (fc *fakeCluster) leaderLocked(node int, queue string, index int) (*fakePart, error) {
	p, err := fc.partLocked(queue, index)
	if err != nil {
		return nil, err
	}
	if p.leader != node {
		return nil, fc.notLeaderLocked(fc.nodes[p.leader].addr)
	}
	return p, nil
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
	case *wire.PeekRequest:
		return b.Queue, b.Partition
	case *wire.DeleteMessagesRequest:
		return b.Queue, b.Partition
	}
	return "", -1
}

// receive acks the receipts a receive carries and leases messages in one
// command, as a node does, then long-polls up to the request's Wait.
//
// The waiting is the one part of a receive the fake does itself: package
// fsm has no clock or goroutines, so a node's partition does it there
// too. A poll applies another receive whenever a command changed the
// fake's state or the partition's next timer (a delay, a backoff, a lease
// deadline) is due, and answers once something is leased, the wait is
// over, its connection closed or the fake closed. Once the acks are
// applied, a failure during the wait answers them with no messages.
func (fc *fakeCluster) receive(node int, c *fakeConn, req wire.ReceiveRequest) (any, error) {
	if err := req.CheckWait(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(min(req.Wait, wire.ReceiveWaitMax))
	fc.mu.Lock()
	defer fc.mu.Unlock()
	p, err := fc.leaderLocked(node, req.Queue, req.Partition)
	if err != nil {
		return nil, err
	}
	if fc.receiveIgnoresAcks {
		req.Acks = nil
	}
	out, err := fc.receiveAckLocked(p, req)
	for err == nil && len(out.Messages) == 0 && time.Now().Before(deadline) && !fc.closed {
		if !fc.waitLocked(c, p, deadline) {
			break
		}
		if p, err = fc.leaderLocked(node, req.Queue, req.Partition); err == nil {
			req.Acks = nil
			var more wire.ReceiveResponse
			more, err = fc.receiveAckLocked(p, req)
			out.Messages = more.Messages
		}
	}
	if err != nil && out.AckResults == nil {
		return nil, err
	}
	return out, nil
}

// waitLocked waits, with fc.mu released, until the fake's state changes,
// p's next timer or the deadline is due, or c closes; it returns false
// once c is closed.
func (fc *fakeCluster) waitLocked(c *fakeConn, p *fakePart, deadline time.Time) bool {
	wait := time.Until(deadline)
	if next, ok := p.sm.NextDeadline(); ok {
		wait = min(wait, time.Duration(next-fc.clock().UnixNano()))
	}
	changed := fc.changed
	fc.polls++
	fc.mu.Unlock()
	t := time.NewTimer(max(wait, 0))
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
		return false
	default:
		return true
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
