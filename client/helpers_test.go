package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/wire"
)

// dial connects a client to the fake with fast retries; it is closed when
// the test ends.
func dial(t *testing.T, fc *fakeCluster, opts ...client.Option) *client.Client {
	t.Helper()
	opts = append([]client.Option{client.WithRetryBackoff(time.Millisecond, 10*time.Millisecond)}, opts...)
	c, err := client.Dial(testCtx(t, 5*time.Second), fc.Addrs(), opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testCtx returns a context cancelled after d or when the test ends.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// idFor returns an id that routes to partition part of n.
func idFor(part, n int, prefix string) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if wire.PartitionFor(id, n) == part {
			return id
		}
	}
}

// sentIDs returns the message ids of every recorded send request.
func sentIDs(fc *fakeCluster) [][]string {
	var out [][]string
	for _, r := range fc.requests(wire.OpSend) {
		var ids []string
		for _, m := range r.body.(*wire.SendRequest).Messages {
			ids = append(ids, m.ID)
		}
		out = append(out, ids)
	}
	return out
}

// receiveAll receives until n messages arrived or the deadline passes.
func receiveAll(t *testing.T, q *client.Queue, n int) []*client.Delivery {
	t.Helper()
	ctx := testCtx(t, 5*time.Second)
	var out []*client.Delivery
	for len(out) < n {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: min(n-len(out), client.MaxReceive), Wait: time.Second})
		if err != nil {
			t.Fatalf("Receive after %d of %d: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	return out
}

// ackedReceipts counts the receipts of every recorded ack request and the
// acks receives carried.
func ackedReceipts(fc *fakeCluster) int {
	n := 0
	for _, r := range fc.requests(wire.OpAck) {
		n += len(r.body.(*wire.AckRequest).Receipts)
	}
	return n + ridingAcks(fc)
}

// ridingAcks counts the receipts receives carried as acks.
func ridingAcks(fc *fakeCluster) int {
	n := 0
	for _, r := range fc.requests(wire.OpReceive) {
		n += len(r.body.(*wire.ReceiveRequest).Acks)
	}
	return n
}
