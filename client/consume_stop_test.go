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

// releasedAndNacked counts the leases given back without an attempt and
// the nacks that spend one.
func releasedAndNacked(fc *fakeCluster) (released, nacked int) {
	for _, r := range fc.requests(wire.OpNack) {
		for _, it := range r.body.(*wire.NackRequest).Items {
			if it.Release {
				released++
			} else {
				nacked++
			}
		}
	}
	return released, nacked
}

// runConsume starts Consume with opts and returns a channel of its result.
func runConsume(ctx context.Context, q *client.Queue, h func(context.Context, *client.Delivery) error, opts client.ConsumeOptions) <-chan error {
	done := make(chan error, 1)
	go func() { done <- q.Consume(ctx, h, opts) }()
	return done
}

func waitDone(t *testing.T, done <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Consume: %v", err)
		}
	case <-time.After(d):
		t.Fatal("Consume did not return")
	}
}

func TestClient_ConsumeSoftStopFinishesRunningReleasesUnstarted(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 1})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 10*time.Second)
	if _, err := q.SendBatch(ctx, []client.Message{{ID: "a"}, {ID: "b"}, {ID: "c"}}); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	started := make(chan string, 3)
	finish := make(chan struct{})
	stop := make(chan struct{})
	var mu sync.Mutex
	var outcomes []client.SettleOutcome
	done := runConsume(ctx, q, func(hctx context.Context, d *client.Delivery) error {
		started <- d.ID
		<-finish
		return hctx.Err() // nil unless the handler's context was cancelled
	}, client.ConsumeOptions{Prefetch: 3, Wait: 50 * time.Millisecond, Stop: stop,
		OnSettle: func(o client.SettleOutcome) { mu.Lock(); outcomes = append(outcomes, o); mu.Unlock() }})
	first := <-started
	testwait.Until(t, 5*time.Second, "three leases held", func() bool { now, _ := fc.leases(); return now == 3 })
	close(stop)
	testwait.Until(t, 5*time.Second, "the two unstarted leases released", func() bool { r, _ := releasedAndNacked(fc); return r == 2 })
	close(finish)
	waitDone(t, done, 5*time.Second)
	if r, n := releasedAndNacked(fc); r != 2 || n != 0 {
		t.Fatalf("%d released, %d nacked; want 2 and 0", r, n)
	}
	acks := fc.requests(wire.OpAck)
	if len(acks) != 1 || len(started) != 0 {
		t.Fatalf("%d acks, %d more handlers started; want the running one acked and no other started", len(acks), len(started))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(outcomes) != 1 || outcomes[0].Delivery.ID != first || outcomes[0].Action != client.SettleAck || outcomes[0].Err != nil {
		t.Fatalf("outcomes %+v, want one confirmed ack of %s", outcomes, first)
	}
}

func TestClient_ConsumeSoftStopGraceExpiryReleases(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 1})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 10*time.Second)
	if _, err := q.Send(ctx, client.Message{ID: "slow"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	stop := make(chan struct{})
	started := make(chan struct{})
	cause := make(chan error, 1)
	var got client.SettleOutcome
	done := runConsume(ctx, q, func(hctx context.Context, d *client.Delivery) error {
		close(started)
		<-hctx.Done()
		cause <- context.Cause(hctx)
		return hctx.Err()
	}, client.ConsumeOptions{Wait: 50 * time.Millisecond, Stop: stop, GracePeriod: 100 * time.Millisecond,
		OnSettle: func(o client.SettleOutcome) { got = o }})
	<-started
	close(stop)
	waitDone(t, done, 5*time.Second)
	if err := <-cause; !errors.Is(err, client.ErrStopping) {
		t.Fatalf("handler's cancel cause %v, want ErrStopping", err)
	}
	if r, n := releasedAndNacked(fc); r != 1 || n != 0 {
		t.Fatalf("%d released, %d nacked; want the cut-short handler's lease released", r, n)
	}
	if got.Action != client.SettleRelease || !errors.Is(got.HandlerErr, context.Canceled) {
		t.Fatalf("outcome %+v, want a release", got)
	}
}

func TestClient_ConsumeHardStopNacks(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 1})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 10*time.Second)
	if _, err := q.Send(ctx, client.Message{ID: "m"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	done := runConsume(cctx, q, func(hctx context.Context, d *client.Delivery) error {
		close(started)
		<-hctx.Done()
		return hctx.Err()
	}, client.ConsumeOptions{Wait: 50 * time.Millisecond, Stop: make(chan struct{})})
	<-started
	cancel()
	waitDone(t, done, 5*time.Second)
	if r, n := releasedAndNacked(fc); r != 0 || n != 1 {
		t.Fatalf("%d released, %d nacked; a hard stop nacks the cancelled handler", r, n)
	}
}

func TestClient_ConsumeReportsFailedAck(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 1})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 10*time.Second)
	if _, err := q.Send(ctx, client.Message{ID: "m"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	fc.setHook(func(_ int, op wire.Op, body any) fault {
		if rr, ok := body.(*wire.ReceiveRequest); op == wire.OpAck || (ok && len(rr.Acks) > 0) {
			return fault{itemCode: wire.CodeLeaseLost, msg: "superseded"}
		}
		return fault{}
	})
	outcomes := make(chan client.SettleOutcome, 1)
	stop := consume(t, q, func(context.Context, *client.Delivery) error { return nil },
		client.ConsumeOptions{Wait: 50 * time.Millisecond, OnSettle: func(o client.SettleOutcome) { outcomes <- o }})
	var o client.SettleOutcome
	select {
	case o = <-outcomes:
	case <-time.After(5 * time.Second):
		t.Fatal("no settle outcome reported")
	}
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if o.Action != client.SettleAck || !errors.Is(o.Err, client.ErrLeaseLost) || o.Delivery.ID != "m" {
		t.Fatalf("outcome %+v, want a failed ack with ErrLeaseLost", o)
	}
}

func TestClient_ExtendMovesDeadline(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 1})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 10*time.Second)
	if _, err := q.Send(ctx, client.Message{ID: "m"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	ds, err := q.Receive(ctx, client.ReceiveOptions{Visibility: time.Second})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %v %d", err, len(ds))
	}
	d := ds[0]
	before := d.Deadline
	start := time.Now()
	if err := d.Extend(ctx, time.Hour); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if !d.Deadline.After(before) || d.Deadline.Before(start.Add(time.Hour)) || d.Deadline.After(time.Now().Add(time.Hour)) {
		t.Fatalf("Deadline %v after Extend(1h) from %v (was %v)", d.Deadline, start, before)
	}
	if !d.LeaseDeadline().Equal(d.Deadline) {
		t.Fatalf("LeaseDeadline %v, Deadline %v", d.LeaseDeadline(), d.Deadline)
	}
}

func TestClient_AutoExtendMovesLeaseDeadline(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 1})
	c := dial(t, fc)
	q := c.Queue("q")
	ctx := testCtx(t, 10*time.Second)
	if _, err := q.Send(ctx, client.Message{ID: "m"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	moved := make(chan bool, 1)
	stop := consume(t, q, func(hctx context.Context, d *client.Delivery) error {
		first := d.LeaseDeadline()
		for hctx.Err() == nil {
			if d.LeaseDeadline().After(first) {
				moved <- true
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		moved <- false
		return nil
	}, client.ConsumeOptions{Wait: 50 * time.Millisecond, Visibility: 200 * time.Millisecond, AutoExtend: true})
	select {
	case ok := <-moved:
		if !ok {
			t.Fatal("handler cancelled before LeaseDeadline moved")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LeaseDeadline did not follow AutoExtend")
	}
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
}
