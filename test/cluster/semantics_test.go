package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
)

// TestCluster_DeliverySemantics checks the contract of send, receive and
// the lease operations through the client against a real cluster.
func TestCluster_DeliverySemantics(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("semantics")
	t.Run("ConfirmAndDedup", func(t *testing.T) { testConfirmAndDedup(t, c.with(t), cl) })
	t.Run("LeaseExpiryAndStaleReceipt", func(t *testing.T) { testLeaseExpiry(t, c.with(t), cl) })
	t.Run("AckAfterDeadline", func(t *testing.T) { testAckAfterDeadline(t, c.with(t), cl) })
	t.Run("Extend", func(t *testing.T) { testExtend(t, c.with(t), cl) })
	t.Run("NackDelayVersusBackoff", func(t *testing.T) { testNackDelay(t, c.with(t), cl) })
	t.Run("GroupOrderAcrossRetries", func(t *testing.T) { testGroupOrder(t, c.with(t), cl) })
}

// testConfirmAndDedup: confirms carry (partition, seq); a repeated id is a
// duplicate answering the original seq; what is received is what was
// confirmed.
func testConfirmAndDedup(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "confirm")
	q := cl.Queue("confirm")
	a := mustSend(t, q, client.Message{ID: "a", Body: []byte("first")})
	b := mustSend(t, q, client.Message{ID: "b", Group: "g1", Headers: map[string]string{"k": "v"}, Body: []byte("bee")})
	auto := mustSend(t, q, client.Message{Body: []byte("no id")})
	if a.Partition != 0 || a.Seq == 0 || b.Seq <= a.Seq || auto.Seq <= b.Seq || a.Duplicate || b.Duplicate {
		t.Fatalf("confirms a=%+v b=%+v auto=%+v", a, b, auto)
	}
	if len(auto.ID) != 26 {
		t.Fatalf("assigned id %q, want 26 characters", auto.ID)
	}
	again := mustSend(t, q, client.Message{ID: "a", Body: []byte("second")})
	if !again.Duplicate || again.Seq != a.Seq {
		t.Fatalf("resend of a: %+v, want duplicate of seq %d", again, a.Seq)
	}
	batch, err := q.SendBatch(opContext(t), []client.Message{{ID: "d", Body: []byte("dee")}, {ID: "d", Body: []byte("dup")}})
	if err != nil || batch[0].Duplicate || !batch[1].Duplicate || batch[1].Seq != batch[0].Seq {
		t.Fatalf("batch with a repeated id: %+v, %v", batch, err)
	}

	ds, err := q.Receive(opContext(t), client.ReceiveOptions{Max: 10, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		res  client.SendResult
		body string
	}{{a, "first"}, {b, "bee"}, {auto, "no id"}, {batch[0], "dee"}}
	if len(ds) != len(want) {
		t.Fatalf("received %d messages, want %d", len(ds), len(want))
	}
	for i, w := range want {
		d := ds[i]
		if d.ID != w.res.ID || d.Seq != w.res.Seq || d.Partition != w.res.Partition || string(d.Body) != w.body || d.Attempt != 1 {
			t.Errorf("delivery %d: id %q seq %d body %q attempt %d; want id %q seq %d body %q",
				i, d.ID, d.Seq, d.Body, d.Attempt, w.res.ID, w.res.Seq, w.body)
		}
	}
	if ds[1].Group != "g1" || ds[1].Headers["k"] != "v" {
		t.Errorf("group/headers of b: %q %v", ds[1].Group, ds[1].Headers)
	}
	for i, err := range q.AckBatch(opContext(t), ds) {
		if err != nil {
			t.Errorf("ack %s: %v", ds[i].ID, err)
		}
	}
	st := stats(t, cl, "confirm")
	if st.Ready != 0 || st.InFlight != 0 || st.Counters.Sent != 4 || st.Counters.Duplicates != 2 || st.Counters.Acked != 4 {
		t.Fatalf("stats after acks: %+v", st)
	}
}

