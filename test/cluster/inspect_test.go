package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/jsonview"
)

// holdAll receives until want messages are leased to consumer.
func holdAll(ctx context.Context, t *testing.T, q *client.Queue, consumer string, want int) []*client.Delivery {
	t.Helper()
	var held []*client.Delivery
	for len(held) < want {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: want - len(held), Wait: time.Second, Consumer: consumer})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		held = append(held, ds...)
	}
	return held
}

// totals returns the queue's summed stats.
func totals(ctx context.Context, t *testing.T, admin *client.Client, queue string) client.PartitionStats {
	t.Helper()
	st, err := admin.QueueStats(ctx, queue)
	if err != nil || st.Err() != nil {
		t.Fatalf("QueueStats: %v %v", err, st.Err())
	}
	return st.Total()
}

// On a 3-node cluster: a purge that includes leased messages deletes the
// ones a consumer holds, whose acks then fail with ErrMessageNotFound, and
// leaves nothing in flight; without it leased messages stay.
func TestCluster_PurgeIncludingLeased(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	q := fc.CreateQueue("purged", client.Partitions(2), client.VisibilityTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := fc.Client()
	for i := range 6 {
		if _, err := q.Send(ctx, client.Message{ID: fmt.Sprintf("m%d", i)}); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	held := holdAll(ctx, t, q, "worker-1", 3)
	if n, err := admin.Purge(ctx, "purged"); err != nil || n != 3 {
		t.Fatalf("Purge: %d, %v (want the 3 ready ones)", n, err)
	}
	if tot := totals(ctx, t, admin, "purged"); tot.InFlight != 3 {
		t.Fatalf("a plain purge took leased messages: %+v", tot)
	}
	if n, err := admin.Purge(ctx, "purged", client.IncludeLeased()); err != nil || n != 3 {
		t.Fatalf("Purge with leased: %d, %v", n, err)
	}
	for _, d := range held {
		if err := d.Ack(ctx); !errors.Is(err, client.ErrMessageNotFound) {
			t.Fatalf("ack of purged %s: %v, want ErrMessageNotFound", d.ID, err)
		}
	}
	if err := held[0].Extend(ctx, time.Minute); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("extend of a purged lease: %v", err)
	}
	if tot := totals(ctx, t, admin, "purged"); tot.InFlight != 0 || tot.Ready != 0 || tot.Counters.Purged != 6 {
		t.Fatalf("after the purge with leased: %+v", tot)
	}
}

// On a 3-node cluster: a peek shows leased messages with their holder; a
// dry run of a bulk delete by group counts and changes nothing; the bulk
// delete removes exactly that group's messages, ready and leased, and
// the holder of a deleted lease gets ErrMessageNotFound.
func TestCluster_DeleteMatchingByGroup(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	q := fc.CreateQueue("bulk", client.Partitions(3), client.VisibilityTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := fc.Client()
	var msgs []client.Message
	for i := range 30 {
		msgs = append(msgs, client.Message{Group: fmt.Sprintf("acct-%d", i%3), Body: []byte("x"),
			Headers: map[string]string{"n": fmt.Sprint(i)}})
	}
	if _, err := q.SendBatch(ctx, msgs); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	held := holdAll(ctx, t, q, "worker-9", 3) // each group's head
	all := client.MessageFilter{States: []string{client.StateAll}}
	leased, err := q.Peek(ctx, client.PeekOptions{Max: 100, MessageFilter: client.MessageFilter{States: []string{client.StateLeased}}})
	if err != nil || len(leased) != 3 || leased[0].Consumer != "worker-9" || leased[0].VisibleAt.IsZero() {
		t.Fatalf("peek of leased: %+v, %v", leased, err)
	}

	checkAdminPeek(t, "http://"+fc.HTTPAddrs()[1]+"/v1/queues/bulk/messages")

	victim := client.MessageFilter{States: all.States, Group: "acct-1"}
	before := totals(ctx, t, admin, "bulk")
	dry, err := admin.DeleteMatching(ctx, "bulk", victim, true)
	if err != nil || dry.Matched != 10 || dry.Deleted != 0 {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	if after := totals(ctx, t, admin, "bulk"); after.Ready != before.Ready || after.InFlight != before.InFlight ||
		after.Counters.Purged != 0 {
		t.Fatalf("a dry run changed the queue: %+v, before %+v", after, before)
	}
	res, err := admin.DeleteMatching(ctx, "bulk", victim, false)
	if err != nil || res.Matched != 10 || res.Deleted != 10 {
		t.Fatalf("DeleteMatching: %+v, %v", res, err)
	}
	left, err := q.Peek(ctx, client.PeekOptions{Max: 100, MessageFilter: all})
	if err != nil || len(left) != 20 {
		t.Fatalf("left: %d, %v", len(left), err)
	}
	for _, m := range left {
		if m.Group == "acct-1" {
			t.Fatalf("a message of the deleted group is left: %+v", m)
		}
	}
	for _, d := range held {
		err := d.Ack(ctx)
		if d.Group == "acct-1" && !errors.Is(err, client.ErrMessageNotFound) {
			t.Fatalf("ack of the deleted group's lease: %v", err)
		}
		if d.Group != "acct-1" && err != nil {
			t.Fatalf("ack of another group's lease: %v", err)
		}
	}
	if tot := totals(ctx, t, admin, "bulk"); tot.Ready != 18 || tot.InFlight != 0 || tot.Counters.Purged != 10 {
		t.Fatalf("after the bulk delete and acks: %+v", tot)
	}
}

// checkAdminPeek lists queue "bulk" through the admin port at base,
// filtered, as JSON; a bad filter is 400.
func checkAdminPeek(t *testing.T, base string) {
	t.Helper()
	code, body := adminRequest(t, http.MethodGet, base+"?state=leased&group=acct-2&max=10", nil)
	var listed []jsonview.PeekedMessage
	if code != http.StatusOK || json.Unmarshal(body, &listed) != nil || len(listed) != 1 || listed[0].State != "leased" ||
		listed[0].Consumer != "worker-9" || listed[0].Group != "acct-2" {
		t.Fatalf("GET %s: %d %s", base, code, body)
	}
	if code, body := adminRequest(t, http.MethodGet, base+"?header=n=4&state=all", nil); code != http.StatusOK ||
		json.Unmarshal(body, &listed) != nil || len(listed) != 1 || listed[0].Headers["n"] != "4" {
		t.Fatalf("GET by header: %d %s", code, body)
	}
	if code, _ := adminRequest(t, http.MethodGet, base+"?state=dead", nil); code != http.StatusBadRequest {
		t.Fatalf("GET with a bad state: %d", code)
	}
}
