package fsm

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestFSM_LeaseExpiryRedeliversAfterBackoffAndFencesOldReceipt(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.BackoffBase, c.BackoffMax = 4*time.Second, time.Minute })
	h.send("a", "", "x")
	first := h.receive("c1", 1, 10*time.Second)[0]
	h.advance(10*time.Second - 1)
	if r := h.tick(); r.Count != 0 {
		t.Fatalf("expired %d leases before the deadline", r.Count)
	}
	h.advance(1)
	if r := h.tick(); r.Count != 1 {
		t.Fatalf("expired %d leases at the deadline, want 1", r.Count)
	}
	st := h.stats()
	if st.Delayed != 1 || st.InFlight != 0 || st.Counters.Expired != 1 {
		t.Fatalf("stats after expiry %+v", st)
	}
	// Backoff after attempt 1 is in [base, base + base/4].
	h.advance(4*time.Second - 1)
	h.expectNothing()
	h.advance(time.Second + 1)
	second := h.receiveOne("c2")
	if second.Receipt.Attempt != 2 || second.Receipt.Seq != first.Receipt.Seq {
		t.Fatalf("second delivery %+v", second.Receipt)
	}
	before := h.f.Digest()
	wantErrIs(t, h.ack(first.Receipt), ErrLeaseLost)
	wantErrIs(t, h.extend(first.Receipt, time.Minute), ErrLeaseLost)
	wantErrIs(t, h.nack(first.Receipt, 0, true, ""), ErrLeaseLost)
	wantErrIs(t, h.reject(first.Receipt, ""), ErrLeaseLost)
	if h.f.Digest() != before {
		t.Fatal("stale receipts changed the state")
	}
	wantNoErr(t, h.ack(second.Receipt))
	wantErrIs(t, h.ack(second.Receipt), ErrNotFound)
	if st := h.stats(); st.InFlight+st.Ready+st.Delayed != 0 || h.store.Live() != 0 {
		t.Fatalf("message left after ack: %+v, %d bodies", st, h.store.Live())
	}
}

func TestFSM_AckAfterDeadlineBeforeRedeliverySucceeds(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	d := h.receive("c", 1, time.Second)[0]
	h.advance(time.Hour)
	h.tick() // expired and visible again, but nobody took it
	wantNoErr(t, h.ack(d.Receipt))
	h.expectNothing()
	if st := h.stats(); st.Counters.Acked != 1 || st.Ready != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFSM_AckAfterExpiryDeadLetteredItStillDeletes(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxReceives = 1 })
	h.send("a", "", "x")
	d := h.receive("c", 1, time.Second)[0]
	h.advance(time.Second)
	h.tick()
	if st := h.stats(); st.Dead != 1 {
		t.Fatalf("not dead-lettered: %+v", st)
	}
	wantNoErr(t, h.ack(d.Receipt))
	if st := h.stats(); st.Dead != 0 || h.store.Live() != 0 {
		t.Fatalf("dead letter kept after ack: %+v", st)
	}
}

func TestFSM_ExtendMovesTheDeadline(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	d := h.receive("c", 1, 10*time.Second)[0]
	h.advance(9 * time.Second)
	wantNoErr(t, h.extend(d.Receipt, 20*time.Second))
	h.advance(19 * time.Second)
	if r := h.tick(); r.Count != 0 {
		t.Fatal("extended lease expired early")
	}
	h.advance(time.Second)
	if r := h.tick(); r.Count != 1 {
		t.Fatal("extended lease did not expire at its new deadline")
	}
	wantErrIs(t, h.extend(d.Receipt, time.Second), ErrLeaseLost)
	wantErrIs(t, h.extend(Receipt{Seq: 99, Attempt: 1}, time.Second), ErrNotFound)
	for _, bad := range []time.Duration{0, -1, VisibilityTimeoutMax + 1} {
		wantErrIs(t, h.extend(d.Receipt, bad), ErrInvalidArgument)
	}
}

