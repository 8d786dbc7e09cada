package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

func TestClient_ConsumeAcksInBatchesAndBeforeReturning(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	c := dial(t, fc)
	q := c.Queue("q")
	const n = 300
	if _, err := q.SendBatch(testCtx(t, 5*time.Second), make([]client.Message, n)); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	// Every ack request is held a little, so acks finished meanwhile
	// gather into the next request.
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		if op == wire.OpAck {
			hold := make(chan struct{})
			time.AfterFunc(5*time.Millisecond, func() { close(hold) })
			return fault{hold: hold}
		}
		return fault{}
	})
	var handled atomic.Int32
	stop := consume(t, q, func(context.Context, *client.Delivery) error {
		handled.Add(1)
		return nil
	}, client.ConsumeOptions{Concurrency: 8, Prefetch: 32, Wait: 50 * time.Millisecond})
	testwait.Until(t, 10*time.Second, "every message handled", func() bool { return handled.Load() == n })
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	// Consume returned: every ack was answered before.
	if got := ackedReceipts(fc); got != n {
		t.Fatalf("%d receipts acked when Consume returned, want %d", got, n)
	}
	if reqs := len(fc.requests(wire.OpAck)); reqs >= n/2 {
		t.Fatalf("%d ack requests for %d messages: acks were not batched", reqs, n)
	}
	if _, high := fc.leases(); high > 32 {
		t.Fatalf("%d leases held at once, prefetch 32 (slots must be kept until the ack)", high)
	}
}
