package fsm

import (
	"testing"
	"time"
)

// A receive leases at most the room max_in_flight leaves, nothing at the
// bound (and says so to long-pollers); settling makes room again.
func TestFSM_MaxInFlightBoundsLeases(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxInFlight = 3 })
	for i := range 5 {
		h.send(genID(i), "", "x")
	}
	first := h.receive("c1", 2, time.Minute)
	if got := h.receive("c2", 10, time.Minute); len(got) != 1 {
		t.Fatalf("second receive leased %d, want the 1 left of 3", len(got))
	}
	if h.f.HasEligible() {
		t.Fatal("at the bound, a receive is said to lease something")
	}
	h.expectNothing()
	wantNoErr(t, h.ack(first[0].Receipt))
	if !h.f.HasEligible() {
		t.Fatal("an ack made room but long-pollers are not told")
	}
	if got := h.receive("c3", 10, time.Minute); len(got) != 1 {
		t.Fatalf("after an ack: leased %d, want 1", len(got))
	}
	// Lowered below the leases out: nothing more until they fall under it.
	cfg := h.f.Config()
	cfg.MaxInFlight = 1
	wantNoErr(t, h.apply(Command{Type: CmdSetConfig, SetConfig: &cfg}).Err)
	h.expectNothing()
	if st := h.stats(); st.InFlight != 3 || st.Ready != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// The shares of a queue-wide bound add up to it, the remainder to the
// lowest partitions; other settings are left alone.
func TestQueueConfig_PartitionShare(t *testing.T) {
	c := DefaultQueueConfig()
	c.MaxInFlight, c.MaxDepth = 50, 7
	for _, tc := range []struct {
		partitions int
		want       []int64
	}{{1, []int64{50}}, {3, []int64{17, 17, 16}}, {4, []int64{13, 13, 12, 12}}, {50, nil}} {
		var sum int64
		for i := range tc.partitions {
			s := c.PartitionShare(i, tc.partitions)
			if tc.want != nil && s.MaxInFlight != tc.want[i] {
				t.Errorf("%d partitions: share of %d is %d, want %d", tc.partitions, i, s.MaxInFlight, tc.want[i])
			}
			if s.MaxInFlight < 1 || s.MaxDepth != 7 {
				t.Errorf("%d partitions: share of %d is %+v", tc.partitions, i, s)
			}
			sum += s.MaxInFlight
		}
		if sum != 50 {
			t.Errorf("%d partitions: shares add up to %d", tc.partitions, sum)
		}
	}
	c.MaxInFlight = 0
	if s := c.PartitionShare(1, 4); s != c {
		t.Fatalf("no bound: share %+v", s)
	}
}
