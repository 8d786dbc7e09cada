package orders_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/examples/orders"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/testwait"
)

// ledger records what the workers did, per order id.
type ledger struct {
	mu        sync.Mutex
	fulfilled map[string]int
	settles   []client.SettleOutcome
}

func newLedger() *ledger { return &ledger{fulfilled: map[string]int{}} }

func (l *ledger) fulfil(work time.Duration) func(context.Context, orders.Order) error {
	return func(ctx context.Context, o orders.Order) error {
		select { // the order takes this long to fulfil
		case <-time.After(work):
		case <-ctx.Done():
			return ctx.Err()
		}
		l.mu.Lock()
		l.fulfilled[o.ID]++
		l.mu.Unlock()
		return nil
	}
}

func (l *ledger) onSettle(o client.SettleOutcome) {
	l.mu.Lock()
	l.settles = append(l.settles, o)
	l.mu.Unlock()
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.fulfilled)
}

// startWorker runs w until its stop channel is closed; the returned
// function stops it softly and waits for Run to return.
func startWorker(t *testing.T, ctx context.Context, w *orders.Worker) (softStop func()) {
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, stop) }()
	var once sync.Once
	softStop = func() {
		once.Do(func() {
			close(stop)
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("worker did not stop")
			}
		})
	}
	t.Cleanup(softStop)
	return softStop
}

func TestOrders_PlacedOnceFulfilledOnce(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{})
	q := fc.CreateQueue("orders")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := orders.NewIntake(q)
	for i, want := range []bool{false, true} { // the second is a retried request
		dup, err := in.Place(ctx, orders.Order{ID: "42", Amount: 1999})
		if err != nil || dup != want {
			t.Fatalf("place #%d: duplicate %v, %v; want %v", i+1, dup, err, want)
		}
	}
	l := newLedger()
	stop := startWorker(t, ctx, &orders.Worker{Queue: fc.Dial().Queue("orders"), Fulfil: l.fulfil(0), OnSettle: l.onSettle})
	testwait.Until(t, 20*time.Second, "order 42 fulfilled", func() bool { return l.count() == 1 })
	stop()
	if l.fulfilled["42"] != 1 || len(l.settles) != 1 || l.settles[0].Err != nil {
		t.Fatalf("fulfilled %v, settles %+v; want one confirmed fulfilment", l.fulfilled, l.settles)
	}
}

// TestOrders_RollingDeploySpendsNoAttempts replaces the workers four
// times while orders flow in: each new generation starts, then the old
// one stops softly. Every order must be fulfilled exactly once, at its
// first attempt (a nack or an expired lease would raise the attempt), and
// the queue must end empty.
func TestOrders_RollingDeploySpendsNoAttempts(t *testing.T) {
	const total, generations = 400, 5
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	fc.CreateQueue("orders", client.Partitions(2))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := newLedger()
	worker := func() *orders.Worker {
		return &orders.Worker{Queue: fc.Dial().Queue("orders"), Fulfil: l.fulfil(5 * time.Millisecond),
			Concurrency: 4, Grace: 20 * time.Second, OnSettle: l.onSettle}
	}
	produced := make(chan error, 1)
	go func() {
		in := orders.NewIntake(fc.Dial().Queue("orders"))
		for i := range total {
			if _, err := in.Place(ctx, orders.Order{ID: fmt.Sprint(i), Amount: i}); err != nil {
				produced <- err
				return
			}
			time.Sleep(time.Millisecond) // orders arrive over the whole deploy
		}
		produced <- nil
	}()
	stop := startWorker(t, ctx, worker())
	for g := 1; g < generations; g++ {
		at := g * total / generations / 2
		testwait.Until(t, 60*time.Second, fmt.Sprintf("%d orders fulfilled", at), func() bool { return l.count() >= at })
		next := startWorker(t, ctx, worker())
		stop()
		stop = next
	}
	if err := <-produced; err != nil {
		t.Fatalf("producer: %v", err)
	}
	testwait.Until(t, 60*time.Second, "every order fulfilled", func() bool { return l.count() == total })
	stop()

	l.mu.Lock()
	defer l.mu.Unlock()
	for id, n := range l.fulfilled {
		if n != 1 {
			t.Errorf("order %s fulfilled %d times", id, n)
		}
	}
	if len(l.settles) != total {
		t.Errorf("%d settles for %d orders", len(l.settles), total)
	}
	for _, s := range l.settles {
		if s.Action != client.SettleAck || s.Err != nil || s.Delivery.Attempt != 1 {
			t.Errorf("order %s: %s at attempt %d (err %v); want a confirmed ack at attempt 1",
				s.Delivery.ID, s.Action, s.Delivery.Attempt, s.Err)
		}
	}
	var st client.Stats
	var err error
	testwait.Until(t, 30*time.Second, "the stats of every partition", func() bool {
		st, err = fc.Client().QueueStats(ctx, "orders")
		return err != nil || st.Err() == nil // a partition between leaders: ask again
	})
	if err == nil {
		err = st.Err()
	}
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	tot := st.Total()
	t.Logf("%d orders, %d leases granted (the rest were released by soft stops and leased again)", total, tot.Counters.Leased)
	if tot.Ready != 0 || tot.InFlight != 0 || tot.Dead != 0 || tot.Counters.Nacked != 0 || tot.Counters.Expired != 0 {
		t.Fatalf("queue after the deploy: %+v; want empty with no nack or expiry", tot)
	}
}
