package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func fairOn(c *QueueConfig) { c.FairGroups = 1 }

// receiveAcked receives n messages one at a time, acking each, and returns
// their ids.
func (h *harness) receiveAcked(n int) []string {
	h.t.Helper()
	var out []string
	for range n {
		ds := h.receive("c", 1, 0)
		if len(ds) == 0 {
			break
		}
		out = append(out, ds[0].ID)
		wantNoErr(h.t, h.ack(ds[0].Receipt))
	}
	return out
}

// TestFair_SmallGroupsPassAnUngroupedFlood: groups sent after a flood of
// ungrouped messages wait behind all of it unless delivery is fair; fair,
// one receive takes one ungrouped message and every small group.
func TestFair_SmallGroupsPassAnUngroupedFlood(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			var mutate []func(*QueueConfig)
			if fair {
				mutate = append(mutate, fairOn)
			}
			h := newHarness(t, mutate...)
			for i := range 500 {
				h.send(fmt.Sprintf("flood%d", i), "", "x")
			}
			for i := range 10 {
				h.send(fmt.Sprintf("small%d", i), fmt.Sprintf("g%d", i), "x")
			}
			got := ids(h.receive("c", 11, 0))
			small := 0
			for _, id := range got {
				if id[0] == 's' {
					small++
				}
			}
			want := 0
			if fair {
				want = 10
			}
			if small != want || len(got) != 11 {
				t.Fatalf("11 deliveries %v took %d small groups, want %d", got, small, want)
			}
			if fair && got[0] != "flood0" {
				t.Fatalf("the ungrouped lane, never served, goes first: %v", got)
			}
		})
	}
}

// TestFair_LanesTakeTurns: two groups with several messages each and the
// ungrouped messages are served in turn, each lane going to the back
// after its delivery; within a lane the order is kept.
func TestFair_LanesTakeTurns(t *testing.T) {
	h := newHarness(t, fairOn)
	for i := range 3 {
		h.send(fmt.Sprintf("u%d", i), "", "x")
	}
	for i := range 3 {
		h.send(fmt.Sprintf("a%d", i), "a", "x")
	}
	for i := range 3 {
		h.send(fmt.Sprintf("b%d", i), "b", "x")
	}
	got := h.receiveAcked(9)
	want := []string{"u0", "a0", "b0", "u1", "a1", "b1", "u2", "a2", "b2"}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

// TestFair_WithinAPriorityLevel: an urgent message still goes first; the
// lanes take turns within each level.
func TestFair_WithinAPriorityLevel(t *testing.T) {
	h := newHarness(t, fairOn)
	h.sendPrio("u0", "", 0)
	h.sendPrio("u1", "", 0)
	h.sendPrio("a0", "a", 0)
	h.sendPrio("hot-u", "", 9)
	h.sendPrio("hot-b", "b", 9)
	h.sendPrio("hot-u2", "", 9)
	got := ids(h.receive("c", 10, 0))
	// The ungrouped lane is one lane across the levels: its urgent
	// deliveries sent it behind a at priority 0.
	want := []string{"hot-u", "hot-b", "hot-u2", "a0", "u0", "u1"}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

// TestFair_TurnedOnAndOff: turning fair delivery on moves the group heads
// the fresh cursor held into the lanes; turning it off empties them and
// the oldest goes first again.
func TestFair_TurnedOnAndOff(t *testing.T) {
	h := newHarness(t)
	for i := range 4 {
		h.send(fmt.Sprintf("u%d", i), "", "x")
	}
	h.send("a0", "a", "x")
	h.send("b0", "b", "x")
	cfg := h.f.Config()
	cfg.FairGroups = 1
	wantNoErr(t, h.apply(Command{Type: CmdSetConfig, SetConfig: &cfg}).Err)
	if h.f.lanes.Len() != 2 {
		t.Fatalf("%d lanes after turning fair on", h.f.lanes.Len())
	}
	// a and b were created unstamped: they tie with the ungrouped lane,
	// which goes first, then the oldest.
	if got := ids(h.receive("c", 3, 0)); !slices.Equal(got, []string{"u0", "a0", "b0"}) {
		t.Fatalf("fair: %v", got)
	}
	cfg.FairGroups = 0
	wantNoErr(t, h.apply(Command{Type: CmdSetConfig, SetConfig: &cfg}).Err)
	if h.f.lanes != nil {
		t.Fatal("lanes kept after turning fair off")
	}
	h.send("c0", "c", "x")
	if got := ids(h.receive("c", 10, 0)); !slices.Equal(got, []string{"u1", "u2", "u3", "c0"}) {
		t.Fatalf("oldest first again: %v", got)
	}
}

// TestFair_SnapshotRoundTrip: the stamps survive both snapshot forms; the
// restored copy leases as the original does. A partition that never
// delivered fairly writes no stamps.
func TestFair_SnapshotRoundTrip(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			h := newHarness(t, fairOn)
			for i := range 4 {
				h.send(fmt.Sprintf("u%d", i), "", "x")
				h.send(fmt.Sprintf("a%d", i), "a", "x")
				h.send(fmt.Sprintf("b%d", i), "b", "x")
				h.sendPrio(fmt.Sprintf("c%d", i), "c", 4)
			}
			h.receiveAcked(5)
			snap := h.f.Snapshot()
			var buf bytes.Buffer
			persist := snap.Persist
			if local {
				persist = snap.PersistLocal
			}
			wantNoErr(t, persist(&buf))
			snap.Release()
			c, err := New(h.f.Config(), h.store)
			if !local {
				c, err = New(h.f.Config(), NewMemBodyStore())
			}
			wantNoErr(t, err)
			wantNoErr(t, c.Restore(&buf))
			wantNoErr(t, c.checkInvariants())
			if c.Digest() != h.f.Digest() || c.laneClock != h.f.laneClock || c.plainTick != h.f.plainTick {
				t.Fatal("restored digest or stamps differ")
			}
			for range 4 {
				cmd := Command{Type: CmdReceive, At: h.now, Receive: &ReceiveCmd{Consumer: "c", Max: 2}}
				a, b := h.f.ApplyCommand(cmd), c.ApplyCommand(cmd)
				if !slices.Equal(ids(a.Delivered), ids(b.Delivered)) || c.Digest() != h.f.Digest() {
					t.Fatalf("original leased %v, restored %v", ids(a.Delivered), ids(b.Delivered))
				}
			}
		})
	}
	h := newHarness(t)
	h.send("a0", "a", "x")
	h.receive("c", 1, 0)
	snap := h.f.Snapshot()
	var buf bytes.Buffer
	wantNoErr(t, snap.Persist(&buf))
	snap.Release()
	if bytes.Contains(buf.Bytes(), []byte("lane")) {
		t.Fatal("a snapshot of a partition never fair names lane stamps")
	}
}

