package transport

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// groupCounts returns how many appends g handed straight to a waiting raft
// and whether its drain goroutine runs.
func groupCounts(g *BoundedTransport) (direct uint64, draining bool) {
	gt := g.Transport.(*GroupTransport)
	gt.mu.Lock()
	defer gt.mu.Unlock()
	return gt.direct, gt.draining
}

// TestGroup_AppendsAnsweredByRaftDirectly: an append reaching a group
// whose raft waits for RPCs goes to raft at once, carries a Reply function
// (raft answers by writing the answer itself, with no RespChan), and is
// answered on the sender's side.
func TestGroup_AppendsAnsweredByRaftDirectly(t *testing.T) {
	p := newSharedPair(t, nil)
	ga, gb := mustSharedGroup(t, p.a, "g1"), mustSharedGroup(t, p.b, "g1")
	gt := gb.Transport.(*GroupTransport)
	const n = 30
	served := make(chan error, 1)
	go func() {
		for i := range uint64(n) {
			rpc := <-gt.Consumer()
			if rpc.Reply == nil || rpc.RespChan != nil {
				served <- fmt.Errorf("append %d: Reply set %v, RespChan set %v; want only Reply", i, rpc.Reply != nil, rpc.RespChan != nil)
				return
			}
			answerRPC(rpc, 0)
		}
		served <- nil
	}()
	for i := range uint64(n) {
		var r raft.AppendEntriesResponse
		if err := ga.AppendEntries("b", p.target(), appendReq(2, i, 1, 64), &r); err != nil || !r.Success || r.LastLog != i+1 {
			t.Fatalf("append %d: %+v, %v", i, r, err)
		}
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	// raft waits in Consumer before each append arrives, except when the
	// reader gets there first; most must have gone straight to it.
	if direct, _ := groupCounts(gb); direct < n/2 {
		t.Fatalf("%d of %d appends handed straight to a waiting raft, want most", direct, n)
	}
}

// TestGroup_QueuedAppendsReachRaftInOrder: appends that arrive while raft
// handles an earlier one are queued and handed over in arrival order, and
// every one is answered, in order.
func TestGroup_QueuedAppendsReachRaftInOrder(t *testing.T) {
	p := newSharedPair(t, nil)
	ga, gb := mustSharedGroup(t, p.a, "g1"), mustSharedGroup(t, p.b, "g1")
	gt := gb.Transport.(*GroupTransport)
	pl, err := ga.AppendEntriesPipeline("b", p.target())
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	const n = 20
	sent := make(chan error, 1)
	go func() {
		for i := range uint64(n) {
			if _, err := pl.AppendEntries(appendReq(2, i, 1, 64), new(raft.AppendEntriesResponse)); err != nil {
				sent <- fmt.Errorf("append %d: %w", i, err)
				return
			}
		}
		sent <- nil
	}()
	answered := make(chan error, 1)
	go func() {
		for i := range uint64(n) {
			select {
			case f := <-pl.Consumer():
				if f.Error() != nil || !f.Response().Success || f.Request().PrevLogEntry != i {
					answered <- fmt.Errorf("answer %d: prev %d, %+v, %v", i, f.Request().PrevLogEntry, f.Response(), f.Error())
					return
				}
			case <-time.After(waitTimeout):
				answered <- fmt.Errorf("answer %d never came", i)
				return
			}
		}
		answered <- nil
	}()
	held := <-gt.Consumer() // raft is busy with the first append...
	for deadline := time.Now().Add(waitTimeout); ; {
		if _, draining := groupCounts(gb); draining {
			break // ...while the second arrives and waits in the queue's goroutine
		}
		if time.Now().After(deadline) {
			t.Fatal("the second append was never queued while raft held the first")
		}
		time.Sleep(time.Millisecond)
	}
	answerRPC(held, 0)
	for i := uint64(1); i < n; i++ {
		select {
		case rpc := <-gt.Consumer():
			if prev := rpc.Command.(*raft.AppendEntriesRequest).PrevLogEntry; prev != i {
				t.Fatalf("append %d reached raft in place %d", prev, i)
			}
			answerRPC(rpc, 0)
		case <-time.After(waitTimeout):
			t.Fatalf("append %d never reached raft", i)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}

// TestInbound_RaftNeverWaitsOnAPeerThatStoppedReading: raft's answers to
// appends are queued for the connection's answer writer, so handing them
// over returns at once even when the peer reads nothing; the requests'
// bytes stay counted until the answers are written, and once the peer
// reads, every answer arrives.
func TestInbound_RaftNeverWaitsOnAPeerThatStoppedReading(t *testing.T) {
	ours, theirs := net.Pipe() // unbuffered: every write waits for a read
	defer theirs.Close()
	s := &Shared{cfg: DefaultSharedConfig()}
	in := newInbound(s, ours, ours, classBulk)
	defer in.close()
	const n, size = 50, 100
	in.queued.Add(n * size)
	start := time.Now()
	for i := range uint64(n) {
		r := &inboundRPC{in: in, id: i + 1, kind: kindAppend, size: size}
		r.answerQueued(&raft.AppendEntriesResponse{Term: 2, LastLog: i, Success: true}, nil)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("handing over %d answers took %v with nobody reading", n, took)
	}
	if q := in.queued.Load(); q == 0 {
		t.Fatal("request bytes released before their answers were written")
	}
	r := bufio.NewReader(theirs)
	for i := range uint64(n) {
		f, err := readFrame(r, DefaultMaxFrameBytes)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		var resp raft.AppendEntriesResponse
		d := &decoder{b: f.payload}
		decodeAppendResponse(d, &resp)
		if f.kind != kindReply || f.id != i+1 || d.end() != nil || resp.LastLog != i || !resp.Success {
			t.Fatalf("answer %d: kind %d id %d %+v", i, f.kind, f.id, resp)
		}
	}
	for deadline := time.Now().Add(waitTimeout); in.queued.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d request bytes still counted after every answer was read", in.queued.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