// testLeaseExpiry: an unsettled lease runs out on its own and the message
// comes back with attempt 2; the first receipt is then stale.
func testLeaseExpiry(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "lease", client.BackoffBase(20*time.Millisecond))
	q := cl.Queue("lease")
	sent := mustSend(t, q, client.Message{ID: "m", Body: []byte("work")})
	before := time.Now()
	d1 := receiveOne(t, q, client.ReceiveOptions{Visibility: 400 * time.Millisecond, Consumer: "c1"})
	if d1.Attempt != 1 || d1.Seq != sent.Seq {
		t.Fatalf("first delivery %+v", d1)
	}
	if left := d1.Deadline.Sub(before); left < 400*time.Millisecond || left > 10*time.Second {
		t.Fatalf("lease deadline %v after the receive, want about 400ms", left)
	}
	d2 := receiveOne(t, q, client.ReceiveOptions{Wait: 5 * time.Second, Consumer: "c2"})
	if d2.Attempt != 2 || d2.Seq != d1.Seq || d2.ID != "m" || string(d2.Body) != "work" {
		t.Fatalf("redelivery: id %q seq %d attempt %d", d2.ID, d2.Seq, d2.Attempt)
	}
	if elapsed := time.Since(before); elapsed < 400*time.Millisecond {
		t.Fatalf("redelivered after %v, before the 400ms lease ended", elapsed)
	}
	ctx := opContext(t)
	if err := d1.Ack(ctx); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("ack with the superseded receipt: %v, want ErrLeaseLost", err)
	}
	if err := d1.Extend(ctx, time.Minute); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("extend with the superseded receipt: %v, want ErrLeaseLost", err)
	}
	if err := d1.Nack(ctx, client.NackOptions{Immediate: true}); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("nack with the superseded receipt: %v, want ErrLeaseLost", err)
	}
	if err := d2.Ack(ctx); err != nil {
		t.Fatalf("ack with the current receipt: %v", err)
	}
	if err := d2.Ack(ctx); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("second ack: %v, want ErrMessageNotFound", err)
	}
	if st := stats(t, cl, "lease"); st.Counters.Expired != 1 || st.Counters.Acked != 1 || st.Ready+st.InFlight+st.Delayed != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

// testAckAfterDeadline: an ack after the lease ran out but before anyone
// else received the message still deletes it.
func testAckAfterDeadline(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "late", client.BackoffBase(20*time.Millisecond))
	q := cl.Queue("late")
	mustSend(t, q, client.Message{ID: "m"})
	d := receiveOne(t, q, client.ReceiveOptions{Visibility: 200 * time.Millisecond})
	testwait.UntilNil(c.t, waitLong, "lease expiry", func() error {
		if st := stats(t, cl, "late"); st.Counters.Expired != 1 || st.InFlight != 0 {
			return errors.New("lease still running")
		}
		return nil
	})
	if err := d.Ack(opContext(t)); err != nil {
		t.Fatalf("ack after the deadline, nobody else holding it: %v", err)
	}
	receiveNone(t, q, 300*time.Millisecond)
}

// testExtend: an extended lease keeps the message away past its original
// deadline, and the receipt stays valid.
func testExtend(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "extend", client.BackoffBase(20*time.Millisecond))
	q := cl.Queue("extend")
	mustSend(t, q, client.Message{ID: "m"})
	d := receiveOne(t, q, client.ReceiveOptions{Visibility: time.Second})
	original := d.Deadline
	if err := d.Extend(opContext(t), 10*time.Second); err != nil {
		t.Fatalf("extend: %v", err)
	}
	if !d.Deadline.After(original.Add(5 * time.Second)) {
		t.Fatalf("Deadline %v did not follow the extension (was %v)", d.Deadline, original)
	}
	// Well past the original deadline (and its backoff), nothing comes back.
	receiveNone(t, q, 2*time.Second)
	if time.Now().Before(original.Add(500 * time.Millisecond)) {
		t.Fatal("the long poll ended before the original deadline")
	}
	if err := d.Ack(opContext(t)); err != nil {
		t.Fatalf("ack after the original deadline of an extended lease: %v", err)
	}
	if st := stats(t, cl, "extend"); st.Counters.Expired != 0 || st.Counters.Acked != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// testNackDelay: a nack with an explicit delay comes back after that delay,
