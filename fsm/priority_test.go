package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// sendPrio sends one message of priority p (and group g) and returns its
// seq.
func (h *harness) sendPrio(id, group string, p uint8) uint64 {
	h.t.Helper()
	out := h.sendMsgs(NewMessage{ID: id, Group: group, Body: []byte(id), Priority: p})
	wantNoErr(h.t, out[0].Err)
	return out[0].Seq
}

// receiveIDs receives one message at a time until none is eligible and
// returns their ids, acking each.
func (h *harness) receiveIDs() []string {
	h.t.Helper()
	var out []string
	for {
		ds := h.receive("c", 1, 0)
		if len(ds) == 0 {
			return out
		}
		out = append(out, ds[0].ID)
		wantNoErr(h.t, h.ack(ds[0].Receipt))
	}
}

func TestPriority_HighestFirstOldestWithin(t *testing.T) {
	h := newHarness(t)
	h.sendPrio("a0", "", 0)
	h.sendPrio("b5", "", 5)
	h.sendPrio("c0", "", 0)
	h.sendPrio("d9", "", 9)
	h.sendPrio("e5", "", 5)
	ds := h.receive("c", 10, 0)
	if got, want := ids(ds), []string{"d9", "b5", "e5", "a0", "c0"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	for _, d := range ds {
		if want := uint8(d.ID[1] - '0'); d.Priority != want {
			t.Errorf("%s delivered with priority %d", d.ID, d.Priority)
		}
	}
}

func TestPriority_DefaultKeepsFIFO(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.send(fmt.Sprintf("m%d", i), "", "x")
	}
	if got := h.receiveIDs(); !slices.Equal(got, []string{"m0", "m1", "m2", "m3", "m4"}) {
		t.Fatalf("delivered %v", got)
	}
	for _, l := range h.f.levels {
		if l != nil || h.f.high != 0 || h.f.guard != 0 {
			t.Fatal("priority 0 alone used the priority indexes")
		}
	}
}

func TestPriority_GroupOrderWins(t *testing.T) {
	h := newHarness(t)
	h.sendPrio("g-low", "g", 0)
	h.sendPrio("g-high", "g", 9)
	h.sendPrio("x5", "", 5)
	// The group competes with its head (priority 0): x5 first, then the
	// head; its priority-9 member waits for the head's ack.
	ds := h.receive("c", 10, 0)
	if got := ids(ds); !slices.Equal(got, []string{"x5", "g-low"}) {
		t.Fatalf("delivered %v", got)
	}
	h.sendPrio("y1", "", 1)
	wantNoErr(t, h.ack(ds[1].Receipt))
	// Now the group's head is priority 9.
	if got := h.receiveIDs(); !slices.Equal(got, []string{"g-high", "y1"}) {
		t.Fatalf("then %v", got)
	}
}

func TestPriority_RetryKeepsPriority(t *testing.T) {
	h := newHarness(t)
	h.sendPrio("hi", "", 7)
	d := h.receiveOne("c")
	wantNoErr(t, h.nack(d.Receipt, 0, true, "again"))
	h.sendPrio("lo", "", 0)
	if got := h.receiveIDs(); !slices.Equal(got, []string{"hi", "lo"}) {
		t.Fatalf("delivered %v", got)
	}
}

// TestPriority_GuardBound: under a steady stream of priority-9 messages
// (one sent per receive), waiting priority-0 messages get every 16th
// lease, oldest first.
func TestPriority_GuardBound(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.sendPrio(fmt.Sprintf("low%d", i), "", 0)
	}
	h.sendPrio("mid", "", 4)
	var lowAt []int
	var lowIDs []string
	for n := 1; n <= 100; n++ {
		h.sendPrio(fmt.Sprintf("hot%d", n), "", 9)
		d := h.receiveOne("c")
		if d.Priority < 9 {
			lowAt = append(lowAt, n)
			lowIDs = append(lowIDs, d.ID)
		}
		wantNoErr(t, h.ack(d.Receipt))
	}
	if want := []int{16, 32, 48, 64}; !slices.Equal(lowAt, want) {
		t.Fatalf("lower priorities leased at %v, want %v", lowAt, want)
	}
	// The oldest of the lower levels goes first, whatever its level.
	if want := []string{"low0", "low1", "low2", "mid"}; !slices.Equal(lowIDs, want) {
		t.Fatalf("lower priorities leased in order %v, want %v", lowIDs, want)
	}
}

