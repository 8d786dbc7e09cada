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

// receiveDelay makes every receive of the fake wait d before it is applied,
// as a raft round would, and records the most receives waiting at once.
type receiveDelay struct {
	d       time.Duration
	mu      sync.Mutex
	now, hi int
}

func (rd *receiveDelay) hook(_ int, op wire.Op, _ any) fault {
	if op != wire.OpReceive {
		return fault{}
	}
	rd.mu.Lock()
	rd.now++
	rd.hi = max(rd.hi, rd.now)
	rd.mu.Unlock()
	wait := make(chan struct{})
	time.AfterFunc(rd.d, func() {
		rd.mu.Lock()
		rd.now--
		rd.mu.Unlock()
		close(wait)
	})
	return fault{wait: wait}
}

func (rd *receiveDelay) most() int {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.hi
}

// onePartitionQueue starts a one-node fake with queue "q" of one partition
// and returns it with the queue as a dialled client sees it.
func onePartitionQueue(t *testing.T) (*fakeCluster, *client.Queue) {
	t.Helper()
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 1})
	return fc, dial(t, fc).Queue("q")
}

// fill sends n messages to q.
func fill(t *testing.T, q *client.Queue, n int) {
	t.Helper()
	for sent := 0; sent < n; sent += 1000 {
		if _, err := q.SendBatch(testCtx(t, 10*time.Second), make([]client.Message, min(1000, n-sent))); err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
	}
}

// receiveSizes returns the Max of every receive that carried acks.
func receiveSizes(fc *fakeCluster) []int {
	var out []int
	for _, r := range fc.requests(wire.OpReceive) {
		if req, ok := r.body.(*wire.ReceiveRequest); ok && len(req.Acks) > 0 {
			out = append(out, req.Max)
		}
	}
	return out
}

// Handlers far faster than a receive round: each receive waits for the
// acks of its whole share and asks for all of it, as a batched receive of
// the prefetch would, instead of leaving with half.
func TestConsume_FastHandlersAskForWholeShares(t *testing.T) {
	fc, q := onePartitionQueue(t)
	const n, prefetch = 3000, 32
	fill(t, q, n)
	rd := &receiveDelay{d: 3 * time.Millisecond}
	fc.setHook(rd.hook)
	var handled atomic.Int32
	stop := consume(t, q, func(context.Context, *client.Delivery) error {
		handled.Add(1)
		return nil
	}, client.ConsumeOptions{Concurrency: 8, Prefetch: prefetch, Wait: 50 * time.Millisecond})
	testwait.Until(t, 20*time.Second, "every message handled", func() bool { return handled.Load() == n })
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	sizes := receiveSizes(fc)
	whole := 0
	for _, k := range sizes {
		if k == prefetch {
			whole++
		}
	}
	if len(sizes) == 0 || whole*2 < len(sizes) {
		t.Fatalf("%d of %d receives carrying acks asked for the whole prefetch of %d (sizes %v): want most", whole, len(sizes), prefetch, sizes)
	}
	if _, high := fc.leases(); high > prefetch {
		t.Fatalf("%d leases held at once, prefetch %d", high, prefetch)
	}
}

// Handlers slower than a receive round: a receive leaves once half the
// share is free, and the next may leave before it is answered, so the
// handlers are not left waiting a whole round; never more than two wait.
func TestConsume_SlowHandlersOverlapReceives(t *testing.T) {
	fc, q := onePartitionQueue(t)
	const n, prefetch = 240, 16
	fill(t, q, n)
	rd := &receiveDelay{d: 30 * time.Millisecond}
	fc.setHook(rd.hook)
	var handled atomic.Int32
	stop := consume(t, q, func(context.Context, *client.Delivery) error {
		time.Sleep(10 * time.Millisecond)
		handled.Add(1)
		return nil
	}, client.ConsumeOptions{Concurrency: 4, Prefetch: prefetch, Wait: 50 * time.Millisecond})
	testwait.Until(t, 30*time.Second, "every message handled", func() bool { return handled.Load() == n })
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if most := rd.most(); most != 2 {
		t.Fatalf("at most %d receives of the partition were on their way at once, want 2", most)
	}
	if _, high := fc.leases(); high > prefetch {
		t.Fatalf("%d leases held at once, prefetch %d", high, prefetch)
	}
}

