package fsm

import (
	"fmt"
	"testing"
	"time"
)

// Find reports a message in each state with its lease, delay, death and
// history; deleting by seq and id works in any state (a cancel only before
// the first delivery), and a deleted lease's ack is refused.
func TestFSM_FindAndDeleteOneMessage(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxReceives = 1 })
	h.send("ready", "", "r")
	h.sendMsgs(NewMessage{ID: "later", Body: []byte("d"), Delay: time.Hour})
	h.send("head", "g", "1")
	h.send("next", "g", "2")
	leased := h.receive("c1", 1, time.Minute)[0] // "ready"
	if leased.ID != "ready" {
		t.Fatalf("leased %s", leased.ID)
	}
	head := h.receive("c2", 1, time.Minute)[0] // the group's head
	wantNoErr(t, h.reject(head.Receipt, "bad"))

	for id, want := range map[string]MessageState{"ready": StateLeased, "later": StateDelayed, "next": StateReady, "head": StateDead} {
		got := h.f.Find(id)
		if len(got) != 1 || got[0].State != want || got[0].ID != id {
			t.Fatalf("Find(%s) = %+v, want one %s", id, got, want)
		}
	}
	if l := h.f.Find("ready")[0]; l.Consumer != "c1" || l.VisibleAt != leased.Deadline || l.Attempts != 1 {
		t.Fatalf("leased view %+v", l)
	}
	if d := h.f.Find("head")[0]; d.Dead == nil || d.Dead.ReasonText != "bad" || len(d.History) == 0 {
		t.Fatalf("dead view %+v", d)
	}
	if got := h.f.Find("nosuch"); len(got) != 0 {
		t.Fatalf("Find(nosuch) = %+v", got)
	}

	del := func(seq uint64, id string, undelivered bool) error {
		return h.apply(Command{Type: CmdDeleteMessage, Delete: &DeleteMessageCmd{Seq: seq, ID: id, Undelivered: undelivered}}).Err
	}
	before := h.f.Digest()
	wantErrIs(t, del(leased.Receipt.Seq, "other", false), ErrNotFound)
	wantErrIs(t, del(leased.Receipt.Seq, "ready", true), ErrNotFound) // delivered: not cancelled
	wantErrIs(t, del(0, "ready", false), ErrInvalidArgument)
	if h.f.Digest() != before {
		t.Fatal("a refused delete changed the state")
	}
	wantNoErr(t, del(leased.Receipt.Seq, "ready", false))
	wantErrIs(t, h.ack(leased.Receipt), ErrNotFound)
	later := h.f.Find("later")[0]
	wantNoErr(t, del(later.Seq, "later", true)) // never delivered: cancelled
	wantNoErr(t, del(h.f.Find("head")[0].Seq, "head", false))
	if st := h.stats(); st.InFlight != 0 || st.Delayed != 0 || st.Dead != 0 || st.Ready != 1 ||
		st.Counters.Purged != 2 || st.Counters.DeadDeleted != 1 {
		t.Fatalf("stats after deletes %+v", st)
	}
	if d := h.receiveOne("c3"); d.ID != "next" {
		t.Fatalf("the group's next message was not delivered: %+v", d)
	}
}

// BenchmarkFSM_Find100k measures a find's walk over a partition holding
// 100,000 messages (client-style ULID ids), the id not present.
func BenchmarkFSM_Find100k(b *testing.B) {
	f, err := New(DefaultQueueConfig(), NewMemBodyStore())
	if err != nil {
		b.Fatal(err)
	}
	const n, batch = 100_000, 1000
	for i := 0; i < n; i += batch {
		msgs := make([]NewMessage, batch)
		for k := range msgs {
			msgs[k] = NewMessage{ID: fmt.Sprintf("01HZX3Q9V8K2M4N6P%09d", i+k), Body: []byte("x")}
		}
		if r := f.ApplyCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: msgs}}); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if got := f.Find("01HZX3Q9V8K2M4N6PZZZZZZZZZ"); len(got) != 0 {
			b.Fatal(got)
		}
	}
}