// one without after the queue's backoff (at least base/2 with jitter).
// Both checks are lower bounds, so a slow machine cannot fail them: the
// explicit delay is far above the backoff, so a nack that ignored it
// would come back too early.
func testNackDelay(t *testing.T, c *testCluster, cl *client.Client) {
	const base, delay = time.Second, 2500 * time.Millisecond
	c.createQueue(cl, "nack", client.BackoffBase(base), client.BackoffMax(time.Minute))
	q := cl.Queue("nack")
	mustSend(t, q, client.Message{ID: "explicit"})
	mustSend(t, q, client.Message{ID: "backoff"})
	ds, err := q.Receive(opContext(t), client.ReceiveOptions{Max: 2, Wait: time.Second})
	if err != nil || len(ds) != 2 || ds[0].ID != "explicit" || ds[1].ID != "backoff" {
		t.Fatalf("receive: %v, %d messages", err, len(ds))
	}
	start := time.Now()
	if err := ds[0].Nack(opContext(t), client.NackOptions{Delay: delay, Reason: "later"}); err != nil {
		t.Fatal(err)
	}
	if err := ds[1].Nack(opContext(t), client.NackOptions{Reason: "back off"}); err != nil {
		t.Fatal(err)
	}
	back := map[string]time.Duration{}
	for range 2 {
		d := receiveOne(t, q, client.ReceiveOptions{Wait: 5 * time.Second})
		back[d.ID] = time.Since(start)
		if d.Attempt != 2 {
			t.Errorf("%s came back with attempt %d, want 2", d.ID, d.Attempt)
		}
		if err := d.Ack(opContext(t)); err != nil {
			t.Fatal(err)
		}
	}
	if at, ok := back["explicit"]; !ok || at < delay {
		t.Errorf("nack with a %v delay: back after %v (received %v)", delay, at, ok)
	}
	if at, ok := back["backoff"]; !ok || at < base/2 {
		t.Errorf("nack with the backoff (base %v, jitter down to half): back after %v (received %v)", base, at, ok)
	}
}

// testGroupOrder: one message of a group is leased at a time, in send
// order; a retried head keeps its group blocked; a dead-lettered head
// unblocks it.
func testGroupOrder(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "groups", client.BackoffBase(50*time.Millisecond))
	q := cl.Queue("groups")
	for _, m := range []client.Message{
		{ID: "A1", Group: "A"}, {ID: "A2", Group: "A"}, {ID: "A3", Group: "A"},
		{ID: "x"}, {ID: "C1", Group: "C"}, {ID: "C2", Group: "C"},
	} {
		mustSend(t, q, m)
	}
	ds, err := q.Receive(opContext(t), client.ReceiveOptions{Max: 10, Wait: time.Second})
	if err != nil || len(ds) != 3 || ds[0].ID != "A1" || ds[1].ID != "x" || ds[2].ID != "C1" {
		t.Fatalf("first receive: %v %v", err, ids(ds))
	}
	head := ds[0]
	if err := ds[1].Ack(opContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := ds[2].Reject(opContext(t), "poison"); err != nil {
		t.Fatal(err)
	}
	if d := receiveOne(t, q, client.ReceiveOptions{Wait: 2 * time.Second}); d.ID != "C2" {
		t.Fatalf("after C1 was dead-lettered got %s, want C2", d.ID)
	} else if err := d.Ack(opContext(t)); err != nil {
		t.Fatal(err)
	}
	// Retry A1 twice: first with a delay, then with the backoff. A2 must
	// wait behind it every time.
	for attempt, opts := range []client.NackOptions{{Delay: 300 * time.Millisecond}, {}} {
		if err := head.Nack(opContext(t), opts); err != nil {
			t.Fatal(err)
		}
		head = receiveOne(t, q, client.ReceiveOptions{Wait: 5 * time.Second})
		if head.ID != "A1" || int(head.Attempt) != attempt+2 {
			t.Fatalf("after nack %d got %s attempt %d, want A1 attempt %d", attempt+1, head.ID, head.Attempt, attempt+2)
		}
	}
	receiveNone(t, q, 200*time.Millisecond)
	for _, want := range []string{"A2", "A3"} {
		if err := head.Ack(opContext(t)); err != nil {
			t.Fatal(err)
		}
		head = receiveOne(t, q, client.ReceiveOptions{Max: 10, Wait: 2 * time.Second})
		if head.ID != want || head.Attempt != 1 {
			t.Fatalf("got %s attempt %d, want %s attempt 1", head.ID, head.Attempt, want)
		}
	}
	if err := head.Ack(opContext(t)); err != nil {
		t.Fatal(err)
	}
}

// ids lists the ids of deliveries.
func ids(ds []*client.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