// TestFair_DigestOnlyWhenOn: the stamps enter the digest while delivery is
// fair, so a state that never turned it on digests as before.
func TestFair_DigestOnlyWhenOn(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	for _, h := range []*harness{a, b} {
		h.send("a0", "a", "x")
	}
	b.f.laneClock = 7 // not fair: not digested
	if a.f.Digest() != b.f.Digest() {
		t.Fatal("stamps digested while fair delivery is off")
	}
	b.f.cfg.FairGroups, a.f.cfg.FairGroups = 1, 1
	if a.f.Digest() == b.f.Digest() {
		t.Fatal("stamps not digested while fair delivery is on")
	}
}

// TestFair_BadSnapshotStampsRefused: a stamp of a group the snapshot does
// not hold, or ahead of the lane clock, is a format error.
func TestFair_BadSnapshotStampsRefused(t *testing.T) {
	h := newHarness(t, fairOn)
	h.send("a0", "a", "x")
	for _, bad := range []snapHeader{
		{LaneClock: 1, Lanes: []snapLane{{Group: "nope", Served: 1}}},
		{LaneClock: 1, Lanes: []snapLane{{Group: "a", Served: 2}}},
		{LaneClock: 1, PlainTick: 2},
	} {
		if err := h.f.restoreLanes(&bad); err == nil {
			t.Fatalf("stamps %+v accepted", bad)
		}
	}
}

// TestFair_SettingRange: fair_groups is 0 or 1.
func TestFair_SettingRange(t *testing.T) {
	cfg := DefaultQueueConfig()
	cfg.FairGroups = 2
	wantErrIs(t, cfg.Validate(), ErrInvalidConfig)
	cfg.FairGroups = 1
	wantNoErr(t, cfg.Validate())
}

