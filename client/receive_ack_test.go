package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// consumeAll runs Consume over n sent messages until each was handled and
// returns the settle outcomes by message id.
func consumeAll(t *testing.T, fc *fakeCluster, n int, opts client.ConsumeOptions) map[string][]client.SettleOutcome {
	t.Helper()
	q := dial(t, fc).Queue("q")
	msgs := make([]client.Message, n) // ids drawn by the client: spread over the partitions
	if _, err := q.SendBatch(testCtx(t, 5*time.Second), msgs); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	var mu sync.Mutex
	outcomes := map[string][]client.SettleOutcome{}
	opts.OnSettle = func(o client.SettleOutcome) {
		mu.Lock()
		outcomes[o.Delivery.ID] = append(outcomes[o.Delivery.ID], o)
		mu.Unlock()
	}
	stop := consume(t, q, func(context.Context, *client.Delivery) error { return nil }, opts)
	testwait.Until(t, 10*time.Second, "every message settled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(outcomes) == n
	})
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, os := range outcomes {
		if len(os) != 1 || os[0].Action != client.SettleAck || os[0].Err != nil {
			t.Fatalf("%s settled %+v, want one confirmed ack", id, os)
		}
	}
	if held, _ := fc.leases(); held != 0 {
		t.Fatalf("%d leases still held after every ack was confirmed", held)
	}
	return outcomes
}

func TestClient_ConsumeAcksRideOnReceives(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	const n, prefetch = 400, 32
	consumeAll(t, fc, n, client.ConsumeOptions{Concurrency: 8, Prefetch: prefetch, Wait: 50 * time.Millisecond})
	if ackedReceipts(fc) != n {
		t.Fatalf("%d receipts acked for %d messages", ackedReceipts(fc), n)
	}
	if rides := ridingAcks(fc); rides < n/2 {
		t.Fatalf("%d of %d acks rode on receives", rides, n)
	}
	if _, high := fc.leases(); high > prefetch {
		t.Fatalf("%d leases held at once, prefetch %d", high, prefetch)
	}
}

func TestClient_ConsumeAcksAgainWhenReceivesIgnoreAcks(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	fc.receiveIgnoresAcks = true // as a server before acks rode on receives
	consumeAll(t, fc, 100, client.ConsumeOptions{Concurrency: 4, Prefetch: 16, Wait: 50 * time.Millisecond})
	if ridingAcks(fc) == 0 {
		t.Fatal("no ack rode on a receive")
	}
}

func TestClient_ReceiveAckFencesPerItemAndStillLeases(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	q := dial(t, fc).Queue("q")
	ctx := testCtx(t, 10*time.Second)
	send := func(ids ...string) {
		t.Helper()
		msgs := make([]client.Message, len(ids))
		for i, id := range ids {
			msgs[i] = client.Message{ID: id}
		}
		if _, err := q.SendBatch(ctx, msgs); err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
	}
	p0, p1 := idFor(0, 2, "a"), idFor(1, 2, "b")
	send(p0, p1)
	old, err := q.Receive(ctx, client.ReceiveOptions{Max: 2, Visibility: 30 * time.Millisecond})
	if err != nil || len(old) != 2 {
		t.Fatalf("Receive: %v %d", err, len(old))
	}
	var again []*client.Delivery // the same messages, leased again
	testwait.Until(t, 5*time.Second, "the leases to end and the messages to come back", func() bool {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 2, Visibility: time.Minute})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		again = append(again, ds...)
		return len(again) == 2
	})
	send(idFor(0, 2, "c"), idFor(1, 2, "d"))
	acks := append(append([]*client.Delivery{}, old...), again...)
	ds, errs, err := q.ReceiveAck(ctx, acks, client.ReceiveOptions{Max: 10, Visibility: time.Minute})
	if err != nil || len(ds) != 2 || len(errs) != 4 {
		t.Fatalf("ReceiveAck: %v, %d deliveries, %d ack errors", err, len(ds), len(errs))
	}
	for i, e := range errs {
		if i < 2 && !errors.Is(e, client.ErrLeaseLost) {
			t.Fatalf("stale ack %d: %v, want ErrLeaseLost", i, e)
		}
		if i >= 2 && e != nil {
			t.Fatalf("ack %d: %v", i, e)
		}
	}
	if rides, reqs := ridingAcks(fc), len(fc.requests(wire.OpAck)); rides != 4 || reqs != 0 {
		t.Fatalf("%d acks rode on receives, %d ack requests; want 4 and 0", rides, reqs)
	}

	// With Max reached at the first partition, the other's acks go alone.
	send(idFor(0, 2, "e"))
	more, errs, err := q.ReceiveAck(ctx, ds, client.ReceiveOptions{Max: 1, Visibility: time.Minute})
	if err != nil || len(more) != 1 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("ReceiveAck: %v, %d deliveries, ack errors %v", err, len(more), errs)
	}
	if reqs := fc.requests(wire.OpAck); len(reqs) != 1 || len(reqs[0].body.(*wire.AckRequest).Receipts) != 1 {
		t.Fatalf("ack requests %+v, want one of the other partition's receipt", reqs)
	}
}

func TestClient_ConsumeAckWithoutARideGoesAloneSoon(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 1})
	q := dial(t, fc).Queue("q")
	if _, err := q.Send(testCtx(t, 5*time.Second), client.Message{ID: "only"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	settled := make(chan client.SettleOutcome, 1)
	// The poller long-polls for the free slots while the handler runs, so
	// the ack has no receive to ride on for the whole Wait. The handler
	// returns once that long poll has reached the node: before it, the
	// ack could ride on the poll when the poller is slow to send it.
	handler := func(context.Context, *client.Delivery) error {
		deadline := time.Now().Add(5 * time.Second)
		for len(fc.requests(wire.OpReceive)) < 2 {
			if time.Now().After(deadline) {
				t.Error("the poller sent no long poll while the handler ran")
				break
			}
			time.Sleep(time.Millisecond) // polling the fake's log, with a deadline
		}
		return nil
	}
	stop := consume(t, q, handler,
		client.ConsumeOptions{Prefetch: 4, Wait: 20 * time.Second, OnSettle: func(o client.SettleOutcome) { settled <- o }})
	defer stop()
	select {
	case o := <-settled:
		if o.Err != nil || o.Action != client.SettleAck {
			t.Fatalf("outcome %+v", o)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the ack waited for a receive to ride on")
	}
	if reqs := fc.requests(wire.OpAck); len(reqs) != 1 || ridingAcks(fc) != 0 {
		t.Fatalf("%d ack requests, %d acks on receives; want the ack alone", len(reqs), ridingAcks(fc))
	}
}
