package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// seenLog records every delivery a consumer saw.
type seenLog struct {
	mu       sync.Mutex
	attempts map[string][]uint32
}

func (s *seenLog) add(d *client.Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[d.ID] = append(s.attempts[d.ID], d.Attempt)
}

func (s *seenLog) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.attempts)
}

// check fails unless every id was seen exactly once, at attempt 1.
func (s *seenLog) check(t *testing.T, ids []string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if got := s.attempts[id]; len(got) != 1 || got[0] != 1 {
			t.Errorf("message %s seen at attempts %v, want [1]", id, got)
		}
	}
}

// With several partitions and a wait at least as long as the visibility
// timeout, the long polls a Receive leaves behind lease messages after it
// returned. Those leases must reach the next or a waiting Receive in time,
// or go back without counting: every message is seen once, at attempt 1.
func TestClient_LeftoverLongPollLeasesAreNotLostOrStale(t *testing.T) {
	fc := newFake(t, 2)
	const vis = 300 * time.Millisecond
	fc.addQueue("q", wire.QueueConfig{Partitions: 4, VisibilityTimeout: vis})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 20*time.Second)
	const total = 40
	var ids []string
	for i := range total {
		ids = append(ids, idFor(i%4, 4, fmt.Sprintf("m%d", i)))
	}
	seen := &seenLog{attempts: map[string][]uint32{}}
	done := make(chan error, 1)
	go func() {
		for seen.count() < total && ctx.Err() == nil {
			ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 2 * vis})
			if err != nil {
				done <- err
				return
			}
			for _, d := range ds {
				seen.add(d)
				if err := d.Ack(ctx); err != nil {
					done <- fmt.Errorf("ack %s attempt %d: %w", d.ID, d.Attempt, err)
					return
				}
			}
		}
		done <- nil
	}()
	// Messages trickle in while polls wait, two at a time in different
	// partitions, so one Receive's answer leaves another poll to lease.
	for i := 0; i < total; i += 2 {
		if _, err := q.SendBatch(ctx, []client.Message{{ID: ids[i]}, {ID: ids[i+1]}}); err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
		time.Sleep(vis / 3) // pacing the producer, not waiting for a result
	}
	if err := <-done; err != nil {
		t.Fatalf("consumer: %v", err)
	}
	seen.check(t, ids)
	// Give the leftover polls time to end, then no message may be left.
	testwait.Until(t, 5*time.Second, "the leftover polls to end", func() bool { return fc.waitingPolls() == 0 })
	if st, err := c.QueueStats(ctx, "q"); err != nil || st.Total().Ready+st.Total().InFlight != 0 {
		t.Fatalf("left in the queue: %+v, %v", st.Total(), err)
	}
	seen.check(t, ids)
}

// holdFirstReceive makes the fake apply the next receive but keep its
// answer until the returned function is called.
func holdFirstReceive(fc *fakeCluster) (let func()) {
	hold := make(chan struct{})
	var once sync.Once
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		f := fault{}
		if op == wire.OpReceive {
			once.Do(func() { f.hold = hold })
		}
		return f
	})
	return func() { close(hold) }
}

// receiveLeftBehind leases one message for a Receive whose ctx ends before
// the answer arrives, so that the answer goes to the buffer once let is
// called.
func receiveLeftBehind(t *testing.T, fc *fakeCluster, q *client.Queue) (let func()) {
	t.Helper()
	let = holdFirstReceive(fc)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: time.Second})
		errc <- err
	}()
	testwait.Until(t, 5*time.Second, "the lease", func() bool { n, _ := fc.leases(); return n == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled Receive returned no error")
	}
	return let
}