// One handler stuck on a delivery does not hold up the others: the wait
// for a whole share is bounded.
func TestConsume_StuckHandlerDoesNotHoldTheOthers(t *testing.T) {
	fc, q := onePartitionQueue(t)
	const n = 400
	fill(t, q, n)
	fc.setHook((&receiveDelay{d: 2 * time.Millisecond}).hook)
	release := make(chan struct{})
	var stuck atomic.Bool
	var handled atomic.Int32
	stop := consume(t, q, func(ctx context.Context, _ *client.Delivery) error {
		if stuck.CompareAndSwap(false, true) {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		handled.Add(1)
		return nil
	}, client.ConsumeOptions{Concurrency: 4, Prefetch: 8, Wait: 50 * time.Millisecond})
	testwait.Until(t, 20*time.Second, "every message but the stuck one handled", func() bool { return handled.Load() == n-1 })
	close(release)
	testwait.Until(t, 5*time.Second, "the stuck one handled", func() bool { return handled.Load() == n })
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
}

// An idle queue costs one waiting receive per partition: receives overlap
// only while the partition has work ready.
func TestConsume_IdleQueueHoldsOneReceivePerPartition(t *testing.T) {
	fc, q := onePartitionQueue(t)
	rd := &receiveDelay{d: time.Millisecond}
	fc.setHook(rd.hook)
	var handled atomic.Int32
	stop := consume(t, q, func(context.Context, *client.Delivery) error {
		handled.Add(1)
		return nil
	}, client.ConsumeOptions{Concurrency: 8, Prefetch: 32, Wait: 20 * time.Millisecond})
	// Several long polls come back empty.
	testwait.Until(t, 10*time.Second, "five long polls", func() bool { return len(fc.requests(wire.OpReceive)) >= 5 })
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if most := rd.most(); most != 1 {
		t.Fatalf("%d receives of an idle partition on their way at once, want 1", most)
	}
}

// A delivery whose lease runs out while it waits for a handler is not
// handled (the queue delivers it again, maybe to another consumer): OnSettle
// reports it expired, and every handler starts with a live lease.
func TestConsume_ExpiredWhileWaitingIsNotHandled(t *testing.T) {
	_, q := onePartitionQueue(t)
	for _, id := range []string{"a", "b"} {
		if _, err := q.Send(testCtx(t, 5*time.Second), client.Message{ID: id}); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	var mu sync.Mutex
	var stale, expired int
	live := map[string]bool{} // handled after the first handler
	first := true
	stop := consume(t, q, func(ctx context.Context, d *client.Delivery) error {
		mu.Lock()
		if !time.Now().Before(d.LeaseDeadline()) {
			stale++
		}
		block := first
		first = false
		mu.Unlock()
		if block { // outlives its own lease and the other delivery's
			time.Sleep(300 * time.Millisecond)
			return nil
		}
		mu.Lock()
		live[d.ID] = true
		mu.Unlock()
		return nil
	}, client.ConsumeOptions{Concurrency: 1, Prefetch: 2, Visibility: 100 * time.Millisecond, Wait: 50 * time.Millisecond,
		OnSettle: func(o client.SettleOutcome) {
			if o.Action == client.SettleExpired {
				if !errors.Is(o.Err, client.ErrLeaseLost) {
					t.Errorf("expired outcome's error %v, want ErrLeaseLost", o.Err)
				}
				mu.Lock()
				expired++
				mu.Unlock()
			}
		}})
	testwait.Until(t, 10*time.Second, "the second message handled, delivered again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return live["b"]
	})
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if expired == 0 || stale != 0 {
		t.Fatalf("%d deliveries reported expired (want some), %d handlers started on a lapsed lease (want 0)", expired, stale)
	}
}
