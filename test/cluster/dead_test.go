package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
)

// TestCluster_DeadLetters checks how messages become dead letters (reject,
// retries exhausted by nacks, leases expired) with their history, and the
// operator's list, peek, redrive and delete with filters.
func TestCluster_DeadLetters(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("dead")
	c.createQueue(cl, "dlq", client.Partitions(2), client.MaxReceives(2), client.BackoffBase(20*time.Millisecond))
	q := cl.Queue("dlq")

	rejected := deadByReject(t, cl, q)
	exhausted := deadByNacks(t, cl, q)
	expired := deadByExpiry(t, c, cl, q)

	t.Run("History", func(t *testing.T) {
		checkHistory(t, rejected, client.DeadRejected, "bad payload", 2, "worker-b", []client.Event{
			{Kind: client.EventNacked, Attempt: 1, Consumer: "worker-a", Reason: "db down"},
			{Kind: client.EventRejected, Attempt: 2, Consumer: "worker-b", Reason: "bad payload"},
		})
		checkHistory(t, exhausted, client.DeadRetriesExhausted, "try 2", 2, "worker-a", []client.Event{
			{Kind: client.EventNacked, Attempt: 1, Consumer: "worker-a", Reason: "try 1"},
			{Kind: client.EventNacked, Attempt: 2, Consumer: "worker-a", Reason: "try 2"},
		})
		checkHistory(t, expired, client.DeadLeaseExpired, "lease expired", 2, "worker-c", []client.Event{
			{Kind: client.EventLeaseExpired, Attempt: 1, Consumer: "worker-c"},
			{Kind: client.EventLeaseExpired, Attempt: 2, Consumer: "worker-c"},
		})
	})
	t.Run("Filters", func(t *testing.T) { testDeadFilters(t, cl, rejected, exhausted, expired) })
	t.Run("RedriveAndDelete", func(t *testing.T) { testRedriveAndDelete(t, cl, q, exhausted, expired) })
	t.Run("ConsumeReject", func(t *testing.T) { testConsumeReject(t, c.with(t), cl) })
}

// onlyDead returns the single dead letter selected by f.
func onlyDead(t *testing.T, cl *client.Client, queue string, f client.DeadFilter) client.DeadLetter {
	t.Helper()
	ls, err := cl.DeadLetters(opContext(t), queue, f)
	if err != nil || len(ls) != 1 {
		t.Fatalf("dead letters %+v: %v, %d letters", f, err, len(ls))
	}
	return ls[0]
}

// deadByReject: nacked once by one consumer, then rejected by another.
func deadByReject(t *testing.T, cl *client.Client, q *client.Queue) client.DeadLetter {
	mustSend(t, q, client.Message{ID: "r1", Group: "gR", Headers: map[string]string{"h": "1"}, Body: []byte("rrr")})
	d := receiveOne(t, q, client.ReceiveOptions{Wait: time.Second, Consumer: "worker-a"})
	if err := d.Nack(opContext(t), client.NackOptions{Immediate: true, Reason: "db down"}); err != nil {
		t.Fatal(err)
	}
	d = receiveOne(t, q, client.ReceiveOptions{Wait: time.Second, Consumer: "worker-b"})
	if d.ID != "r1" || d.Attempt != 2 {
		t.Fatalf("got %s attempt %d, want r1 attempt 2", d.ID, d.Attempt)
	}
	if err := d.Reject(opContext(t), "bad payload"); err != nil {
		t.Fatal(err)
	}
	return onlyDead(t, cl, "dlq", client.DeadFilter{Reason: client.DeadRejected})
}