// A lease that arrives for a call that returned goes at once to a Receive
// that is waiting right now.
func TestClient_WaitingReceiveTakesALateLease(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{VisibilityTimeout: 2 * time.Second})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 10*time.Second)
	if _, err := q.Send(ctx, client.Message{ID: "a"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	let := receiveLeftBehind(t, fc, q)
	got := make(chan []*client.Delivery, 1)
	go func() {
		ds, _ := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 5 * time.Second})
		got <- ds
	}()
	testwait.Until(t, 5*time.Second, "the waiting poll", func() bool { return fc.waitingPolls() > 0 })
	start := time.Now()
	let()
	ds := <-got
	waited := time.Since(start)
	if len(ds) != 1 || ds[0].ID != "a" || ds[0].Attempt != 1 || waited > time.Second {
		for _, d := range ds {
			t.Logf("got %s attempt %d", d.ID, d.Attempt)
		}
		t.Fatalf("waiting Receive got %d deliveries after %v, want a at attempt 1 at once", len(ds), waited)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// A buffered lease that nobody takes while half its time is left is
// released, never handed out late, and delivered again at attempt 1.
func TestClient_StaleBufferedLeaseIsReleasedNotHandedOut(t *testing.T) {
	fc := newFake(t, 1)
	const vis = 400 * time.Millisecond
	fc.addQueue("q", wire.QueueConfig{VisibilityTimeout: vis, MaxReceives: 1})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 10*time.Second)
	if _, err := q.Send(ctx, client.Message{ID: "a"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	let := receiveLeftBehind(t, fc, q)
	let()
	testwait.Until(t, 5*time.Second, "the lease in the buffer", func() bool { return q.Buffered() == 1 })
	fc.setHook(nil)
	testwait.Until(t, 5*time.Second, "the release", func() bool {
		for _, r := range fc.requests(wire.OpNack) {
			for _, it := range r.body.(*wire.NackRequest).Items {
				if it.Release {
					return true
				}
			}
		}
		return false
	})
	if q.Buffered() != 0 {
		t.Fatalf("%d leases still buffered after their release", q.Buffered())
	}
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: time.Second})
	if err != nil || len(ds) != 1 || ds[0].Attempt != 1 || time.Until(ds[0].Deadline) < vis/2 {
		t.Fatalf("after the release: %v, %+v", err, ds)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// Close gives buffered leases back instead of letting them expire.
func TestClient_CloseReleasesBufferedLeases(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{VisibilityTimeout: time.Minute})
	c := dial(t, fc)
	q := c.Queue("q")
	if _, err := q.Send(testCtx(t, 5*time.Second), client.Message{ID: "a"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	let := receiveLeftBehind(t, fc, q)
	let()
	testwait.Until(t, 5*time.Second, "the lease in the buffer", func() bool { return q.Buffered() == 1 })
	c.Close()
	if n, _ := fc.leases(); n != 0 {
		t.Fatalf("%d leases still held after Close", n)
	}
}

// longPolls counts the receive requests with a wait the fake got, by
// partition.
func longPolls(fc *fakeCluster) map[int]int {
	out := map[int]int{}
	for _, r := range fc.requests(wire.OpReceive) {
		if req, ok := r.body.(*wire.ReceiveRequest); ok && req.Wait > 0 {
			out[req.Partition]++
		}
	}
	return out
}

// A consumer calling Receive in a loop, answered each time by one busy
// partition, leaves the long polls of the idle partitions running (their
// leases would go to the buffer). Later calls wait on those polls rather
// than start more: one long poll per idle partition, not one per call.
func TestClient_ReceiveLoopKeepsOneLongPollPerPartition(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 4, VisibilityTimeout: time.Minute})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 20*time.Second)
	const calls = 8
	for i := range calls {
		busy := longPolls(fc)[0]
		got := make(chan []*client.Delivery, 1)
		go func() {
			ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 10 * time.Second})
			if err != nil {
				t.Errorf("Receive %d: %v", i, err)
			}
			got <- ds
		}()
		// Send once the call long-polls the busy partition.
		testwait.Until(t, 5*time.Second, "a long poll of partition 0", func() bool { return longPolls(fc)[0] > busy })
		if _, err := q.Send(ctx, client.Message{ID: idFor(0, 4, fmt.Sprintf("m%d", i))}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		if ds := <-got; len(ds) != 1 || ds[0].Partition != 0 {
			t.Fatalf("call %d got %d deliveries, want the one of partition 0", i, len(ds))
		}
	}
	for p, n := range longPolls(fc) {
		if p != 0 && n != 1 {
			t.Errorf("partition %d: %d long polls over %d calls, want 1", p, n, calls)
		}
	}
}

// A call that left a partition to an earlier call's poll polls it itself
// once that poll ends empty, for the rest of its own wait.
func TestClient_ReceivePollsAPartitionOnceItsOrphanPollEnds(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2, VisibilityTimeout: time.Minute})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 20*time.Second)
	first := make(chan []*client.Delivery, 1)
	go func() {
		ds, _ := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 500 * time.Millisecond})
		first <- ds
	}()
	testwait.Until(t, 5*time.Second, "both partitions long-polled", func() bool { return len(longPolls(fc)) == 2 })
	if _, err := q.Send(ctx, client.Message{ID: idFor(0, 2, "a")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if ds := <-first; len(ds) != 1 {
		t.Fatalf("first call got %d deliveries", len(ds))
	}
	second := make(chan []*client.Delivery, 1)
	go func() {
		ds, _ := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 5 * time.Second})
		second <- ds
	}()
	// Partition 1's orphan ends after half a second; the second call then
	// polls partition 1 itself.
	testwait.Until(t, 5*time.Second, "partition 1 polled again", func() bool { return longPolls(fc)[1] == 2 })
	if _, err := q.Send(ctx, client.Message{ID: idFor(1, 2, "b")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if ds := <-second; len(ds) != 1 || ds[0].Partition != 1 {
		t.Fatalf("second call got %d deliveries, want the one of partition 1", len(ds))
	}
}
