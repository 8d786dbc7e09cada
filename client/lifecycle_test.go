package client_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

func TestClient_SendCancellationReturnsPromptly(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	never := make(chan struct{})
	defer close(never)
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		if op == wire.OpSend {
			return fault{hold: never}
		}
		return fault{}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Queue("q").Send(ctx, client.Message{Body: []byte("x")})
		done <- err
	}()
	testwait.Until(t, 5*time.Second, "the send to reach the server", func() bool { return len(fc.requests(wire.OpSend)) == 1 })
	cancel()
	select {
	case err := <-done:
		// The server has the request: its outcome is unknown.
		if !errors.Is(err, client.ErrUnconfirmed) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Send: %v, want ErrUnconfirmed and context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Send did not return after cancellation")
	}
}

func TestClient_NoGoroutineLeakAfterClose(t *testing.T) {
	fc := newFake(t, 3)
	fc.addQueue("q", wire.QueueConfig{Partitions: 4})
	base := runtime.NumGoroutine()

	c, err := client.Dial(testCtx(t, 5*time.Second), fc.Addrs(), client.WithRetryBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	q := c.Queue("q")
	ctx := testCtx(t, 10*time.Second)
	if _, err := q.SendBatch(ctx, make([]client.Message, 20)); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	receiveAll(t, q, 20)
	// Leave long polls running in the background, a consumer running,
	// and a cancelled receive behind.
	rctx, rcancel := context.WithCancel(ctx)
	go func() {
		_, _ = q.Receive(rctx, client.ReceiveOptions{Wait: 20 * time.Second})
	}()
	testwait.Until(t, 5*time.Second, "long polls", func() bool { return fc.waitingPolls() == 4 })
	rcancel()
	cctx, ccancel := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() {
		consumed <- c.Queue("q").Consume(cctx, func(context.Context, *client.Delivery) error { return nil },
			client.ConsumeOptions{Concurrency: 3, Prefetch: 4, Wait: 20 * time.Second})
	}()
	testwait.Until(t, 5*time.Second, "the consumer's polls", func() bool { return fc.waitingPolls() >= 8 })
	ccancel()
	if err := <-consumed; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	c.Close()
	if _, err := q.Receive(ctx, client.ReceiveOptions{}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Receive after Close: %v", err)
	}
	defer func() {
		if t.Failed() {
			buf := make([]byte, 1<<16)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
	}()
	testwait.UntilNil(t, 5*time.Second, "the goroutines to end after Close", func() error {
		if n := runtime.NumGoroutine(); n > base {
			return fmt.Errorf("%d goroutines after Close, %d before Dial", n, base)
		}
		return nil
	})
}

func TestClient_ConcurrentUse(t *testing.T) {
	fc := newFake(t, 3)
	fc.addQueue("q", wire.QueueConfig{Partitions: 4})
	c := dial(t, fc)
	ctx := testCtx(t, 20*time.Second)
	q := c.Queue("q")
	// Connections drop now and then under the load. A dropped connection
	// also loses the answers of receives in flight on it: their leases
	// (short here) expire and the messages come again.
	var mu sync.Mutex
	n := 0
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		mu.Lock()
		defer mu.Unlock()
		n++
		if op == wire.OpSend && n%37 == 0 {
			return fault{dropAfter: true}
		}
		return fault{}
	})
	const producers, perProducer = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, producers*perProducer)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			produce(ctx, q, p, perProducer, errs)
		}()
	}
	seen := make(map[string]int)
	var seenMu sync.Mutex
	rctx, rcancel := context.WithCancel(ctx)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			receiveAndAck(rctx, q, errs, func(ds []*client.Delivery) {
				seenMu.Lock()
				defer seenMu.Unlock()
				for _, d := range ds {
					seen[d.ID]++
				}
			})
		}()
	}
	testwait.Until(t, 15*time.Second, "every message received", func() bool {
		seenMu.Lock()
		defer seenMu.Unlock()
		return len(seen) == producers*perProducer
	})
	rcancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("error under concurrent use: %v", err)
	}
	for id := range seen {
		var p, i int
		if _, err := fmt.Sscanf(id, "p%d-%d", &p, &i); err != nil || p >= producers || i >= perProducer {
			t.Errorf("unexpected message %s", id)
		}
	}
}

// produce sends perProducer grouped messages with ids "p<p>-<i>".
func produce(ctx context.Context, q *client.Queue, p, perProducer int, errs chan<- error) {
	for i := range perProducer {
		m := client.Message{ID: fmt.Sprintf("p%d-%d", p, i), Group: fmt.Sprintf("g%d", i%5), Body: []byte("x")}
		if _, err := q.Send(ctx, m); err != nil {
			errs <- err
		}
	}
}

// receiveAndAck receives and acks until ctx is done, reporting what it got.
func receiveAndAck(ctx context.Context, q *client.Queue, errs chan<- error, got func([]*client.Delivery)) {
	for ctx.Err() == nil {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 7, Wait: 20 * time.Millisecond,
			Visibility: 300 * time.Millisecond})
		if err != nil {
			continue
		}
		got(ds)
		for _, err := range q.AckBatch(context.WithoutCancel(ctx), ds) {
			// A lease that ran out under the race detector's slowness is
			// lost, and that message comes again.
			if err != nil && !errors.Is(err, client.ErrLeaseLost) {
				errs <- fmt.Errorf("ack: %w", err)
			}
		}
	}
}
