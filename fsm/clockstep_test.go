package fsm

import (
	"testing"
	"time"
)

// A leader whose clock jumped an hour ahead must not expire leases, fire
// delays or age the dedup window: its commands are refused and change
// nothing, not even the clock.
func TestFSM_CommandBeyondMaxClockStepRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.f.SetMaxClockStep(30 * time.Second)
	h.send("a", "", "x")
	d := h.receive("c", 1, time.Minute)[0]
	clock, before := h.f.Clock(), h.f.Digest()

	h.advance(time.Hour)
	r := h.tick()
	wantErrIs(t, r.Err, ErrClockStep)
	ack := Command{Type: CmdAck, Ack: &AckCmd{Receipts: []Receipt{d.Receipt}}}
	wantErrIs(t, h.apply(ack).Err, ErrClockStep)
	if h.f.Clock() != clock {
		t.Fatalf("refused commands moved the clock by %v", time.Duration(h.f.Clock()-clock))
	}
	st := h.stats()
	if st.InFlight != 1 || st.Counters.Expired != 0 || st.Counters.ClockRefused != 2 {
		t.Fatalf("stats after refused commands %+v", st)
	}
	if h.f.Digest() == before {
		t.Fatal("the refusal count is not in the digest")
	}

	// Back within the bound (the skewed leader gave way): work goes on.
	h.now = clock + int64(10*time.Second)
	wantNoErr(t, h.ack(d.Receipt))
	if st := h.stats(); st.Counters.Acked != 1 {
		t.Fatalf("ack within the bound: %+v", st)
	}
}

func TestFSM_ClockResyncMovesPastTheBound(t *testing.T) {
	h := newHarness(t)
	h.f.SetMaxClockStep(30 * time.Second)
	h.send("a", "", "x")
	h.receive("c", 1, time.Minute)
	h.advance(2 * time.Hour)
	if r := h.apply(Command{Type: CmdClockResync}); r.Err != nil {
		t.Fatalf("resync: %v", r.Err)
	}
	if h.f.Clock() != h.now {
		t.Fatal("resync did not move the clock")
	}
	st := h.stats()
	if st.Counters.ClockResyncs != 1 || st.Counters.Expired != 1 {
		t.Fatalf("after resync %+v", st)
	}
	// Round trip through the codec.
	data, err := EncodeCommand(Command{Type: CmdClockResync, At: 42})
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeCommand(data)
	if err != nil || c.Type != CmdClockResync || c.At != 42 {
		t.Fatalf("decode resync: %+v, %v", c, err)
	}
}

// Steps within the bound, and any step without a bound (the default), move
// the clock as before; the first command of all sets it however large.
func TestFSM_ClockStepsWithinBoundAccepted(t *testing.T) {
	h := newHarness(t)
	h.f.SetMaxClockStep(30 * time.Second)
	h.advance(30 * time.Second)
	wantNoErr(t, h.tick().Err)
	u := newHarness(t)
	u.advance(1000 * time.Hour)
	wantNoErr(t, u.tick().Err)
	if u.f.Clock() != u.now {
		t.Fatal("unbounded FSM refused a large step")
	}
}
