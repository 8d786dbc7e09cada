package fsm

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestMain raises the property-test default to 1,000 random sequences per
// property unless -rapid.checks is given explicitly.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if !explicit {
		if err := flag.Set("rapid.checks", "1000"); err != nil {
			fmt.Fprintln(os.Stderr, "rapid.checks:", err)
		}
	}
	os.Exit(m.Run())
}

// t0 is the harness's starting clock: an arbitrary fixed instant.
const t0 = int64(1_700_000_000_000_000_000)

// harness drives one FSM through encoded commands with a manual clock.
type harness struct {
	t     testing.TB
	f     *FSM
	store *MemBodyStore
	now   int64
}

func newHarness(t testing.TB, mutate ...func(*QueueConfig)) *harness {
	t.Helper()
	cfg := DefaultQueueConfig()
	for _, fn := range mutate {
		fn(&cfg)
	}
	store := NewMemBodyStore()
	f, err := New(cfg, store)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &harness{t: t, f: f, store: store, now: t0}
}

func (h *harness) advance(d time.Duration) { h.now += int64(d) }

// apply encodes c, stamps the harness clock and applies it, checking the
// FSM's invariants afterwards.
func (h *harness) apply(c Command) Result {
	h.t.Helper()
	c.At = h.now
	data, err := EncodeCommand(c)
	if err != nil {
		h.t.Fatalf("encode %s: %v", c.Type, err)
	}
	r := h.f.Apply(data)
	if err := h.f.checkInvariants(); err != nil {
		h.t.Fatalf("after %s: %v", c.Type, err)
	}
	return r
}

func (h *harness) sendMsgs(msgs ...NewMessage) []SendOutcome {
	h.t.Helper()
	r := h.apply(Command{Type: CmdSend, Send: &SendCmd{Messages: msgs}})
	if r.Err != nil {
		h.t.Fatalf("send: %v", r.Err)
	}
	return r.Sent
}

// send sends one message and fails the test unless it was accepted.
func (h *harness) send(id, group, body string) uint64 {
	h.t.Helper()
	out := h.sendMsgs(NewMessage{ID: id, Group: group, Body: []byte(body)})
	if out[0].Err != nil || out[0].Duplicate {
		h.t.Fatalf("send %s: %+v", id, out[0])
	}
	return out[0].Seq
}

func (h *harness) receive(consumer string, max int, vis time.Duration) []Delivery {
	h.t.Helper()
	r := h.apply(Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: consumer, Max: max, Visibility: vis}})
	if r.Err != nil {
		h.t.Fatalf("receive: %v", r.Err)
	}
	return r.Delivered
}

// receiveOne receives exactly one message and returns it.
func (h *harness) receiveOne(consumer string) Delivery {
	h.t.Helper()
	ds := h.receive(consumer, 1, 0)
	if len(ds) != 1 {
		h.t.Fatalf("receive: got %d messages, want 1", len(ds))
	}
	return ds[0]
}

func (h *harness) expectNothing() {
	h.t.Helper()
	if ds := h.receive("nobody", 10, 0); len(ds) != 0 {
		h.t.Fatalf("receive: got %d messages (first %s), want none", len(ds), ds[0].ID)
	}
}

func (h *harness) ack(r Receipt) error {
	h.t.Helper()
	return h.apply(Command{Type: CmdAck, Ack: &AckCmd{Receipts: []Receipt{r}}}).Settled[0]
}

func (h *harness) extend(r Receipt, vis time.Duration) error {
	h.t.Helper()
	return h.apply(Command{Type: CmdExtend, Extend: &ExtendCmd{Items: []ExtendItem{{Receipt: r, Visibility: vis}}}}).Settled[0]
}

func (h *harness) nack(r Receipt, delay time.Duration, explicit bool, reason string) error {
	h.t.Helper()
	it := NackItem{Receipt: r, ExplicitDelay: explicit, Delay: delay, Reason: reason}
	return h.apply(Command{Type: CmdNack, Nack: &NackCmd{Items: []NackItem{it}}}).Settled[0]
}

func (h *harness) reject(r Receipt, reason string) error {
	h.t.Helper()
	return h.apply(Command{Type: CmdReject, Reject: &RejectCmd{Items: []RejectItem{{Receipt: r, Reason: reason}}}}).Settled[0]
}

func (h *harness) tick() Result { return h.apply(Command{Type: CmdTick}) }

func (h *harness) stats() Stats { return h.f.Stats() }

func wantErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func wantNoErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func ids(ds []Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
