package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// consume runs q.Consume in the background; the returned stop cancels it
// and returns its error.
func consume(t *testing.T, q *client.Queue, h func(context.Context, *client.Delivery) error, opts client.ConsumeOptions) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Consume(ctx, h, opts) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Consume did not return after cancellation")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestClient_ConsumeSettlesByHandlerResult(t *testing.T) {
	fc := newFake(t, 2)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 5*time.Second)
	if _, err := q.SendBatch(ctx, []client.Message{
		{ID: "ok", Body: []byte("ok")},
		{ID: "flaky", Body: []byte("flaky")},
		{ID: "poison", Body: []byte("poison")},
	}); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	stop := consume(t, q, func(_ context.Context, d *client.Delivery) error {
		mu.Lock()
		attempts[d.ID]++
		n := attempts[d.ID]
		mu.Unlock()
		switch {
		case d.ID == "poison":
			return client.Reject(errors.New("cannot parse"))
		case d.ID == "flaky" && n == 1:
			return errors.New("database down")
		}
		return nil
	}, client.ConsumeOptions{Concurrency: 2, Wait: 50 * time.Millisecond})

	testwait.Until(t, 5*time.Second, "two acks and a reject", func() bool {
		return ackedReceipts(fc) == 2 && len(fc.requests(wire.OpReject)) == 1
	})
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	nacks := fc.requests(wire.OpNack)
	if len(nacks) != 1 {
		t.Fatalf("%d nacks, want 1", len(nacks))
	}
	nack := nacks[0].body.(*wire.NackRequest).Items[0]
	if nack.ExplicitDelay || nack.Reason != "database down" {
		t.Fatalf("nack %+v, want the queue's backoff and the error as reason", nack)
	}
	rej := fc.requests(wire.OpReject)[0].body.(*wire.RejectRequest).Items[0]
	if rej.Reason != "cannot parse" {
		t.Fatalf("reject reason %q", rej.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts["ok"] != 1 || attempts["flaky"] != 2 || attempts["poison"] != 1 {
		t.Fatalf("attempts %v", attempts)
	}
}

func TestClient_ConsumeRespectsPrefetch(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 3})
	c := dial(t, fc)
	q := c.Queue("q")
	if _, err := q.SendBatch(testCtx(t, 5*time.Second), make([]client.Message, 20)); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	const concurrency, prefetch = 2, 5
	gate := make(chan struct{})
	var running, handled atomic.Int32
	stop := consume(t, q, func(ctx context.Context, _ *client.Delivery) error {
		running.Add(1)
		defer running.Add(-1)
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		handled.Add(1)
		return nil
	}, client.ConsumeOptions{Concurrency: concurrency, Prefetch: prefetch, Wait: 50 * time.Millisecond})

	testwait.Until(t, 5*time.Second, "the prefetch to fill", func() bool {
		n, _ := fc.leases()
		return n == prefetch && running.Load() == concurrency
	})
	close(gate)
	testwait.Until(t, 5*time.Second, "every message handled", func() bool { return handled.Load() == 20 })
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if _, high := fc.leases(); high > prefetch {
		t.Fatalf("%d leases held at once, prefetch %d", high, prefetch)
	}
	testwait.Until(t, 5*time.Second, "all acks", func() bool { return ackedReceipts(fc) == 20 })
}

func TestClient_ConsumePrefetchBoundsLongPolls(t *testing.T) {
	fc := newFake(t, 2)
	fc.addQueue("q", wire.QueueConfig{Partitions: 4})
	c := dial(t, fc)
	q := c.Queue("q")
	const prefetch = 2
	gate := make(chan struct{})
	var handled atomic.Int32
	stop := consume(t, q, func(ctx context.Context, _ *client.Delivery) error {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		handled.Add(1)
		return nil
	}, client.ConsumeOptions{Prefetch: prefetch, Wait: 2 * time.Second})
	// Only as many partitions as there are free slots are polled.
	testwait.Until(t, 5*time.Second, "long polls", func() bool { return fc.waitingPolls() == prefetch })
	// Messages land on every partition at once.
	sendTo(t, q, 4, 0, 1, 2, 3, 0, 1, 2, 3)
	testwait.Until(t, 5*time.Second, "the prefetch to fill", func() bool {
		n, _ := fc.leases()
		return n == prefetch
	})
	close(gate)
	testwait.Until(t, 10*time.Second, "every message handled", func() bool { return handled.Load() == 8 })
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if _, high := fc.leases(); high > prefetch {
		t.Fatalf("%d leases held at once, prefetch %d", high, prefetch)
	}
}

