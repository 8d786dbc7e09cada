package fsm

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFSM_SendAssignsIncreasingSeqsAndReceiveReturnsContent(t *testing.T) {
	h := newHarness(t)
	out := h.sendMsgs(
		NewMessage{ID: "a", Body: []byte("alpha"), Headers: map[string]string{"k": "v", "trace": "1"}},
		NewMessage{ID: "b", Group: "g1", Body: []byte("beta")},
	)
	if out[0].Seq != 1 || out[1].Seq != 2 || out[0].Duplicate || out[1].Err != nil {
		t.Fatalf("outcomes %+v", out)
	}
	ds := h.receive("c1", 10, 0)
	if len(ds) != 2 {
		t.Fatalf("got %d deliveries", len(ds))
	}
	a, b := ds[0], ds[1]
	if a.ID != "a" || string(a.Body) != "alpha" || a.Headers["k"] != "v" || a.Headers["trace"] != "1" {
		t.Fatalf("first delivery %+v", a)
	}
	if b.ID != "b" || b.Group != "g1" || string(b.Body) != "beta" || b.Headers != nil {
		t.Fatalf("second delivery %+v", b)
	}
	if a.Receipt != (Receipt{Seq: 1, Attempt: 1}) || a.EnqueuedAt != t0 || a.Deadline != t0+int64(30*time.Second) {
		t.Fatalf("receipt/times %+v", a)
	}
	st := h.stats()
	if st.InFlight != 2 || st.Ready != 0 || st.Counters.Sent != 2 || st.Counters.Leased != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFSM_SendDeduplicatesWithinWindow(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.DedupWindow = time.Minute })
	seq := h.send("order-1", "", "x")
	// Same batch and later batch duplicates both point at the original.
	out := h.sendMsgs(NewMessage{ID: "order-1", Body: []byte("y")}, NewMessage{ID: "order-2", Body: []byte("z")}, NewMessage{ID: "order-2", Body: []byte("z")})
	if !out[0].Duplicate || out[0].Seq != seq || out[1].Duplicate || !out[2].Duplicate || out[2].Seq != out[1].Seq {
		t.Fatalf("outcomes %+v", out)
	}
	// Still a duplicate after it was acked.
	d := h.receiveOne("c")
	wantNoErr(t, h.ack(d.Receipt))
	h.advance(59 * time.Second)
	if out := h.sendMsgs(NewMessage{ID: "order-1", Body: []byte("x")}); !out[0].Duplicate || out[0].Seq != seq {
		t.Fatalf("after ack: %+v", out)
	}
	// Outside the window the id is accepted anew.
	h.advance(time.Second)
	if out := h.sendMsgs(NewMessage{ID: "order-1", Body: []byte("x")}); out[0].Duplicate || out[0].Seq <= seq {
		t.Fatalf("after window: %+v", out)
	}
	if st := h.stats(); st.Counters.Duplicates != 3 || st.Counters.Sent != 3 {
		t.Fatalf("counters %+v", st.Counters)
	}
}

func TestFSM_SendWithDedupOffAcceptsRepeats(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.DedupWindow = 0 })
	a, b := h.send("same", "", "1"), h.send("same", "", "2")
	if a == b {
		t.Fatalf("both sends got seq %d", a)
	}
}

func TestFSM_SendRejectsBadMessagesAndChangesNothing(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxMessageBytes = 100 })
	tooManyHeaders := map[string]string{}
	for i := range HeadersMax + 1 {
		tooManyHeaders[strings.Repeat("h", i+1)] = ""
	}
	cases := []struct {
		name string
		msg  NewMessage
		want error
	}{
		{"empty id", NewMessage{Body: []byte("x")}, ErrInvalidArgument},
		{"long id", NewMessage{ID: strings.Repeat("i", IDBytesMax+1)}, ErrInvalidArgument},
		{"bad utf8 id", NewMessage{ID: "\xff"}, ErrInvalidArgument},
		{"long group", NewMessage{ID: "g", Group: strings.Repeat("g", GroupBytesMax+1)}, ErrInvalidArgument},
		{"headers", NewMessage{ID: "h", Headers: tooManyHeaders}, ErrInvalidArgument},
		{"empty header key", NewMessage{ID: "k", Headers: map[string]string{"": "v"}}, ErrInvalidArgument},
		{"negative delay", NewMessage{ID: "d", Delay: -1}, ErrInvalidArgument},
		{"long delay", NewMessage{ID: "d", Delay: SendDelayMax + 1}, ErrInvalidArgument},
		{"body too large", NewMessage{ID: "big", Body: make([]byte, 101)}, ErrMessageTooLarge},
		{"headers count toward size", NewMessage{ID: "big", Body: make([]byte, 90), Headers: map[string]string{"key": "0123456789"}}, ErrMessageTooLarge},
	}
	h.tick() // set the clock, so only the sends could change the digest
	before := h.f.Digest()
	for _, tc := range cases {
		out := h.sendMsgs(tc.msg)
		wantErrIs(t, out[0].Err, tc.want)
	}
	if h.f.Digest() != before || h.store.Live() != 0 {
		t.Fatal("a refused message changed the state")
	}
	// The exact limit is accepted.
	h.send("fits", "", string(make([]byte, 100)))
	for _, n := range []int{0, BatchMax + 1} {
		r := h.apply(Command{Type: CmdSend, Send: &SendCmd{Messages: make([]NewMessage, n)}})
		wantErrIs(t, r.Err, ErrInvalidArgument)
	}
}

