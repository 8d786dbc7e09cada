package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
)

// On a 3-node cluster: 10,000 messages of priority 0 wait, consumers are
// busy with them, then 10 messages of priority 9 are sent. The next
// receive of each of the 3 consumers (4 messages each, all at once)
// delivers all 10 urgent ones, with their priority; only the 2 places
// left over go to the waiting backlog. Peek and find show the priority.
func TestCluster_PriorityOvertakesABacklog(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q := fc.CreateQueue("prio", client.Partitions(1), client.VisibilityTimeout(time.Minute))
	const backlog, urgent, consumers, perReceive = 10_000, 10, 3, 4
	for i := 0; i < backlog; i += 1000 {
		batch := make([]client.Message, 1000)
		for k := range batch {
			batch[k] = client.Message{ID: fmt.Sprintf("low-%05d", i+k), Body: []byte("routine")}
		}
		if _, err := q.SendBatch(ctx, batch); err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
	}
	qs := make([]*client.Queue, consumers)
	for c := range qs {
		qs[c] = fc.Dial().Queue("prio")
		// Busy with the backlog: a receive and its acks.
		ds := receiveSome(t, ctx, qs[c], perReceive, fmt.Sprintf("c%d", c))
		for _, d := range ds {
			if d.Priority != 0 || !strings.HasPrefix(d.ID, "low-") {
				t.Fatalf("backlog delivery %s with priority %d", d.ID, d.Priority)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
	}
	hot := make([]client.Message, urgent)
	for i := range hot {
		hot[i] = client.Message{ID: fmt.Sprintf("hot-%02d", i), Body: []byte("urgent"), Priority: client.MaxPriority}
	}
	if _, err := q.SendBatch(ctx, hot); err != nil {
		t.Fatalf("SendBatch urgent: %v", err)
	}
	peeked, err := q.Peek(ctx, client.PeekOptions{Max: 1})
	if err != nil || len(peeked) != 1 || peeked[0].Priority != 0 {
		t.Fatalf("peek of the oldest: %+v, %v", peeked, err)
	}
	found, err := fc.Client().FindMessage(ctx, "prio", "hot-03")
	if err != nil || len(found) != 1 || found[0].Priority != client.MaxPriority || found[0].State != "ready" {
		t.Fatalf("find hot-03: %+v, %v", found, err)
	}

	got := make([][]*client.Delivery, consumers)
	var wg sync.WaitGroup
	for c := range qs {
		wg.Go(func() { got[c] = receiveSome(t, ctx, qs[c], perReceive, fmt.Sprintf("c%d", c)) })
	}
	wg.Wait()
	hotSeen, lows := map[string]bool{}, 0
	for c, ds := range got {
		var ids []string
		for i, d := range ds {
			ids = append(ids, d.ID)
			switch {
			case strings.HasPrefix(d.ID, "hot-") && d.Priority == client.MaxPriority:
				hotSeen[d.ID] = true
				if i > 0 && ds[i-1].Priority == 0 {
					t.Errorf("consumer %d: %s came after a backlog message in one receive", c, d.ID)
				}
			case strings.HasPrefix(d.ID, "low-") && d.Priority == 0:
				lows++
			default:
				t.Errorf("consumer %d: %s with priority %d", c, d.ID, d.Priority)
			}
		}
		t.Logf("consumer %d's next receive: %v", c, ids)
	}
	if len(hotSeen) != urgent || lows != consumers*perReceive-urgent {
		t.Fatalf("the next receives delivered %d of the %d urgent messages and %d of the backlog", len(hotSeen), urgent, lows)
	}
	checkGuardUnderStream(t, ctx, qs[0])
}

// checkGuardUnderStream sends one urgent message before each one-message
// receive, 64 times: the starvation guard gives every 16th lease to the
// backlog, so exactly 4 backlog messages move.
func checkGuardUnderStream(t *testing.T, ctx context.Context, q *client.Queue) {
	var pattern []byte
	for i := range 64 {
		if _, err := q.Send(ctx, client.Message{ID: fmt.Sprintf("stream-%02d", i), Priority: client.MaxPriority}); err != nil {
			t.Fatalf("Send: %v", err)
		}
		ds := receiveSome(t, ctx, q, 1, "c0")
		if len(ds) != 1 {
			t.FailNow()
		}
		mark := byte('H')
		if ds[0].Priority == 0 {
			mark = 'L'
		}
		pattern = append(pattern, mark)
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	want := strings.Repeat(strings.Repeat("H", 15)+"L", 4)
	if string(pattern) != want {
		t.Fatalf("leases under a stream of urgent messages:\n%s\nwant\n%s", pattern, want)
	}
}

// receiveSome makes one receive of up to max messages for consumer,
// waiting up to 5 s for them.
func receiveSome(t *testing.T, ctx context.Context, q *client.Queue, max int, consumer string) []*client.Delivery {
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: max, Wait: 5 * time.Second, Consumer: consumer})
	if err != nil || len(ds) == 0 {
		t.Errorf("receive for %s: %d messages, %v", consumer, len(ds), err)
	}
	return ds
}