// deadByNacks: nacked on both allowed receives.
func deadByNacks(t *testing.T, cl *client.Client, q *client.Queue) client.DeadLetter {
	mustSend(t, q, client.Message{ID: "e1", Group: "gE", Body: []byte("eee")})
	for i := 1; i <= 2; i++ {
		d := receiveOne(t, q, client.ReceiveOptions{Wait: time.Second, Consumer: "worker-a"})
		if d.ID != "e1" || int(d.Attempt) != i {
			t.Fatalf("got %s attempt %d, want e1 attempt %d", d.ID, d.Attempt, i)
		}
		if err := d.Nack(opContext(t), client.NackOptions{Immediate: true, Reason: fmt.Sprintf("try %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	receiveNone(t, q, 200*time.Millisecond)
	return onlyDead(t, cl, "dlq", client.DeadFilter{Reason: client.DeadRetriesExhausted})
}

// deadByExpiry: both allowed leases run out without any settlement.
func deadByExpiry(t *testing.T, c *testCluster, cl *client.Client, q *client.Queue) client.DeadLetter {
	mustSend(t, q, client.Message{ID: "x1", Group: "gX", Body: []byte("xxx")})
	for i := 1; i <= 2; i++ {
		d := receiveOne(t, q, client.ReceiveOptions{Wait: 2 * time.Second, Visibility: 200 * time.Millisecond, Consumer: "worker-c"})
		if d.ID != "x1" || int(d.Attempt) != i {
			t.Fatalf("got %s attempt %d, want x1 attempt %d", d.ID, d.Attempt, i)
		}
	}
	var letter client.DeadLetter
	testwait.UntilNil(c.t, waitLong, "x1 dead-lettered", func() error {
		ls, err := cl.DeadLetters(opContext(t), "dlq", client.DeadFilter{Reason: client.DeadLeaseExpired})
		if err != nil || len(ls) != 1 {
			return fmt.Errorf("%d letters, %v", len(ls), err)
		}
		letter = ls[0]
		return nil
	})
	return letter
}

// checkHistory checks a dead letter's reason, counts, times and events.
func checkHistory(t *testing.T, l client.DeadLetter, reason client.DeadReason, text string, attempts uint32, last string, want []client.Event) {
	t.Helper()
	if l.Reason != reason || l.ReasonText != text || l.Attempts != attempts || l.LastConsumer != last {
		t.Errorf("%s: reason %v %q, attempts %d, last consumer %q; want %v %q %d %q",
			l.ID, l.Reason, l.ReasonText, l.Attempts, l.LastConsumer, reason, text, attempts, last)
	}
	if l.Body != nil || l.Headers != nil {
		t.Errorf("%s: a listing carries body %q headers %v", l.ID, l.Body, l.Headers)
	}
	if l.DeadAt.IsZero() || l.FirstDeliveredAt.IsZero() || l.LastDeliveredAt.Before(l.FirstDeliveredAt) ||
		l.FirstEnqueuedAt.After(l.FirstDeliveredAt) || l.DeadAt.Before(l.LastDeliveredAt) {
		t.Errorf("%s: inconsistent times %+v", l.ID, l)
	}
	if len(l.History) != len(want) {
		t.Fatalf("%s: history %+v, want %d events", l.ID, l.History, len(want))
	}
	for i, e := range l.History {
		w := want[i]
		if e.Kind != w.Kind || e.Attempt != w.Attempt || e.Consumer != w.Consumer || e.Reason != w.Reason || e.At.IsZero() {
			t.Errorf("%s: event %d is %+v, want %+v", l.ID, i, e, w)
		}
	}
}

// testDeadFilters: every filter field selects what it names.
func testDeadFilters(t *testing.T, cl *client.Client, rejected, exhausted, expired client.DeadLetter) {
	ctx := opContext(t)
	list := func(f client.DeadFilter) []string {
		t.Helper()
		ls, err := cl.DeadLetters(ctx, "dlq", f)
		if err != nil {
			t.Fatalf("list %+v: %v", f, err)
		}
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = l.ID
		}
		return out
	}
	same := func(got []string, want ...string) bool {
		if len(got) != len(want) {
			return false
		}
		seen := map[string]bool{}
		for _, g := range got {
			seen[g] = true
		}
		for _, w := range want {
			if !seen[w] {
				return false
			}
		}
		return true
	}
	cases := []struct {
		name string
		f    client.DeadFilter
		want []string
	}{
		{"all", client.DeadFilter{}, []string{"r1", "e1", "x1"}},
		{"group", client.DeadFilter{Group: "gX"}, []string{"x1"}},
		{"reason", client.DeadFilter{Reason: client.DeadRejected}, []string{"r1"}},
		{"from", client.DeadFilter{From: exhausted.DeadAt}, []string{"e1", "x1"}},
		{"to", client.DeadFilter{To: exhausted.DeadAt}, []string{"r1"}},
		{"seq", client.DeadFilter{Partitions: []int{expired.Partition}, Seqs: []uint64{expired.Seq}}, []string{"x1"}},
		{"reason and group", client.DeadFilter{Reason: client.DeadRejected, Group: "gX"}, nil},
	}
	for _, tc := range cases {
		if got := list(tc.f); !same(got, tc.want...) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := list(client.DeadFilter{Limit: 2}); len(got) != 2 {
		t.Errorf("limit 2: got %v", got)
	}
	ls, err := cl.PeekDeadLetters(ctx, "dlq", client.DeadFilter{Group: "gR"})
	if err != nil || len(ls) != 1 {
		t.Fatalf("peek: %v, %d letters", err, len(ls))
	}
	if l := ls[0]; l.ID != "r1" || string(l.Body) != "rrr" || l.Headers["h"] != "1" || l.Seq != rejected.Seq || l.Bytes == 0 {
		t.Errorf("peeked %+v", l)
	}
}

// testRedriveAndDelete: a redriven letter is ready again with attempts
// reset and id, group, headers and body kept; deletion by seq and by an
// empty filter.
func testRedriveAndDelete(t *testing.T, cl *client.Client, q *client.Queue, exhausted, expired client.DeadLetter) {
	ctx := opContext(t)
	n, err := cl.RedriveDeadLetters(ctx, "dlq", client.DeadFilter{Group: "gR"})
	if err != nil || n != 1 {
		t.Fatalf("redrive: %d, %v", n, err)
	}
	d := receiveOne(t, q, client.ReceiveOptions{Wait: time.Second})
	if d.ID != "r1" || d.Group != "gR" || d.Attempt != 1 || string(d.Body) != "rrr" || d.Headers["h"] != "1" {
		t.Fatalf("redriven message: id %s group %s attempt %d body %q", d.ID, d.Group, d.Attempt, d.Body)
	}
	// The dedup window follows the id to its new seq.
	if res := mustSend(t, q, client.Message{ID: "r1"}); !res.Duplicate || res.Seq != d.Seq {
		t.Fatalf("resend of the redriven r1: %+v, want a duplicate of seq %d", res, d.Seq)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	n, err = cl.DeleteDeadLetters(ctx, "dlq", client.DeadFilter{Partitions: []int{exhausted.Partition}, Seqs: []uint64{exhausted.Seq}})
	if err != nil || n != 1 {
		t.Fatalf("delete e1: %d, %v", n, err)
	}
	if l := onlyDead(t, cl, "dlq", client.DeadFilter{}); l.ID != expired.ID {
		t.Fatalf("left %s, want %s", l.ID, expired.ID)
	}
	if n, err := cl.DeleteDeadLetters(ctx, "dlq", client.DeadFilter{}); err != nil || n != 1 {
		t.Fatalf("delete the rest: %d, %v", n, err)
	}
	if st := stats(t, cl, "dlq"); st.Dead != 0 || st.Ready+st.InFlight+st.Delayed != 0 || st.Counters.Redriven != 1 || st.Counters.DeadDeleted != 2 {
		t.Fatalf("stats: %+v", st)
	}
}

// testConsumeReject: a Consume handler's Reject(err) dead-letters the
// message with err's text; nil acks.
func testConsumeReject(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "handlers")
	q := cl.Queue("handlers")
	mustSend(t, q, client.Message{ID: "good"})
	mustSend(t, q, client.Message{ID: "bad"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- q.Consume(ctx, func(_ context.Context, d *client.Delivery) error {
			if d.ID == "bad" {
				return client.Reject(errors.New("unparseable"))
			}
			return nil
		}, client.ConsumeOptions{Concurrency: 2, Wait: 200 * time.Millisecond, Consumer: "handler-1"})
	}()
	testwait.UntilNil(c.t, waitLong, "both messages settled", func() error {
		if st := stats(t, cl, "handlers"); st.Counters.Acked != 1 || st.Dead != 1 {
			return fmt.Errorf("acked %d dead %d", st.Counters.Acked, st.Dead)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("consume: %v", err)
	}
	l := onlyDead(t, cl, "handlers", client.DeadFilter{})
	if l.ID != "bad" || l.Reason != client.DeadRejected || l.ReasonText != "unparseable" || l.LastConsumer != "handler-1" {
		t.Fatalf("dead letter %+v", l)
	}
}

// TestCluster_PeekDeadLettersLargerThanOneAnswer checks that dead letters
// whose bodies add up to more than one answer may carry (wire's
// PeekBytesMax, 4 MiB) are all peeked, in pages the leader ends by bytes.
func TestCluster_PeekDeadLettersLargerThanOneAnswer(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("dead-peek")
	c.createQueue(cl, "big", client.Partitions(1), client.MaxMessageBytes(2<<20))
	q := cl.Queue("big")
	const total, size = 6, 1 << 20
	for i := range total {
		mustSend(t, q, client.Message{ID: fmt.Sprintf("b%d", i), Body: bytes.Repeat([]byte{byte('a' + i)}, size)})
	}
	for range total {
		d := receiveOne(t, q, client.ReceiveOptions{Wait: time.Second})
		if err := d.Reject(opContext(t), "too big to handle"); err != nil {
			t.Fatal(err)
		}
	}
	letters, err := cl.PeekDeadLetters(opContext(t), "big", client.DeadFilter{})
	if err != nil || len(letters) != total {
		t.Fatalf("PeekDeadLetters: %v, %d letters, want %d", err, len(letters), total)
	}
	for i, l := range letters {
		if l.ID != fmt.Sprintf("b%d", i) || len(l.Body) != size || l.Body[size-1] != byte('a'+i) {
			t.Fatalf("letter %d: %s with %d bytes", i, l.ID, len(l.Body))
		}
	}
}
