package fsm

import (
	"slices"
	"testing"
	"time"
)

func (h *harness) receiveAck(rs []Receipt, consumer string, max int) Result {
	h.t.Helper()
	return h.apply(Command{Type: CmdReceiveAck, ReceiveAck: &ReceiveAckCmd{Receipts: rs, Receive: ReceiveCmd{Consumer: consumer, Max: max}}})
}

func TestFSM_ReceiveAckAcksThenLeases(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		h.send(id, "", "x")
	}
	first := h.receive("c", 2, 0)
	r := h.receiveAck([]Receipt{first[0].Receipt, first[1].Receipt}, "c", 10)
	if r.Err != nil || len(r.Settled) != 2 || r.Settled[0] != nil || r.Settled[1] != nil {
		t.Fatalf("result %+v", r)
	}
	if got := ids(r.Delivered); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("leased %v", got)
	}
	st := h.stats()
	if st.InFlight != 2 || st.Ready != 0 || st.Counters.Acked != 2 || st.Counters.Leased != 4 {
		t.Fatalf("stats %+v", st)
	}
	// Acking again is refused: the messages are gone.
	r = h.receiveAck([]Receipt{first[0].Receipt}, "c", 1)
	wantErrIs(t, r.Settled[0], ErrNotFound)
}

func TestFSM_ReceiveAckFencesStaleReceiptsPerItemAndStillLeases(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	old := h.receive("c", 1, time.Second)[0]
	h.advance(2 * time.Second) // the lease ends; a is delivered again
	var again Delivery
	for range 100 {
		if ds := h.receive("c", 1, time.Hour); len(ds) == 1 {
			again = ds[0]
			break
		}
		h.advance(time.Minute) // past any retry backoff
	}
	h.send("b", "", "x")
	if again.ID != "a" || again.Receipt.Attempt != old.Receipt.Attempt+1 {
		t.Fatalf("redelivery %+v after %+v", again, old)
	}
	r := h.receiveAck([]Receipt{old.Receipt, again.Receipt}, "c", 5)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	wantErrIs(t, r.Settled[0], ErrLeaseLost)
	wantNoErr(t, r.Settled[1])
	if got := ids(r.Delivered); !slices.Equal(got, []string{"b"}) || r.Delivered[0].Receipt.Attempt != 1 {
		t.Fatalf("leased %+v", r.Delivered)
	}
	if st := h.stats(); st.Counters.Acked != 1 || st.InFlight != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFSM_ReceiveAckReleasesTheGroupsNextMessageInTheSameEntry(t *testing.T) {
	h := newHarness(t)
	h.send("1", "g", "x")
	h.send("2", "g", "x")
	first := h.receiveOne("c")
	r := h.receiveAck([]Receipt{first.Receipt}, "c", 5)
	if got := ids(r.Delivered); r.Err != nil || !slices.Equal(got, []string{"2"}) {
		t.Fatalf("result %+v", r)
	}
}

func TestFSM_ReceiveAckRefusedWholeChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "x")
	h.send("b", "", "x")
	d := h.receiveOne("c")
	before := h.f.Digest()
	for name, c := range map[string]ReceiveAckCmd{
		"max 0":       {Receipts: []Receipt{d.Receipt}, Receive: ReceiveCmd{Consumer: "c"}},
		"max big":     {Receipts: []Receipt{d.Receipt}, Receive: ReceiveCmd{Consumer: "c", Max: ReceiveMax + 1}},
		"visibility":  {Receipts: []Receipt{d.Receipt}, Receive: ReceiveCmd{Consumer: "c", Max: 1, Visibility: -1}},
		"byte budget": {Receipts: []Receipt{d.Receipt}, Receive: ReceiveCmd{Consumer: "c", Max: 1, MaxBytes: -1}},
		"too many":    {Receipts: make([]Receipt, BatchMax+1), Receive: ReceiveCmd{Consumer: "c", Max: 1}},
	} {
		r := h.apply(Command{Type: CmdReceiveAck, ReceiveAck: &c})
		wantErrIs(t, r.Err, ErrInvalidArgument)
		if r.Settled != nil || r.Delivered != nil || h.f.Digest() != before {
			t.Fatalf("%s: refused command answered %+v or changed the state", name, r)
		}
	}
	if r := h.receiveAck(nil, "c", 5); r.Err != nil || r.Settled != nil || len(r.Delivered) != 1 {
		t.Fatalf("receive-ack without acks: %+v", r)
	}
}

// FuzzFSM_DecodeReceiveAck feeds arbitrary bytes to the command decoder
// behind a receive-ack header and applies what decodes: it must never
// panic, and a command the FSM refuses whole must change nothing.
func FuzzFSM_DecodeReceiveAck(f *testing.F) {
	good, _ := EncodeCommand(Command{Type: CmdReceiveAck, At: t0, ReceiveAck: &ReceiveAckCmd{
		Receipts: []Receipt{{Seq: 1, Attempt: 1}}, Receive: ReceiveCmd{Consumer: "c", Max: 2}}})
	f.Add(good[3:])
	f.Add([]byte{0x82, 0xa8, 'r', 'e', 'c', 'e', 'i', 'p', 't', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := append([]byte{0x92, byte(CmdReceiveAck), 0x00}, data...)
		c, err := DecodeCommand(in)
		if err != nil {
			return
		}
		h := newHarness(t)
		h.send("a", "", "x")
		h.receiveOne("c") // a lease for the acks to hit
		before := h.f.Digest()
		c.At = h.now
		r := h.f.ApplyCommand(c)
		if r.Err != nil && h.f.Digest() != before {
			t.Fatalf("refused command changed the state: %v", r.Err)
		}
		if r.Err == nil && len(r.Settled) != len(c.ReceiveAck.Receipts) {
			t.Fatalf("%d acks answered %d times", len(c.ReceiveAck.Receipts), len(r.Settled))
		}
	})
}
