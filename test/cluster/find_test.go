package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
)

// On a 3-node cluster: a message is found by id in each state; deleting a
// leased one by id makes its consumer's ack fail cleanly with
// ErrMessageNotFound and changes nothing else; a cancel deletes only what
// was never delivered.
func TestCluster_FindAndDeleteOneMessageByID(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	q := fc.CreateQueue("work", client.Partitions(2), client.VisibilityTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := fc.Client()
	for _, m := range []client.Message{{ID: "leased-one"}, {ID: "later", Delay: time.Hour}} {
		if _, err := q.Send(ctx, m); err != nil {
			t.Fatalf("Send %s: %v", m.ID, err)
		}
	}
	var held *client.Delivery
	for held == nil {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: time.Second, Consumer: "worker-7"})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if len(ds) == 1 {
			held = ds[0]
		}
	}
	if _, err := q.Send(ctx, client.Message{ID: "bystander"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	for id, want := range map[string]string{"leased-one": "leased", "later": "delayed", "bystander": "ready"} {
		found, err := admin.FindMessage(ctx, "work", id)
		if err != nil || len(found) != 1 || found[0].State != want {
			t.Fatalf("FindMessage(%s) = %+v, %v; want one %s", id, found, err, want)
		}
	}
	if f, _ := admin.FindMessage(ctx, "work", "leased-one"); f[0].Consumer != "worker-7" || f[0].VisibleAt == 0 {
		t.Fatalf("the lease is not shown: %+v", f[0])
	}
	if _, err := admin.CancelMessage(ctx, "work", "leased-one"); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("cancel of a delivered message: %v, want ErrMessageNotFound", err)
	}
	if n, err := admin.DeleteMessage(ctx, "work", "leased-one"); err != nil || n != 1 {
		t.Fatalf("DeleteMessage: %d, %v", n, err)
	}
	if err := held.Ack(ctx); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("ack of a deleted lease: %v, want ErrMessageNotFound", err)
	}
	if n, err := admin.CancelMessage(ctx, "work", "later"); err != nil || n != 1 {
		t.Fatalf("CancelMessage of a delayed message: %d, %v", n, err)
	}
	if _, err := admin.DeleteMessage(ctx, "work", "nosuch"); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("delete of a missing id: %v", err)
	}
	st, err := admin.QueueStats(ctx, "work")
	if err != nil || st.Err() != nil {
		t.Fatalf("QueueStats: %v %v", err, st.Err())
	}
	if tot := st.Total(); tot.Ready != 1 || tot.InFlight != 0 || tot.Delayed != 0 || tot.Counters.Purged != 2 {
		t.Fatalf("after the deletes: %+v (want the bystander alone, ready)", tot)
	}
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 10, Wait: 2 * time.Second})
	if err != nil || len(ds) != 1 || ds[0].ID != "bystander" {
		t.Fatalf("Receive after the deletes: %v, %v", ds, err)
	}
}