func TestFSM_NackWithExplicitDelayOrBackoff(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.BackoffBase, c.BackoffMax = time.Second, 3*time.Second })
	h.send("a", "", "x")
	d := h.receiveOne("c")
	wantNoErr(t, h.nack(d.Receipt, 5*time.Second, true, "db down"))
	h.advance(5*time.Second - 1)
	h.expectNothing()
	h.advance(1)
	d = h.receiveOne("c")
	if d.Receipt.Attempt != 2 {
		t.Fatalf("attempt %d", d.Receipt.Attempt)
	}
	// Backoff: attempt 2 → min(3s, 2s) = 2s, jittered into [2s, 2.5s].
	wantNoErr(t, h.nack(d.Receipt, 0, false, ""))
	dl, _ := h.f.NextDeadline()
	if wait := time.Duration(dl - h.now); wait < 2*time.Second || wait > 2500*time.Millisecond {
		t.Fatalf("backoff %v outside [2s, 2.5s]", wait)
	}
	wantErrIs(t, h.nack(Receipt{Seq: 1, Attempt: 2}, 0, true, ""), ErrLeaseLost)
	wantErrIs(t, h.nack(Receipt{Seq: 1, Attempt: 2}, DelayMax+1, true, ""), ErrInvalidArgument)
	if st := h.stats(); st.Counters.Nacked != 2 {
		t.Fatalf("nacked %d", st.Counters.Nacked)
	}
}

func TestFSM_BackoffIsBoundedDeterministicAndJittered(t *testing.T) {
	f, _ := New(QueueConfig{BackoffBase: time.Second, BackoffMax: time.Minute, MaxMessageBytes: 1}, NewMemBodyStore())
	seen := map[time.Duration]bool{}
	for k := range 50 {
		id := fmt.Sprintf("msg-%d", k)
		for attempt := uint32(1); attempt <= 200; attempt++ {
			m := &message{attempts: attempt}
			m.setID(id)
			d := time.Second << min(attempt-1, 10)
			d = min(d, time.Minute)
			top := min(time.Minute, d+d/4)
			got := f.backoff(m)
			if got < d || got > top || got != f.backoff(m) {
				t.Fatalf("%s attempt %d: backoff %v outside [%v, %v] or not deterministic", id, attempt, got, d, top)
			}
			seen[got] = true
		}
	}
	if len(seen) < 50 {
		t.Fatalf("only %d distinct backoffs: no jitter", len(seen))
	}
	f.cfg.BackoffBase, f.cfg.BackoffMax = 0, 0
	if got := f.backoff(&message{attempts: 3}); got != 0 {
		t.Fatalf("zero base gave %v", got)
	}
}

// The first retry never comes sooner than BackoffBase: the documented
// "base is the delay after the first failure" holds for every message.
func TestFSM_FirstRetryWaitsAtLeastTheBase(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.BackoffBase, c.BackoffMax = time.Second, time.Minute })
	for k := range 40 {
		h.send(fmt.Sprintf("m%d", k), "", "x")
	}
	for k := range 40 {
		d := h.receiveOne("c")
		wantNoErr(t, h.nack(d.Receipt, 0, false, ""))
		dl, _ := h.f.NextDeadline()
		if wait := time.Duration(dl - h.now); wait < time.Second || wait > 1250*time.Millisecond {
			t.Fatalf("message %d: first retry after %v, want [1s, 1.25s]", k, wait)
		}
		h.advance(2 * time.Second)
		h.tick()
		d = h.receiveOne("c")
		wantNoErr(t, h.ack(d.Receipt))
	}
}

