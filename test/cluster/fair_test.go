package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
)

// On a 3-node cluster, two queues of one partition each get the same
// sends: a flood of 100,000 ungrouped messages, a group of 1,000, and then
// 100 groups of one message each. Oldest first ("oldest", fair_groups
// off), the first receives deliver only the flood. With fair_groups on
// ("tenants"), every small group's message is delivered within the first
// 11 receives of 10: 102 lanes (the 100 small groups, the big group and
// the ungrouped messages), each served once in turn.
func TestCluster_FairGroupsPassAFlood(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const flood, big, small, perReceive = 100_000, 1_000, 100, 10
	oldest := fc.CreateQueue("oldest", client.Partitions(1), client.VisibilityTimeout(time.Hour))
	fair := fc.CreateQueue("tenants", client.Partitions(1), client.VisibilityTimeout(time.Hour), client.FairGroups(true))
	for _, q := range []*client.Queue{oldest, fair} {
		start := time.Now()
		sendFlood(t, ctx, q, flood, "flood", "")
		sendFlood(t, ctx, q, big, "big", "big")
		for i := range small {
			if _, err := q.Send(ctx, client.Message{ID: fmt.Sprintf("small-%03d", i), Group: fmt.Sprintf("tenant-%03d", i)}); err != nil {
				t.Fatalf("Send: %v", err)
			}
		}
		t.Logf("%s: sent %d ungrouped, %d in one group and %d groups of one in %v", q.Name(), flood, big, small, time.Since(start).Round(time.Millisecond))
	}

	const offReceives = small/perReceive + 1
	smallOff := 0
	for r := range offReceives {
		ds := receiveSome(t, ctx, oldest, perReceive, "c")
		smallOff += countSmall(ds)
		t.Logf("fair_groups off, receive %d: %s", r+1, idList(ds))
	}
	if smallOff != 0 {
		t.Fatalf("oldest first delivered %d small groups in %d receives", smallOff, offReceives)
	}

	seen := map[string]bool{}
	receives := 0
	for len(seen) < small {
		if receives == offReceives {
			t.Fatalf("fair_groups on: %d of %d small groups delivered in %d receives", len(seen), small, receives)
		}
		ds := receiveSome(t, ctx, fair, perReceive, "c")
		receives++
		for _, d := range ds {
			if strings.HasPrefix(d.ID, "small-") {
				seen[d.Group] = true
			}
		}
		t.Logf("fair_groups on, receive %d: %d small groups so far; %s", receives, len(seen), idList(ds))
	}
	t.Logf("all %d small groups delivered in %d receives of %d with fair_groups on; none in %d with it off",
		small, receives, perReceive, offReceives)
}

// sendFlood sends n messages with ids prefix-N, in group (none when
// empty), in batches of 1,000.
func sendFlood(t *testing.T, ctx context.Context, q *client.Queue, n int, prefix, group string) {
	t.Helper()
	for i := 0; i < n; i += 1000 {
		batch := make([]client.Message, min(1000, n-i))
		for k := range batch {
			batch[k] = client.Message{ID: fmt.Sprintf("%s-%06d", prefix, i+k), Group: group, Body: []byte("x")}
		}
		if _, err := q.SendBatch(ctx, batch); err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
	}
}

func countSmall(ds []*client.Delivery) int {
	n := 0
	for _, d := range ds {
		if strings.HasPrefix(d.ID, "small-") {
			n++
		}
	}
	return n
}

// idList shows a receive's ids, the flood's summed up.
func idList(ds []*client.Delivery) string {
	var parts []string
	flood := 0
	for _, d := range ds {
		if strings.HasPrefix(d.ID, "flood-") {
			flood++
			continue
		}
		parts = append(parts, d.ID)
	}
	return fmt.Sprintf("%d of the flood, %s", flood, strings.Join(parts, " "))
}