// TestPriority_GuardRestsWithoutLowerWork: the guard counts only leases
// that pass a waiting lower message over.
func TestPriority_GuardRestsWithoutLowerWork(t *testing.T) {
	h := newHarness(t)
	for i := range 20 {
		h.sendPrio(fmt.Sprintf("hot%d", i), "", 9)
	}
	h.receive("c", 20, 0)
	if h.f.guard != 0 {
		t.Fatalf("guard at %d with no lower message waiting", h.f.guard)
	}
	h.sendPrio("hot20", "", 9)
	h.sendPrio("low", "", 0)
	ds := h.receive("c", 2, 0)
	if got := ids(ds); !slices.Equal(got, []string{"hot20", "low"}) {
		t.Fatalf("delivered %v", got)
	}
}

func TestPriority_OutOfRangeRefused(t *testing.T) {
	h := newHarness(t)
	h.sendPrio("ok", "", 9)
	before := h.f.Digest()
	out := h.sendMsgs(NewMessage{ID: "bad", Body: []byte("x"), Priority: PriorityMax + 1})
	wantErrIs(t, out[0].Err, ErrInvalidArgument)
	if h.f.Digest() != before {
		t.Fatal("a refused priority changed the state")
	}
	for _, p := range []int{-1, 10, 255} {
		if err := ValidatePriority(p); err == nil {
			t.Errorf("priority %d accepted", p)
		}
	}
	if err := ValidatePriority(9); err != nil {
		t.Error(err)
	}
}

// TestPriority_ShownAndKept: peek, find and dead letters show the
// priority; a redrive keeps it.
func TestPriority_ShownAndKept(t *testing.T) {
	h := newHarness(t)
	seq := h.sendPrio("p6", "g", 6)
	res, err := h.f.Peek(PeekFilter{Max: 10})
	wantNoErr(t, err)
	if len(res.Messages) != 1 || res.Messages[0].Priority != 6 {
		t.Fatalf("peek %+v", res.Messages)
	}
	d := h.receiveOne("c")
	wantNoErr(t, h.reject(d.Receipt, "no"))
	found := h.f.Find("p6")
	if len(found) != 1 || found[0].Priority != 6 || found[0].Dead == nil || found[0].Dead.Priority != 6 {
		t.Fatalf("find %+v", found)
	}
	dead, err := h.f.ListDead(DeadFilter{})
	wantNoErr(t, err)
	if len(dead) != 1 || dead[0].Priority != 6 {
		t.Fatalf("dead letters %+v", dead)
	}
	h.apply(Command{Type: CmdRedrive, Redrive: &DeadFilter{Seqs: []uint64{seq}}})
	h.sendPrio("p2", "", 2)
	if got := h.receive("c", 2, 0); len(got) != 2 || got[0].ID != "p6" || got[0].Priority != 6 {
		t.Fatalf("after redrive %+v", got)
	}
}

