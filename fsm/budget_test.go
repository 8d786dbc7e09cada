package fsm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// A receive with a byte budget leases only what fits in one answer and
// leaves the rest ready, in order, for the next receive.
func TestFSM_ReceiveByteBudgetLeasesOnlyWhatFits(t *testing.T) {
	h := newHarness(t)
	body := strings.Repeat("x", 1000)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		h.send(id, "", body)
	}
	one := DeliveryBytes(len(body)+1, 1, 0) // stored bytes include the payload's header framing
	budget := 2*one + one/2
	r := h.apply(Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: 5, Visibility: time.Minute, MaxBytes: budget}})
	wantNoErr(t, r.Err)
	if len(r.Delivered) != 2 {
		t.Fatalf("leased %d messages under a budget for 2", len(r.Delivered))
	}
	if st := h.stats(); st.InFlight != 2 || st.Ready != 3 {
		t.Fatalf("after a budgeted receive: %+v", st)
	}
	var got []string
	for _, d := range r.Delivered {
		got = append(got, d.ID)
	}
	r = h.apply(Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: 5, Visibility: time.Minute, MaxBytes: budget}})
	for _, d := range r.Delivered {
		got = append(got, d.ID)
		if d.Receipt.Attempt != 1 {
			t.Fatalf("message %s delivered at attempt %d: a budget must not cost attempts", d.ID, d.Receipt.Attempt)
		}
	}
	if strings.Join(got, "") != "abcd" {
		t.Fatalf("delivery order %v, want a b c d", got)
	}
}

// The first message is leased whatever the budget, so a message is never
// stuck behind a budget smaller than itself.
func TestFSM_ReceiveByteBudgetAlwaysLeasesOne(t *testing.T) {
	h := newHarness(t)
	h.send("big", "", strings.Repeat("y", 5000))
	h.send("small", "", "z")
	r := h.apply(Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: 10, MaxBytes: 1}})
	wantNoErr(t, r.Err)
	if len(r.Delivered) != 1 || r.Delivered[0].ID != "big" {
		t.Fatalf("delivered %+v, want just the first message", r.Delivered)
	}
	before := h.f.Digest()
	r = h.apply(Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: 1, MaxBytes: -1}})
	wantErrIs(t, r.Err, ErrInvalidArgument)
	if h.f.Digest() != before {
		t.Fatal("a refused receive changed the state")
	}
}

// Receive entries written before MaxBytes existed (three fields) still
// decode, with no byte bound.
func TestFSM_ReceiveDecodesThreeFieldEntries(t *testing.T) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := encodeAll(enc.EncodeArrayLen(3), enc.EncodeString("c"), enc.EncodeInt(7), enc.EncodeInt(int64(time.Second))); err != nil {
		t.Fatal(err)
	}
	var c ReceiveCmd
	if err := msgpack.Unmarshal(buf.Bytes(), &c); err != nil {
		t.Fatalf("decode old receive: %v", err)
	}
	if c != (ReceiveCmd{Consumer: "c", Max: 7, Visibility: time.Second}) {
		t.Fatalf("decoded %+v", c)
	}
	round, err := msgpack.Marshal(&ReceiveCmd{Consumer: "c", Max: 2, MaxBytes: 99})
	if err != nil {
		t.Fatal(err)
	}
	var back ReceiveCmd
	if err := msgpack.Unmarshal(round, &back); err != nil || back.MaxBytes != 99 {
		t.Fatalf("round trip %+v, %v", back, err)
	}
}
