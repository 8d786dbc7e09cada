package ferrytest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
)

// TestConsume_OnSettleReportsLostLease lets a handler outlive its lease
// while another consumer takes the message: the late ack fails with
// ErrLeaseLost, and OnSettle reports it to the service.
func TestConsume_OnSettleReportsLostLease(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	q := fc.CreateQueue("slow", client.BackoffBase(10*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := q.Send(ctx, client.Message{ID: "m"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	started, finish := make(chan struct{}), make(chan struct{})
	outcome := make(chan client.SettleOutcome, 1)
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- fc.Dial().Queue("slow").Consume(cctx, func(context.Context, *client.Delivery) error {
			close(started)
			<-finish
			return nil
		}, client.ConsumeOptions{Visibility: 300 * time.Millisecond, Wait: time.Second, Prefetch: 1,
			OnSettle: func(o client.SettleOutcome) { outcome <- o }})
	}()
	<-started
	var taken []*client.Delivery
	for len(taken) == 0 && ctx.Err() == nil { // the lease runs out; someone else gets the message
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: time.Second, Visibility: time.Minute})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		taken = ds
	}
	if len(taken) != 1 || taken[0].Attempt != 2 {
		t.Fatalf("second receive got %v", taken)
	}
	close(finish)
	var o client.SettleOutcome
	select {
	case o = <-outcome:
	case <-ctx.Done():
		t.Fatal("no settle outcome")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if o.Action != client.SettleAck || !errors.Is(o.Err, client.ErrLeaseLost) {
		t.Fatalf("outcome %s err %v, want an ack that failed with ErrLeaseLost", o.Action, o.Err)
	}
}

// TestDelivery_ExtendMovesDeadlineOnACluster extends a lease and checks
// that Deadline moved and that the broker kept the message leased past
// the original deadline.
func TestDelivery_ExtendMovesDeadlineOnACluster(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{})
	q := fc.CreateQueue("extend")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := q.Send(ctx, client.Message{ID: "m"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 5 * time.Second, Visibility: 500 * time.Millisecond})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %v %v", ds, err)
	}
	d := ds[0]
	first := d.Deadline
	before := time.Now()
	if err := d.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if d.Deadline.Before(before.Add(time.Minute)) || d.Deadline.After(time.Now().Add(time.Minute)) || !d.LeaseDeadline().Equal(d.Deadline) {
		t.Fatalf("Deadline %v (was %v) after Extend(1m) at %v", d.Deadline, first, before)
	}
	for time.Now().Before(first.Add(500 * time.Millisecond)) { // past the original deadline
		again, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 200 * time.Millisecond})
		if err != nil || len(again) != 0 {
			t.Fatalf("the extended message was delivered again: %v %v", again, err)
		}
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack after the original deadline: %v", err)
	}
}
