package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
)

// A message's priority goes through every path a node serves: the send
// stores it, a delivery, a peek, a find and a dead letter show it, and a
// redrive keeps it.
func TestCluster_PriorityTravelsThroughEveryPath(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	q := fc.CreateQueue("prio", client.Partitions(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := fc.Client()
	if _, err := q.Send(ctx, client.Message{ID: "urgent", Body: []byte("x"), Priority: 7}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	peeked, err := q.Peek(ctx, client.PeekOptions{Max: 10})
	if err != nil || len(peeked) != 1 || peeked[0].Priority != 7 {
		t.Fatalf("Peek: %+v, %v; want priority 7", peeked, err)
	}
	if found, err := admin.FindMessage(ctx, "prio", "urgent"); err != nil || len(found) != 1 || found[0].Priority != 7 {
		t.Fatalf("FindMessage: %+v, %v; want priority 7", found, err)
	}
	receive := func() *client.Delivery {
		t.Helper()
		for {
			ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: time.Second})
			if err != nil {
				t.Fatalf("Receive: %v", err)
			}
			if len(ds) == 1 {
				return ds[0]
			}
		}
	}
	d := receive()
	if d.Priority != 7 {
		t.Fatalf("delivered with priority %d, want 7", d.Priority)
	}
	if err := d.Reject(ctx, "bad"); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	dead, err := admin.DeadLetters(ctx, "prio", client.DeadFilter{})
	if err != nil || len(dead) != 1 || dead[0].Priority != 7 {
		t.Fatalf("DeadLetters: %+v, %v; want one with priority 7", dead, err)
	}
	if n, err := admin.RedriveDeadLetters(ctx, "prio", client.DeadFilter{}); err != nil || n != 1 {
		t.Fatalf("RedriveDeadLetters: %d, %v", n, err)
	}
	if d := receive(); d.ID != "urgent" || d.Priority != 7 {
		t.Fatalf("redriven delivery %s with priority %d, want urgent with 7", d.ID, d.Priority)
	}
}