func TestFSM_SendRefusesPastMaxDepthAndMaxBytes(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxDepth = 2 })
	h.send("a", "", "x")
	h.send("b", "", "x")
	out := h.sendMsgs(NewMessage{ID: "c", Body: []byte("x")})
	wantErrIs(t, out[0].Err, ErrQueueFull)
	// A refused id is not remembered: it may be sent again once there is room.
	d := h.receiveOne("c")
	wantNoErr(t, h.ack(d.Receipt))
	h.send("c", "", "x")

	hb := newHarness(t, func(c *QueueConfig) { c.MaxBytes = 30 })
	hb.send("a", "", strings.Repeat("x", 20)) // stored as 22 bytes
	out = hb.sendMsgs(NewMessage{ID: "b", Body: []byte(strings.Repeat("x", 7))})
	wantErrIs(t, out[0].Err, ErrQueueFull)
	hb.send("c", "", strings.Repeat("x", 6))
	if st := hb.stats(); st.Bytes != 30 {
		t.Fatalf("bytes %d, want 30", st.Bytes)
	}
}

func TestFSM_SendWithDelayIsInvisibleUntilDue(t *testing.T) {
	h := newHarness(t)
	h.sendMsgs(NewMessage{ID: "later", Body: []byte("x"), Delay: 10 * time.Second}, NewMessage{ID: "now", Body: []byte("y")})
	if got := ids(h.receive("c", 10, 0)); !slices.Equal(got, []string{"now"}) {
		t.Fatalf("got %v", got)
	}
	if dl, ok := h.f.NextDeadline(); !ok || dl != t0+int64(10*time.Second) {
		t.Fatalf("next deadline %d %v", dl, ok)
	}
	h.advance(10*time.Second - 1)
	h.expectNothing()
	h.advance(1)
	if got := ids(h.receive("c", 10, 0)); !slices.Equal(got, []string{"later"}) {
		t.Fatalf("got %v", got)
	}
}

func TestFSM_ReceiveOldestFirstUpToMax(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.send(string(rune('a'+i)), "", "x")
	}
	if got := ids(h.receive("c", 2, 0)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("got %v", got)
	}
	if got := ids(h.receive("c", 10, 0)); !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []ReceiveCmd{{Max: 0}, {Max: ReceiveMax + 1}, {Max: 1, Visibility: -1}, {Max: 1, Visibility: VisibilityTimeoutMax + 1}, {Max: 1, Consumer: strings.Repeat("c", ConsumerBytesMax+1)}} {
		r := h.apply(Command{Type: CmdReceive, Receive: &bad})
		wantErrIs(t, r.Err, ErrInvalidArgument)
	}
}

func TestFSM_ReceiveReturnsRetriedMessagesInSeqOrder(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	h.send("b", "", "x")
	a := h.receiveOne("c")
	wantNoErr(t, h.nack(a.Receipt, 0, true, "again"))
	h.send("c", "", "x")
	// a (seq 1) came back and is older than b and c.
	if got := ids(h.receive("c", 10, 0)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("got %v", got)
	}
}

func TestFSM_ClockNeverRunsBackwards(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	d := h.receiveOne("c")
	h.now -= int64(time.Hour) // a leader with a slow clock
	h.send("b", "", "x")
	if h.f.Clock() != t0 {
		t.Fatalf("clock %d went backwards", h.f.Clock())
	}
	if d2 := h.receiveOne("c"); d2.EnqueuedAt != t0 || d2.Deadline != d.Deadline {
		t.Fatalf("delivery times %+v", d2)
	}
}

func TestFSM_HasEligibleFollowsReadiness(t *testing.T) {
	h := newHarness(t)
	if h.f.HasEligible() {
		t.Fatal("empty FSM has eligible messages")
	}
	h.send("a", "g", "x")
	h.send("b", "g", "x")
	if !h.f.HasEligible() || h.stats().Eligible != 1 || h.stats().Ready != 2 {
		t.Fatalf("stats %+v", h.stats())
	}
	h.receiveOne("c")
	if h.f.HasEligible() {
		t.Fatal("group head leased, yet something eligible")
	}
}

func TestFSM_StatsReportOldestEligibleAgeAndBytes(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "12345")
	h.advance(3 * time.Second)
	h.tick()
	st := h.stats()
	if st.OldestEligibleAge != int64(3*time.Second) || st.Bytes != 7 || st.LastSeq != 1 {
		t.Fatalf("stats %+v", st)
	}
	body := bytes.Repeat([]byte("b"), 10)
	h.sendMsgs(NewMessage{ID: "h", Body: body, Headers: map[string]string{"ab": "cd"}})
	if st := h.stats(); st.Bytes != 7+2+6+4+10 {
		t.Fatalf("bytes %d", st.Bytes)
	}
}