func TestFSM_RejectDeadLettersAtOnceWithReason(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	d := h.receiveOne("worker-7")
	h.advance(time.Second)
	wantNoErr(t, h.reject(d.Receipt, "malformed payload"))
	dead, err := h.f.ListDead(DeadFilter{})
	wantNoErr(t, err)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters", len(dead))
	}
	dl := dead[0]
	if dl.Reason != DeadRejected || dl.ReasonText != "malformed payload" || dl.Attempts != 1 || dl.LastConsumer != "worker-7" ||
		dl.DeadAt != t0+int64(time.Second) || dl.FirstDeliveredAt != t0 || dl.ID != "a" || len(dl.History) != 1 ||
		dl.History[0].Kind != EventRejected || dl.History[0].Consumer != "worker-7" {
		t.Fatalf("dead letter %+v", dl)
	}
	wantErrIs(t, h.ack(d.Receipt), ErrLeaseLost)
	if st := h.stats(); st.Counters.Rejected != 1 || st.Counters.DeadLettered != 1 || st.Dead != 1 || st.DeadBytes != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFSM_MaxReceivesDeadLettersWithHistory(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxReceives, c.BackoffBase, c.BackoffMax = 3, 0, 0 })
	h.send("poison", "", "x")
	for attempt := uint32(1); attempt <= 3; attempt++ {
		d := h.receive("c", 1, time.Second)[0]
		if d.Receipt.Attempt != attempt {
			t.Fatalf("attempt %d, want %d", d.Receipt.Attempt, attempt)
		}
		if attempt == 2 {
			wantNoErr(t, h.nack(d.Receipt, 0, false, "boom"))
			continue
		}
		h.advance(time.Second)
		h.tick()
	}
	h.expectNothing()
	dead, _ := h.f.ListDead(DeadFilter{})
	if len(dead) != 1 || dead[0].Reason != DeadLeaseExpired || dead[0].Attempts != 3 {
		t.Fatalf("dead %+v", dead)
	}
	kinds := []EventKind{}
	for _, e := range dead[0].History {
		kinds = append(kinds, e.Kind)
	}
	if !slices.Equal(kinds, []EventKind{EventLeaseExpired, EventNacked, EventLeaseExpired}) || dead[0].History[1].Reason != "boom" {
		t.Fatalf("history %+v", dead[0].History)
	}

	// A nack on the last allowed receive dead-letters as retries exhausted.
	h2 := newHarness(t, func(c *QueueConfig) { c.MaxReceives = 1 })
	h2.send("b", "", "x")
	wantNoErr(t, h2.nack(h2.receiveOne("c").Receipt, 0, true, "nope"))
	dead, _ = h2.f.ListDead(DeadFilter{})
	if len(dead) != 1 || dead[0].Reason != DeadRetriesExhausted || dead[0].ReasonText != "nope" {
		t.Fatalf("dead %+v", dead)
	}
}

func TestFSM_LoweredMaxReceivesDeadLettersOnNextReceive(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.BackoffBase, c.BackoffMax = 0, 0 })
	h.send("a", "g", "x")
	h.send("b", "g", "y")
	for range 3 {
		wantNoErr(t, h.nack(h.receiveOne("c").Receipt, 0, true, ""))
	}
	cfg := h.f.Config()
	cfg.MaxReceives = 2
	if r := h.apply(Command{Type: CmdSetConfig, SetConfig: &cfg}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := ids(h.receive("c", 10, 0)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("got %v, want b (a dead-lettered)", got)
	}
	if st := h.stats(); st.Dead != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFSM_GroupsLeaseOneAtATimeInSendOrder(t *testing.T) {
	h := newHarness(t)
	h.send("g1-1", "g1", "x")
	h.send("g2-1", "g2", "x")
	h.send("g1-2", "g1", "x")
	h.send("free", "", "x")
	h.send("g2-2", "g2", "x")
	first := h.receive("c", 10, 0)
	if got := ids(first); !slices.Equal(got, []string{"g1-1", "g2-1", "free"}) {
		t.Fatalf("got %v", got)
	}
	h.expectNothing()
	wantNoErr(t, h.ack(first[0].Receipt))
	if got := ids(h.receive("c", 10, 0)); !slices.Equal(got, []string{"g1-2"}) {
		t.Fatalf("got %v", got)
	}
}

func TestFSM_RetriedGroupHeadKeepsGroupBlocked(t *testing.T) {
	h := newHarness(t)
	h.send("1", "acct", "x")
	h.send("2", "acct", "x")
	d := h.receiveOne("c")
	wantNoErr(t, h.nack(d.Receipt, time.Minute, true, "retry later"))
	h.expectNothing() // 2 must not overtake 1
	h.advance(time.Minute)
	d = h.receiveOne("c")
	if d.ID != "1" || d.Receipt.Attempt != 2 {
		t.Fatalf("got %s attempt %d", d.ID, d.Receipt.Attempt)
	}
	// Lease expiry keeps it blocked too.
	h.advance(time.Hour)
	h.tick()
	h.expectNothing() // backing off, and 2 still waits
	h.advance(time.Minute)
	d = h.receiveOne("c")
	if d.ID != "1" {
		t.Fatalf("got %s after expiry, want 1", d.ID)
	}
	// Dead-lettering the head unblocks the group.
	wantNoErr(t, h.reject(d.Receipt, "poison"))
	if d = h.receiveOne("c"); d.ID != "2" {
		t.Fatalf("got %s, want 2", d.ID)
	}
}

func TestFSM_DelayedGroupHeadBlocksLaterMessages(t *testing.T) {
	h := newHarness(t)
	h.sendMsgs(NewMessage{ID: "1", Group: "g", Delay: time.Minute}, NewMessage{ID: "2", Group: "g"})
	h.expectNothing()
	h.advance(time.Minute)
	if got := ids(h.receive("c", 10, 0)); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("got %v", got)
	}
}

