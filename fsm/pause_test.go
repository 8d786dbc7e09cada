package fsm

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func (h *harness) pause(paused bool, by string) error {
	h.t.Helper()
	return h.apply(Command{Type: CmdPause, Pause: &PauseCmd{Paused: paused, By: by}}).Err
}

// A paused partition accepts sends and settles leases already out, but
// leases nothing and tells long-pollers nothing is eligible; resuming
// delivers what waited.
func TestFSM_PauseLeasesNothingAndSettlesLeasesOut(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	h.send("b", "", "y")
	out := h.receive("c", 1, time.Minute)[0]
	h.advance(time.Second)
	wantNoErr(t, h.pause(true, "oncall"))
	if p := h.f.Pause(); !p.Paused || p.By != "oncall" || p.At != h.now {
		t.Fatalf("pause state %+v", p)
	}
	h.send("c", "", "z")
	if got := h.receive("c", 10, time.Minute); len(got) != 0 {
		t.Fatalf("paused partition leased %d messages", len(got))
	}
	r := h.apply(Command{Type: CmdReceiveAck, ReceiveAck: &ReceiveAckCmd{Receipts: []Receipt{out.Receipt},
		Receive: ReceiveCmd{Consumer: "c", Max: 5}}})
	if len(r.Delivered) != 0 || len(r.Settled) != 1 || r.Settled[0] != nil {
		t.Fatalf("receive-ack while paused: %+v", r)
	}
	if h.f.HasEligible() {
		t.Fatal("paused partition says a receive would lease something")
	}
	if st := h.stats(); st.Ready != 2 || st.Eligible != 2 || st.Counters.Acked != 1 || !st.Pause.Paused {
		t.Fatalf("stats while paused %+v", st)
	}
	// A second pause keeps the first one's name and time.
	h.advance(time.Second)
	wantNoErr(t, h.pause(true, "someone-else"))
	if p := h.f.Pause(); p.By != "oncall" || p.At != h.now-int64(time.Second) {
		t.Fatalf("second pause replaced the first: %+v", p)
	}
	wantNoErr(t, h.pause(false, "oncall"))
	if p := h.f.Pause(); p != (PauseState{}) || !h.f.HasEligible() {
		t.Fatalf("after resume: %+v eligible %v", p, h.f.HasEligible())
	}
	if got := h.receive("c", 10, time.Minute); len(got) != 2 {
		t.Fatalf("resumed partition leased %d, want 2", len(got))
	}
}

// Leases out when the pause applies still expire and come back ready,
// without being leased again until the resume.
func TestFSM_PauseLetsLeasesExpire(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.BackoffBase, c.BackoffMax = 0, 0 })
	h.send("a", "", "x")
	h.receive("c", 1, time.Second)
	wantNoErr(t, h.pause(true, ""))
	h.advance(2 * time.Second)
	if r := h.tick(); r.Count != 1 {
		t.Fatalf("expired %d leases, want 1", r.Count)
	}
	h.expectNothing()
	wantNoErr(t, h.pause(false, ""))
	if d := h.receiveOne("c"); d.Receipt.Attempt != 2 {
		t.Fatalf("after resume: %+v", d.Receipt)
	}
}

// A bad name is refused and changes nothing; the pause survives a
// snapshot and shows in the digest.
func TestFSM_PauseValidatedSnapshottedAndDigested(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	before := h.f.Digest()
	wantErrIs(t, h.pause(true, strings.Repeat("n", PausedByBytesMax+1)), ErrInvalidArgument)
	wantErrIs(t, h.pause(true, "\xff"), ErrInvalidArgument)
	if h.f.Digest() != before || h.f.Pause().Paused {
		t.Fatal("a refused pause changed the state")
	}
	wantNoErr(t, h.pause(true, "ops"))
	if h.f.Digest() == before {
		t.Fatal("the digest does not show the pause")
	}
	snap := h.f.Snapshot()
	var buf bytes.Buffer
	wantNoErr(t, snap.Persist(&buf))
	snap.Release()
	g, err := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, err)
	wantNoErr(t, g.Restore(&buf))
	if g.Pause() != h.f.Pause() || g.Digest() != h.f.Digest() {
		t.Fatalf("restored pause %+v, want %+v", g.Pause(), h.f.Pause())
	}
	data, err := EncodeCommand(Command{Type: CmdPause, At: 1, Pause: &PauseCmd{Paused: true, By: "ops"}})
	wantNoErr(t, err)
	c, err := DecodeCommand(data)
	wantNoErr(t, err)
	if c.Type != CmdPause || c.Pause == nil || *c.Pause != (PauseCmd{Paused: true, By: "ops"}) {
		t.Fatalf("decoded %+v", c)
	}
	if _, err := EncodeCommand(Command{Type: CmdPause}); err == nil {
		t.Fatal("a pause without its payload encoded")
	}
}