// TestFSM_PropertyFairnessBound: with fair_groups on, a group whose head
// is eligible at priority p gets its delivery before the other lanes get
// more than one delivery each at p: at most as many as there were groups
// (counting the ungrouped lane, not counting itself) when the head was
// seen eligible. New groups queue behind it.
func TestFSM_PropertyFairnessBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultQueueConfig()
		cfg.FairGroups = 1
		cfg.MaxReceives = 0
		f, _ := New(cfg, NewMemBodyStore())
		type watch struct {
			seq    uint64
			prio   uint8
			budget int // deliveries of other lanes at prio allowed before it
			passed int
		}
		watched := map[string]*watch{}
		var leased []Receipt
		now, n := t0, 0
		for range rapid.IntRange(1, 300).Draw(rt, "steps") {
			now += int64(time.Millisecond)
			c, ok := genFairCommand(rt, &n, &leased)
			if !ok {
				continue
			}
			c.At = now
			res := f.ApplyCommand(c)
			for _, d := range res.Delivered {
				leased = append(leased, d.Receipt)
				for g, w := range watched {
					switch {
					case d.Group == g && d.Receipt.Seq == w.seq:
						delete(watched, g)
					case d.Priority == w.prio:
						if w.passed++; w.passed > w.budget {
							rt.Fatalf("group %s (head seq %d, priority %d) passed over %d times, bound %d",
								g, w.seq, w.prio, w.passed, w.budget)
						}
					}
				}
			}
			for g, w := range watched {
				if gr := f.groups[g]; gr == nil || gr.first().seq != w.seq || gr.first().eligible == notEligible {
					delete(watched, g) // deleted, or leased by the receive that ended it
				}
			}
			for name, g := range f.groups {
				if h := g.first(); h.eligible != notEligible && watched[name] == nil {
					watched[name] = &watch{seq: h.seq, prio: h.priority(), budget: len(f.groups)}
				}
			}
			if err := f.checkInvariants(); err != nil {
				rt.Fatal(err)
			}
		}
	})
}

// genFairCommand draws a send (to one of a few groups, or none; some
// urgent), an ack or nack of a lease out (taken off leased), or a
// receive; false when it drew a settle with nothing leased.
func genFairCommand(rt *rapid.T, n *int, leased *[]Receipt) (Command, bool) {
	groups := []string{"", "", "", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8"}
	switch rapid.IntRange(0, 5).Draw(rt, "op") {
	case 0, 1:
		*n++
		return Command{Type: CmdSend, Send: &SendCmd{Messages: []NewMessage{{ID: fmt.Sprintf("m%d", *n),
			Group:    rapid.SampledFrom(groups).Draw(rt, "group"),
			Priority: rapid.SampledFrom([]uint8{0, 0, 0, 5}).Draw(rt, "prio")}}}}, true
	case 2:
		if len(*leased) == 0 {
			return Command{}, false
		}
		i := rapid.IntRange(0, len(*leased)-1).Draw(rt, "settle")
		r := (*leased)[i]
		*leased = slices.Delete(*leased, i, i+1)
		if rapid.Bool().Draw(rt, "nack") {
			return Command{Type: CmdNack, Nack: &NackCmd{Items: []NackItem{{Receipt: r, ExplicitDelay: true}}}}, true
		}
		return Command{Type: CmdAck, Ack: &AckCmd{Receipts: []Receipt{r}}}, true
	}
	return Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: rapid.IntRange(1, 4).Draw(rt, "max"),
		Visibility: time.Hour}}, true
}

// TestFair_ConfigCommandCodec: a set-config entry carries fair_groups, and
// one written before the setting existed (without it) decodes as off.
func TestFair_ConfigCommandCodec(t *testing.T) {
	cfg := DefaultQueueConfig()
	cfg.FairGroups = 1
	data, err := EncodeCommand(Command{Type: CmdSetConfig, At: t0, SetConfig: &cfg})
	wantNoErr(t, err)
	back, err := DecodeCommand(data)
	wantNoErr(t, err)
	if back.SetConfig.FairGroups != 1 {
		t.Fatalf("fair_groups decoded as %d", back.SetConfig.FairGroups)
	}
	cfg.FairGroups = 0
	data, err = EncodeCommand(Command{Type: CmdSetConfig, At: t0, SetConfig: &cfg})
	wantNoErr(t, err)
	if bytes.Contains(data, []byte("fair_groups")) {
		t.Fatal("a config with fair_groups off names it: older entries would not match")
	}
}
