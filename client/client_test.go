package client_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/wire"
)

func TestClient_SendReceiveAckRoundTrip(t *testing.T) {
	fc := newFake(t, 3)
	fc.addQueue("orders", wire.QueueConfig{Partitions: 2})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("orders")

	res, err := q.Send(ctx, client.Message{Group: "g1", Headers: map[string]string{"k": "v"}, Body: []byte("hello")})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(res.ID) != 26 || res.Seq != 1 || res.Duplicate || res.Partition != wire.PartitionFor("g1", 2) {
		t.Fatalf("Send result %+v", res)
	}
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 10})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %v, %d deliveries", err, len(ds))
	}
	d := ds[0]
	if d.ID != res.ID || string(d.Body) != "hello" || d.Headers["k"] != "v" || d.Group != "g1" ||
		d.Attempt != 1 || d.Seq != res.Seq || d.Partition != res.Partition {
		t.Fatalf("delivery %+v does not match send %+v", d, res)
	}
	if d.EnqueuedAt.IsZero() || !d.Deadline.After(d.EnqueuedAt) {
		t.Fatalf("delivery times %v %v", d.EnqueuedAt, d.Deadline)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := d.Ack(ctx); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("second Ack: %v, want ErrMessageNotFound", err)
	}
	ds, err = q.Receive(ctx, client.ReceiveOptions{})
	if err != nil || len(ds) != 0 {
		t.Fatalf("Receive after ack: %v, %d deliveries", err, len(ds))
	}
}

func TestClient_RoutesByGroupAndID(t *testing.T) {
	fc := newFake(t, 2)
	fc.addQueue("r", wire.QueueConfig{Partitions: 4})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)

	var msgs []client.Message
	groups := []string{"alice", "bob", "carol", "dave", "erin", "frank"}
	for i := range 30 {
		m := client.Message{Body: []byte{byte(i)}}
		if i%2 == 0 {
			m.Group = groups[i%len(groups)]
		}
		msgs = append(msgs, m)
	}
	res, err := c.Queue("r").SendBatch(ctx, msgs)
	if err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	used := map[int]bool{}
	groupPart := map[string]int{}
	for i, r := range res {
		want := wire.PartitionFor(r.ID, 4)
		if g := msgs[i].Group; g != "" {
			want = wire.PartitionFor(g, 4)
			if p, ok := groupPart[g]; ok && p != r.Partition {
				t.Fatalf("group %s in partitions %d and %d", g, p, r.Partition)
			}
			groupPart[g] = r.Partition
		}
		if r.Partition != want {
			t.Fatalf("message %d in partition %d, want %d", i, r.Partition, want)
		}
		used[r.Partition] = true
	}
	if len(used) < 3 {
		t.Fatalf("30 messages used only partitions %v", used)
	}
	// Each send request carried one partition's messages only.
	for _, r := range fc.requests(wire.OpSend) {
		req := r.body.(*wire.SendRequest)
		for _, m := range req.Messages {
			key := m.Group
			if key == "" {
				key = m.ID
			}
			if wire.PartitionFor(key, 4) != req.Partition {
				t.Fatalf("message %s sent to partition %d", m.ID, req.Partition)
			}
		}
	}
	if n := len(fc.requests(wire.OpSend)); n != len(used) {
		t.Fatalf("%d send requests for %d partitions", n, len(used))
	}
}

