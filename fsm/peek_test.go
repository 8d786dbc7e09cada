package fsm

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func peekIDs(t *testing.T, f *FSM, pf PeekFilter) ([]string, PeekResult) {
	t.Helper()
	r, err := f.Peek(pf)
	if err != nil {
		t.Fatalf("peek: %v", err)
	}
	var ids []string
	for _, m := range r.Messages {
		ids = append(ids, m.ID)
	}
	return ids, r
}

func TestPeek_ShowsReadyOldestFirstAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "body-a")
	h.send("g1", "g", "body-g1")
	h.send("g2", "g", "body-g2")
	h.sendMsgs(NewMessage{ID: "late", Body: []byte("x"), Delay: time.Minute})
	h.send("b", "", "body-b")
	leased := h.receiveOne("c1") // "a"
	if leased.ID != "a" {
		t.Fatalf("leased %s, want a", leased.ID)
	}
	before := h.f.Digest()
	ids, r := peekIDs(t, h.f, PeekFilter{Max: 10})
	if got, want := ids, []string{"g1", "g2", "b"}; !slices.Equal(got, want) {
		t.Fatalf("peek ids %v, want %v", got, want)
	}
	if r.Next != 0 {
		t.Fatalf("next %d, want 0 at the end", r.Next)
	}
	if m := r.Messages[0]; string(m.Body) != "body-g1" || m.Group != "g" || m.Blocked || m.Attempts != 0 {
		t.Fatalf("first peeked %+v", m)
	}
	if !r.Messages[1].Blocked {
		t.Fatalf("g2 not blocked behind g1: %+v", r.Messages[1])
	}
	if h.f.Digest() != before {
		t.Fatal("peek changed the state digest")
	}
	if d := h.receiveOne("c2"); d.ID != "g1" || d.Receipt.Attempt != 1 {
		t.Fatalf("receive after peek got %s attempt %d, want g1 attempt 1", d.ID, d.Receipt.Attempt)
	}
}

func TestPeek_PagesByCountAndBytes(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"m1", "m2", "m3"} {
		h.send(id, "", "0123456789")
	}
	ids, r := peekIDs(t, h.f, PeekFilter{Max: 2})
	if !slices.Equal(ids, []string{"m1", "m2"}) || r.Next == 0 {
		t.Fatalf("first page %v next %d", ids, r.Next)
	}
	ids, r = peekIDs(t, h.f, PeekFilter{Max: 2, AfterSeq: r.Next})
	if !slices.Equal(ids, []string{"m3"}) || r.Next != 0 {
		t.Fatalf("second page %v next %d", ids, r.Next)
	}
	ids, r = peekIDs(t, h.f, PeekFilter{Max: 10, MaxBytes: 1})
	if !slices.Equal(ids, []string{"m1"}) || r.Next == 0 {
		t.Fatalf("byte-bound page %v next %d: want the first message alone", ids, r.Next)
	}
	for _, bad := range []PeekFilter{{Max: 0}, {Max: PeekMax + 1}, {Max: 1, MaxBytes: -1}} {
		if _, err := h.f.Peek(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("peek %+v: %v, want ErrInvalidArgument", bad, err)
		}
	}
}