// TestPriority_SnapshotRoundTrip: priorities, the per-level indexes and
// the guard survive both snapshot forms; the restored copy leases as the
// original does.
func TestPriority_SnapshotRoundTrip(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			h := newHarness(t)
			h.sendPrio("low", "", 0)
			for i := range 5 {
				h.sendPrio(fmt.Sprintf("hot%d", i), "", 9)
			}
			h.sendPrio("mid", "g", 3)
			h.sendPrio("late", "", 0)
			h.receive("c", 3, 0) // the guard moves to 3
			if h.f.guard != 3 {
				t.Fatalf("guard %d", h.f.guard)
			}
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
			if c.Digest() != h.f.Digest() || c.guard != 3 {
				t.Fatalf("restored digest or guard (%d) differs", c.guard)
			}
			cmd := Command{Type: CmdReceive, At: h.now, Receive: &ReceiveCmd{Consumer: "c", Max: 10}}
			a, b := h.f.ApplyCommand(cmd), c.ApplyCommand(cmd)
			if !slices.Equal(ids(a.Delivered), ids(b.Delivered)) || c.Digest() != h.f.Digest() {
				t.Fatalf("original leased %v, restored %v", ids(a.Delivered), ids(b.Delivered))
			}
		})
	}
}

// TestPriority_OldSnapshotRecordsDecode: a record without the priority
// field (as every snapshot before priorities) restores as priority 0, and
// a priority-0 message is written without it.
func TestPriority_OldSnapshotRecordsDecode(t *testing.T) {
	h := newHarness(t)
	h.send("plain", "", "x")
	snap := h.f.Snapshot()
	var buf bytes.Buffer
	wantNoErr(t, snap.Persist(&buf))
	snap.Release()
	if bytes.Contains(buf.Bytes(), []byte("prio")) {
		t.Fatal("a snapshot without priorities names them")
	}
	c, _ := New(h.f.Config(), NewMemBodyStore())
	wantNoErr(t, c.Restore(&buf))
	if d := c.ApplyCommand(Command{Type: CmdReceive, At: h.now, Receive: &ReceiveCmd{Consumer: "c", Max: 1}}); len(d.Delivered) != 1 || d.Delivered[0].Priority != 0 {
		t.Fatalf("restored %+v", d.Delivered)
	}
}

// TestPriority_CommandCodec: a send with a priority round-trips through a
// log entry; without one it keeps the 4-field form it always had.
func TestPriority_CommandCodec(t *testing.T) {
	plain := Command{Type: CmdSend, At: 1, Send: &SendCmd{Messages: []NewMessage{{ID: "a", Body: []byte("b")}}}}
	withPrio := Command{Type: CmdSend, At: 1, Send: &SendCmd{Messages: []NewMessage{{ID: "a", Body: []byte("b"), Priority: 7}}}}
	pb, err := EncodeCommand(plain)
	wantNoErr(t, err)
	wb, err := EncodeCommand(withPrio)
	wantNoErr(t, err)
	if !bytes.Contains(pb, []byte{0x94, 0xa1, 'a'}) || !bytes.Contains(wb, []byte{0x95, 0xa1, 'a'}) {
		t.Fatalf("message arrays: plain % x, with priority % x", pb, wb)
	}
	if len(wb) != len(pb)+1 {
		t.Fatalf("the priority took %d bytes", len(wb)-len(pb))
	}
	for _, c := range []Command{plain, withPrio} {
		data, _ := EncodeCommand(c)
		got, err := DecodeCommand(data)
		wantNoErr(t, err)
		if got.Send.Messages[0].Priority != c.Send.Messages[0].Priority || string(got.Send.Messages[0].Body) != "b" {
			t.Fatalf("decoded %+v", got.Send.Messages[0])
		}
	}
	// The first form (a headers map third) still decodes, as priority 0.
	v1 := Command{Type: CmdSend, At: 1, Send: &SendCmd{Messages: []NewMessage{{ID: "a", Headers: map[string]string{"": "x"}, Body: []byte("b")}}}}
	data, err := EncodeCommand(v1)
	wantNoErr(t, err)
	got, err := DecodeCommand(data)
	wantNoErr(t, err)
	if m := got.Send.Messages[0]; m.Priority != 0 || m.Headers[""] != "x" {
		t.Fatalf("first form decoded as %+v", m)
	}
	// A priority that does not fit a byte is undecodable.
	bad := bytes.Replace(wb, []byte{0x07}, []byte{0xcd, 0x01, 0x00}, 1)
	if _, err := DecodeCommand(bad); err == nil {
		t.Fatal("priority 256 decoded")
	}
}