func TestFSM_SettleBatchesReportPerItem(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	h.send("b", "", "x")
	ds := h.receive("c", 2, 0)
	r := h.apply(Command{Type: CmdAck, Ack: &AckCmd{Receipts: []Receipt{ds[0].Receipt, {Seq: 42, Attempt: 1}, ds[1].Receipt}}})
	if r.Settled[0] != nil || r.Settled[2] != nil {
		t.Fatalf("settled %v", r.Settled)
	}
	wantErrIs(t, r.Settled[1], ErrNotFound)
	for _, c := range []Command{
		{Type: CmdAck, Ack: &AckCmd{}},
		{Type: CmdNack, Nack: &NackCmd{Items: make([]NackItem, BatchMax+1)}},
	} {
		wantErrIs(t, h.apply(c).Err, ErrInvalidArgument)
	}
}

func TestFSM_SkipBodiesChangesOnlyTheBodies(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	b.f.SkipBodies(true)
	for _, h := range []*harness{a, b} {
		h.sendMsgs(NewMessage{ID: "x", Group: "g", Body: []byte("body"), Headers: map[string]string{"k": "v"}})
	}
	da, db := a.receiveOne("c"), b.receiveOne("c")
	if db.Body != nil || db.Headers != nil || db.ID != "x" || db.Group != "g" || db.Receipt != da.Receipt || db.Deadline != da.Deadline {
		t.Fatalf("skipped delivery %+v vs %+v", db, da)
	}
	if string(da.Body) != "body" || a.f.Digest() != b.f.Digest() {
		t.Fatal("skipping bodies changed the state")
	}
}

// A released delivery does not count: the message is ready at once, the
// next delivery carries the same attempt number, max_receives is not
// reached, no failure is recorded, and the released receipt is stale.
func TestFSM_ReleaseGivesBackWithoutPenalty(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxReceives, c.BackoffBase, c.BackoffMax = 1, time.Minute, time.Hour })
	h.send("a", "g", "x")
	h.send("b", "g", "y")
	d := h.receiveOne("c1")
	release := func(r Receipt, explicit bool) error {
		res := h.apply(Command{Type: CmdNack, Nack: &NackCmd{Items: []NackItem{{Receipt: r, Release: true, ExplicitDelay: explicit}}}})
		if res.Err != nil {
			return res.Err
		}
		return res.Settled[0]
	}
	wantErrIs(t, release(d.Receipt, true), ErrInvalidArgument)
	for range 3 {
		wantNoErr(t, release(d.Receipt, false))
		wantErrIs(t, release(d.Receipt, false), ErrLeaseLost)
		wantErrIs(t, h.ack(d.Receipt), ErrLeaseLost)
		next := h.receiveOne("c2")
		if next.ID != "a" || next.Receipt != d.Receipt {
			t.Fatalf("after release got %s %+v, want a %+v", next.ID, next.Receipt, d.Receipt)
		}
		d = next
	}
	st := h.stats()
	if st.Dead != 0 || st.Counters.Nacked != 0 || st.Counters.Expired != 0 {
		t.Fatalf("release left a trace: %+v", st)
	}
	wantNoErr(t, h.ack(d.Receipt))
	if got := h.receiveOne("c3"); got.ID != "b" || got.Receipt.Attempt != 1 {
		t.Fatalf("group order after release: %s %+v", got.ID, got.Receipt)
	}
}