func TestClient_ConsumeAutoExtendAndStopGivesBack(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	q := c.Queue("q")
	if _, err := q.SendBatch(testCtx(t, 5*time.Second), make([]client.Message, 3)); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	started := make(chan struct{}, 3)
	// A lease short enough to be extended twice soon, long enough that a
	// loaded machine's scheduling does not let it lapse between
	// extensions (60 ms did once: the message came back, and its second
	// delivery was nacked too).
	stop := consume(t, q, func(ctx context.Context, _ *client.Delivery) error {
		started <- struct{}{}
		<-ctx.Done() // runs until the consumer stops
		return ctx.Err()
	}, client.ConsumeOptions{Prefetch: 3, Visibility: 400 * time.Millisecond, AutoExtend: true,
		Wait: 50 * time.Millisecond})
	<-started
	testwait.Until(t, 5*time.Second, "two extensions", func() bool { return len(fc.requests(wire.OpExtend)) >= 2 })
	for _, r := range fc.requests(wire.OpExtend) {
		if it := r.body.(*wire.ExtendRequest).Items[0]; it.Visibility != 400*time.Millisecond {
			t.Fatalf("extend by %v", it.Visibility)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	// The running handler's delivery is nacked with its error; the two
	// prefetched ones are released (not counted as attempts) without
	// running the handler.
	var released, items int
	for _, r := range fc.requests(wire.OpNack) {
		for _, it := range r.body.(*wire.NackRequest).Items {
			items++
			if it.Release {
				released++
			}
		}
	}
	if items != 3 || released != 2 {
		t.Fatalf("%d nacked items (%d released), want 3 (2 released)", items, released)
	}
	if len(started) != 0 {
		t.Fatalf("the handler ran for a prefetched delivery after stop")
	}
}

func TestClient_ConsumeLeaseLostCancelsHandler(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	q := c.Queue("q")
	if _, err := q.Send(testCtx(t, 5*time.Second), client.Message{}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		if op == wire.OpExtend {
			return fault{code: wire.CodeLeaseLost}
		}
		return fault{}
	})
	cause := make(chan error, 1)
	consume(t, q, func(ctx context.Context, _ *client.Delivery) error {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, client.ConsumeOptions{Visibility: 40 * time.Millisecond, AutoExtend: true, Wait: 50 * time.Millisecond})
	select {
	case err := <-cause:
		if !errors.Is(err, client.ErrLeaseLost) {
			t.Fatalf("handler context cause %v, want ErrLeaseLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled after the lease was lost")
	}
}

func TestClient_ConsumeFatalErrors(t *testing.T) {
	fc := newFake(t, 1)
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	err := c.Queue("missing").Consume(ctx, func(context.Context, *client.Delivery) error { return nil }, client.ConsumeOptions{})
	if !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("Consume of a missing queue: %v", err)
	}
	if err := c.Queue("q").Consume(ctx, nil, client.ConsumeOptions{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Consume with a nil handler: %v", err)
	}
}

// TestClient_ConsumeAutoPrefetchFollowsTheHandlers checks the prefetch
// Consume chooses when Prefetch is 0: fast handlers get many leases at
// once (far more than four per handler), slow ones only as many as they
// finish within a quarter of the lease, so that none waits its lease out.
func TestClient_ConsumeAutoPrefetchFollowsTheHandlers(t *testing.T) {
	t.Run("fast handlers", func(t *testing.T) {
		fc := newFake(t, 1)
		fc.addQueue("q", wire.QueueConfig{Partitions: 1})
		q := dial(t, fc).Queue("q")
		const total = 1500
		for range total / 500 {
			if _, err := q.SendBatch(testCtx(t, 5*time.Second), make([]client.Message, 500)); err != nil {
				t.Fatalf("SendBatch: %v", err)
			}
		}
		var handled atomic.Int32
		stop := consume(t, q, func(context.Context, *client.Delivery) error {
			handled.Add(1)
			return nil
		}, client.ConsumeOptions{Concurrency: 2, Wait: 50 * time.Millisecond})
		testwait.Until(t, 20*time.Second, "every message handled", func() bool { return handled.Load() == total })
		if err := stop(); err != nil {
			t.Fatalf("Consume: %v", err)
		}
		if _, high := fc.leases(); high < client.DefaultPrefetchMax/2 || high > client.DefaultPrefetchMax {
			t.Fatalf("%d leases held at once, want %d..%d", high, client.DefaultPrefetchMax/2, client.DefaultPrefetchMax)
		}
	})
	t.Run("slow handlers", func(t *testing.T) {
		fc := newFake(t, 1)
		const vis, work = 2 * time.Second, 100 * time.Millisecond
		fc.addQueue("q", wire.QueueConfig{Partitions: 1, VisibilityTimeout: vis})
		q := dial(t, fc).Queue("q")
		const total, concurrency = 30, 2
		if _, err := q.SendBatch(testCtx(t, 5*time.Second), make([]client.Message, total)); err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
		var handled, expired atomic.Int32
		stop := consume(t, q, func(ctx context.Context, _ *client.Delivery) error {
			select { // the work the handler does
			case <-time.After(work):
			case <-ctx.Done():
				return ctx.Err()
			}
			handled.Add(1)
			return nil
		}, client.ConsumeOptions{Concurrency: concurrency, Wait: 50 * time.Millisecond,
			OnSettle: func(o client.SettleOutcome) {
				if o.Action == client.SettleExpired {
					expired.Add(1)
				}
			}})
		testwait.Until(t, 20*time.Second, "every message handled", func() bool { return handled.Load() == total })
		if err := stop(); err != nil {
			t.Fatalf("Consume: %v", err)
		}
		// A quarter of the lease holds 5 runs of each handler: 10 leases.
		most := concurrency * int(vis/4/work)
		if _, high := fc.leases(); high > most {
			t.Fatalf("%d leases held at once, want at most %d", high, most)
		}
		if n := expired.Load(); n != 0 {
			t.Fatalf("%d leases ran out waiting for a handler", n)
		}
	})
}