// TestFSM_PropertyPriorityOrder drives a priority-heavy workload of sends
// and one-message receives and checks each lease from the outside: it is
// the oldest eligible message of the top priority, or, when the guard is
// due, the oldest eligible message below it; and never more than
// GuardEvery-1 leases in a row pass over a waiting lower message. The
// model must agree all along.
func TestFSM_PropertyPriorityOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultQueueConfig()
		f, _ := New(cfg, NewMemBodyStore())
		md := &model{cfg: cfg}
		now, run, n := t0, 0, 0
		for range rapid.IntRange(1, 400).Draw(rt, "steps") {
			now += int64(time.Millisecond)
			var c Command
			switch rapid.IntRange(0, 6).Draw(rt, "op") {
			case 0, 1, 2:
				n++
				c = Command{Type: CmdSend, Send: &SendCmd{Messages: []NewMessage{{ID: fmt.Sprintf("m%d", n),
					Group:    rapid.SampledFrom([]string{"", "", "", "g1", "g2"}).Draw(rt, "group"),
					Priority: rapid.SampledFrom([]uint8{0, 3, 9, 9, 9, 9}).Draw(rt, "prio")}}}}
			case 3:
				c = Command{Type: CmdAck, Ack: &AckCmd{}}
				for _, m := range md.msgs {
					if m.state == stateInFlight {
						c.Ack.Receipts = append(c.Ack.Receipts, Receipt{Seq: m.seq, Attempt: m.attempts})
					}
				}
				if len(c.Ack.Receipts) == 0 {
					continue
				}
			default:
				c = Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: 1}}
			}
			c.At = now
			var elig []*modelMsg
			for _, m := range md.msgs {
				if md.eligible(m) {
					elig = append(elig, m)
				}
			}
			got := f.ApplyCommand(c)
			if c.Type == CmdAck {
				for _, r := range c.Ack.Receipts {
					md.step(c.At)
					wantNoErrRapid(rt, md.ack(r))
				}
				continue
			}
			want := applyModel(md, c)
			compareResults(rt, got, want)
			if len(got.Delivered) == 1 {
				run = checkPriorityPick(rt, elig, got.Delivered[0], run)
			}
		}
		if err := f.checkInvariants(); err != nil {
			rt.Fatal(err)
		}
	})
}

// checkPriorityPick checks one lease d against the messages eligible
// before it and returns the new count of leases in a row that passed a
// lower message over.
func checkPriorityPick(rt *rapid.T, elig []*modelMsg, d Delivery, run int) int {
	var top uint8
	for _, m := range elig {
		top = max(top, m.priority)
	}
	var oldestTop, oldestLow *modelMsg
	for _, m := range elig {
		if m.priority == top && oldestTop == nil {
			oldestTop = m
		}
		if m.priority < top && oldestLow == nil {
			oldestLow = m
		}
	}
	switch {
	case oldestLow == nil:
		if d.Receipt.Seq != oldestTop.seq {
			rt.Fatalf("leased seq %d, want %d (top priority %d)", d.Receipt.Seq, oldestTop.seq, top)
		}
		return 0
	case d.Receipt.Seq == oldestLow.seq:
		if run != GuardEvery-1 {
			rt.Fatalf("a lower message leased after %d top ones", run)
		}
		return 0
	case d.Receipt.Seq != oldestTop.seq:
		rt.Fatalf("leased seq %d, neither the oldest top (%d) nor the oldest lower (%d)", d.Receipt.Seq, oldestTop.seq, oldestLow.seq)
	case run+1 >= GuardEvery:
		rt.Fatalf("%d top leases in a row passed a lower message over", run+1)
	}
	return run + 1
}

func wantNoErrRapid(t *rapid.T, err error) {
	if err != nil {
		t.Fatal(err)
	}
}