func TestClient_FollowsNotLeaderRedirect(t *testing.T) {
	fc := newFake(t, 3)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	// The client cached node 0 as the leader; leadership moves to node 2.
	fc.setLeader("q", 0, 2)
	if _, err := c.Queue("q").Send(ctx, client.Message{Body: []byte("x")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := fc.requests(wire.OpSend)
	if len(reqs) != 2 || reqs[0].node != 0 || reqs[1].node != 2 {
		t.Fatalf("send requests went to %v, want node 0 then node 2", nodesOf(reqs))
	}
	// The redirect was remembered.
	if _, err := c.Queue("q").Send(ctx, client.Message{Body: []byte("y")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if reqs := fc.requests(wire.OpSend); len(reqs) != 3 || reqs[2].node != 2 {
		t.Fatalf("send requests went to %v", nodesOf(reqs))
	}
}

func TestClient_NotLeaderWithoutAddressRefreshesMetadata(t *testing.T) {
	fc := newFake(t, 3)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	fc.mu.Lock()
	fc.hideLeader = true
	fc.mu.Unlock()
	fc.setLeader("q", 0, 1)
	before := len(fc.requests(wire.OpMetadata))
	if _, err := c.Queue("q").Send(ctx, client.Message{Body: []byte("x")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(fc.requests(wire.OpMetadata)) == before {
		t.Fatal("no metadata refresh after a not-leader answer without a leader")
	}
	if reqs := fc.requests(wire.OpSend); reqs[len(reqs)-1].node != 1 {
		t.Fatalf("send requests went to %v, want node 1 last", nodesOf(reqs))
	}
}

func TestClient_UnknownQueue(t *testing.T) {
	fc := newFake(t, 1)
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	_, err := c.Queue("nope").Send(ctx, client.Message{Body: []byte("x")})
	if !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("Send to a missing queue: %v", err)
	}
	// A queue created after the client started is found by a refresh.
	fc.addQueue("late", wire.QueueConfig{})
	if _, err := c.Queue("late").Send(ctx, client.Message{Body: []byte("x")}); err != nil {
		t.Fatalf("Send to a new queue: %v", err)
	}
	if _, err := c.Queue("nope").Receive(ctx, client.ReceiveOptions{}); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("Receive from a missing queue: %v", err)
	}
}

func TestClient_DialFailsWithoutReachableSeed(t *testing.T) {
	fc := newFake(t, 1)
	addr := fc.Addrs()[0]
	fc.Close()
	_, err := client.Dial(testCtx(t, 2*time.Second), []string{addr}, client.WithDialTimeout(200*time.Millisecond))
	if err == nil {
		t.Fatal("Dial succeeded against a closed server")
	}
	if _, err := client.Dial(testCtx(t, time.Second), nil); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Dial without seeds: %v", err)
	}
}

func TestClient_DialSkipsDeadSeed(t *testing.T) {
	dead := newFake(t, 1)
	deadAddr := dead.Addrs()[0]
	dead.Close()
	fc := newFake(t, 2)
	fc.addQueue("q", wire.QueueConfig{})
	c, err := client.Dial(testCtx(t, 5*time.Second), append([]string{deadAddr}, fc.Addrs()...),
		client.WithClientName("skipper"))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	if _, err := c.Queue("q").Send(testCtx(t, 5*time.Second), client.Message{Body: []byte("x")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

func TestClient_DialSkipsSilentSeed(t *testing.T) {
	// A listener that accepts and never answers the handshake.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
		}
	}()
	fc := newFake(t, 1)
	start := time.Now()
	c, err := client.Dial(testCtx(t, 5*time.Second), []string{ln.Addr().String(), fc.Addrs()[0]},
		client.WithDialTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.Close()
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("Dial took %v past a silent seed", el)
	}
}

func TestClient_ClosedClient(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	if q != c.Queue("q") || q.Name() != "q" {
		t.Fatal("Queue handles differ for one name")
	}
	c.Close()
	c.Close()
	if _, err := q.Send(ctx, client.Message{}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	if _, err := q.Receive(ctx, client.ReceiveOptions{}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Receive after Close: %v", err)
	}
	if err := c.CreateQueue(ctx, "x"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("CreateQueue after Close: %v", err)
	}
}

func nodesOf(reqs []fakeReq) []int {
	var out []int
	for _, r := range reqs {
		out = append(out, r.node)
	}
	return out
}
