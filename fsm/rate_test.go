package fsm

import (
	"bytes"
	"testing"
	"time"
)

// At 4 deliveries a second a partition delivers a second's burst, then one
// every quarter second; RateWait says when the next may go, and a receive
// before then leases nothing.
func TestFSM_MaxDeliveryRateSpacesDeliveries(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxDeliveryRate = 4 })
	for i := range 20 {
		h.send(genID(i), "", "x")
	}
	if got := h.receive("c", 10, time.Minute); len(got) != 4 {
		t.Fatalf("first receive leased %d, want the burst of 4", len(got))
	}
	if w := h.f.RateWait(h.now); w != 250*time.Millisecond {
		t.Fatalf("RateWait %v, want 250ms", w)
	}
	h.advance(200 * time.Millisecond)
	h.expectNothing()
	h.advance(50 * time.Millisecond)
	if got := h.receive("c", 10, time.Minute); len(got) != 1 {
		t.Fatalf("after a quarter second: leased %d, want 1", len(got))
	}
	h.advance(time.Second)
	if got := h.receive("c", 10, time.Minute); len(got) != 4 {
		t.Fatalf("after a second: leased %d, want 4", len(got))
	}
	// The schedule survives a snapshot: a restored replica leases the same.
	before := h.f.Digest()
	g := snapshotCopy(t, h.f)
	if g.Digest() != before || g.RateWait(h.now) != h.f.RateWait(h.now) {
		t.Fatal("restored rate schedule differs")
	}
	// Without a bound nothing waits.
	cfg := h.f.Config()
	cfg.MaxDeliveryRate = 0
	wantNoErr(t, h.apply(Command{Type: CmdSetConfig, SetConfig: &cfg}).Err)
	if w := h.f.RateWait(h.now); w != 0 {
		t.Fatalf("RateWait without a bound: %v", w)
	}
	if got := h.receive("c", 10, time.Minute); len(got) != 10 {
		t.Fatalf("unbounded: leased %d, want 10", len(got))
	}
}

// snapshotCopy persists a snapshot of f and restores it into a new FSM.
func snapshotCopy(t *testing.T, f *FSM) *FSM {
	t.Helper()
	snap := f.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	wantNoErr(t, snap.Persist(&buf))
	g, err := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, err)
	wantNoErr(t, g.Restore(&buf))
	return g
}

// Leasable says how many messages a receive applied now would lease: the
// eligible ones, within max_in_flight and the delivery rate bound, none
// while paused; a receive then leases exactly that many.
func TestFSM_LeasableMatchesWhatAReceiveLeases(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxDeliveryRate = 4; c.MaxInFlight = 6 })
	if n := h.f.Leasable(h.now); n != 0 {
		t.Fatalf("empty partition: Leasable %d", n)
	}
	for i := range 20 {
		h.send(genID(i), "", "x")
	}
	wantLeasable := func(want int64) {
		t.Helper()
		n := h.f.Leasable(h.now)
		if n != want {
			t.Fatalf("Leasable %d, want %d", n, want)
		}
		if got := h.receive("c", 100, time.Minute); int64(len(got)) != n {
			t.Fatalf("Leasable said %d, a receive leased %d", n, len(got))
		}
	}
	wantLeasable(4) // the rate's burst
	h.advance(500 * time.Millisecond)
	wantLeasable(2) // max_in_flight leaves 2 of the 2 the rate allows
	h.advance(2 * time.Second)
	wantLeasable(0) // at max_in_flight
	wantNoErr(t, h.pause(true, "ops"))
	cfg := h.f.Config()
	cfg.MaxInFlight, cfg.MaxDeliveryRate = 0, 0
	wantNoErr(t, h.apply(Command{Type: CmdSetConfig, SetConfig: &cfg}).Err)
	wantLeasable(0) // paused
	wantNoErr(t, h.pause(false, "ops"))
	wantLeasable(14)
}
