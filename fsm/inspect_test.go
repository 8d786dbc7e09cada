package fsm

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// filteredIDs peeks with pf and returns the ids shown.
func filteredIDs(t *testing.T, h *harness, pf PeekFilter) []string {
	t.Helper()
	if pf.Max == 0 {
		pf.Max = PeekMax
	}
	res, err := h.f.Peek(pf)
	if err != nil {
		t.Fatalf("peek %+v: %v", pf, err)
	}
	var out []string
	for _, p := range res.Messages {
		out = append(out, p.ID)
	}
	return out
}

// A peek shows the states asked for, with a lease's holder and deadline
// and a delayed message's visibility time, and filters by group, header
// and age.
func TestFSM_PeekStatesAndFilters(t *testing.T) {
	h := newHarness(t)
	h.sendMsgs(NewMessage{ID: "old", Body: []byte("o"), Headers: map[string]string{"tenant": "a"}})
	h.advance(time.Minute)
	h.send("held", "g", "h")
	h.send("behind", "g", "b")
	h.sendMsgs(NewMessage{ID: "later", Body: []byte("l"), Delay: time.Hour, Headers: map[string]string{"tenant": "b"}})
	d := h.receive("c1", 2, time.Minute) // old and held
	if got := ids(d); !slices.Equal(got, []string{"old", "held"}) {
		t.Fatalf("received %v", got)
	}
	h.advance(time.Second)
	h.tick()

	if got := filteredIDs(t, h, PeekFilter{}); !slices.Equal(got, []string{"behind"}) {
		t.Fatalf("default peek %v, want the ready one", got)
	}
	if got := filteredIDs(t, h, PeekFilter{States: StatesLive}); !slices.Equal(got, []string{"old", "held", "behind", "later"}) {
		t.Fatalf("peek all %v", got)
	}
	res, err := h.f.Peek(PeekFilter{Max: 10, States: StatesLeased | StatesDelayed})
	wantNoErr(t, err)
	if len(res.Messages) != 3 {
		t.Fatalf("leased and delayed: %+v", res.Messages)
	}
	if l := res.Messages[1]; l.ID != "held" || l.State != StateLeased || l.Consumer != "c1" || l.VisibleAt != d[1].Deadline {
		t.Fatalf("leased view %+v (deadline %d)", l, d[1].Deadline)
	}
	if l := res.Messages[2]; l.ID != "later" || l.State != StateDelayed || l.VisibleAt == 0 || l.Consumer != "" {
		t.Fatalf("delayed view %+v", l)
	}
	for _, c := range []struct {
		pf   PeekFilter
		want []string
	}{
		{PeekFilter{States: StatesLive, Group: "g"}, []string{"held", "behind"}},
		{PeekFilter{States: StatesLive, HeaderKey: "tenant", HeaderValue: "b"}, []string{"later"}},
		{PeekFilter{States: StatesLive, HeaderKey: "tenant", HeaderValue: ""}, nil},
		{PeekFilter{States: StatesLive, MinAge: 30 * time.Second}, []string{"old"}},
		{PeekFilter{States: StatesLive, MinAge: time.Hour}, nil},
		{PeekFilter{States: StatesReady | StatesLeased, Group: "g", AfterSeq: 2}, []string{"behind"}},
	} {
		if got := filteredIDs(t, h, c.pf); !slices.Equal(got, c.want) {
			t.Errorf("peek %+v = %v, want %v", c.pf, got, c.want)
		}
	}
	res, err = h.f.Peek(PeekFilter{Max: 10, States: StatesLive, NoBodies: true, MaxBytes: 1})
	wantNoErr(t, err)
	if len(res.Messages) != 4 || res.Messages[0].Body != nil || res.Messages[0].Headers != nil {
		t.Fatalf("peek without bodies %+v", res.Messages)
	}
}

// Bad peek filters are refused with ErrInvalidArgument.
func TestFSM_PeekFilterRefused(t *testing.T) {
	h := newHarness(t)
	for _, pf := range []PeekFilter{
		{Max: 1, States: 8},
		{Max: 1, HeaderValue: "v"},
		{Max: 1, MinAge: -1},
		{Max: 1, MinAge: PeekAgeMax + 1},
		{Max: 1, Group: string(make([]byte, GroupBytesMax+1))},
		{Max: 1, HeaderKey: "\xff"},
	} {
		if _, err := h.f.Peek(pf); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("peek %+v: %v, want ErrInvalidArgument", pf, err)
		}
	}
	if _, err := ParseStates([]string{"ready", "bogus"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ParseStates(bogus): %v", err)
	}
	if s, err := ParseStates([]string{"all"}); err != nil || s != StatesLive || s.String() != "ready,delayed,leased" {
		t.Fatalf("ParseStates(all) = %v, %v", s, err)
	}
}

// A purge with leased messages deletes them too: the holders' acks,
// extends, nacks and rejects are refused with ErrNotFound, nothing is in
// flight, dead letters stay, and the group is free again.
func TestFSM_PurgeAllRefusesLaterSettles(t *testing.T) {
	h := newHarness(t)
	h.send("a", "g", "1")
	h.send("b", "", "2")
	h.send("c", "", "3")
	h.send("d", "g", "4")
	d := h.receive("c1", 3, time.Minute)
	wantNoErr(t, h.reject(d[2].Receipt, "bad")) // c: dead
	if r := h.apply(Command{Type: CmdPurgeAll}); r.Err != nil || r.Count != 3 {
		t.Fatalf("purge all: %+v", r)
	}
	wantErrIs(t, h.ack(d[0].Receipt), ErrNotFound)
	wantErrIs(t, h.extend(d[1].Receipt, time.Minute), ErrNotFound)
	wantErrIs(t, h.nack(d[1].Receipt, 0, false, "x"), ErrNotFound)
	st := h.stats()
	if st.InFlight != 0 || st.Ready != 0 || st.Delayed != 0 || st.Dead != 1 || st.Counters.Purged != 3 || st.Bytes != 0 {
		t.Fatalf("stats after purge all %+v", st)
	}
	h.send("e", "g", "5")
	if got := h.receiveOne("c2"); got.ID != "e" {
		t.Fatalf("group not free after the purge: %+v", got)
	}
}

// A bulk delete deletes only messages that are in its states and hold
// the named id; everything else is left as it was.
func TestFSM_DeleteMessagesOnlyMatching(t *testing.T) {
	h := newHarness(t)
	s1 := h.send("a", "g", "1")
	s2 := h.send("b", "", "2")
	s3 := h.send("c", "", "3")
	held := h.receive("c1", 1, time.Minute)[0] // a
	del := func(states StateSet, refs ...MessageRef) Result {
		return h.apply(Command{Type: CmdDeleteMessages, DeleteMany: &DeleteMessagesCmd{Items: refs, States: states}})
	}
	before := h.f.Digest()
	if r := del(StatesReady, MessageRef{s1, "a"}, MessageRef{s2, "x"}, MessageRef{99, "c"}); r.Err != nil || r.Count != 0 {
		t.Fatalf("non-matching delete: %+v", r)
	}
	for _, bad := range [][]MessageRef{nil, {{0, "a"}}, {{s1, ""}}} {
		wantErrIs(t, del(0, bad...).Err, ErrInvalidArgument)
	}
	wantErrIs(t, del(16, MessageRef{s1, "a"}).Err, ErrInvalidArgument)
	if h.f.Digest() != before {
		t.Fatal("a bulk delete of nothing changed the state")
	}
	if r := del(StatesReady, MessageRef{s1, "a"}, MessageRef{s2, "b"}); r.Count != 1 {
		t.Fatalf("ready delete: %+v", r)
	}
	if r := del(0, MessageRef{s1, "a"}, MessageRef{s3, "c"}); r.Count != 2 {
		t.Fatalf("any-state delete: %+v", r)
	}
	wantErrIs(t, h.ack(held.Receipt), ErrNotFound)
	if st := h.stats(); st.Ready+st.InFlight+st.Delayed != 0 || st.Counters.Purged != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// Both new commands round-trip through the log encoding; a purge of
// every state carries no payload.
func TestFSM_InspectCommandsEncode(t *testing.T) {
	for _, c := range []Command{
		{Type: CmdPurgeAll, At: 7},
		{Type: CmdDeleteMessages, At: 8, DeleteMany: &DeleteMessagesCmd{Items: []MessageRef{{3, "x"}}, States: StatesLeased}},
	} {
		data, err := EncodeCommand(c)
		wantNoErr(t, err)
		got, err := DecodeCommand(data)
		wantNoErr(t, err)
		if got.Type != c.Type || got.At != c.At || (c.DeleteMany != nil && (got.DeleteMany == nil ||
			!slices.Equal(got.DeleteMany.Items, c.DeleteMany.Items) || got.DeleteMany.States != c.DeleteMany.States)) {
			t.Fatalf("round trip of %s: %+v", c.Type, got)
		}
	}
	if _, err := EncodeCommand(Command{Type: CmdDeleteMessages}); err == nil {
		t.Fatal("a bulk delete without its payload encoded")
	}
	if CmdPurgeAll.String() != "purge-all" || CmdDeleteMessages.String() != "delete-messages" {
		t.Fatal("command names")
	}
}

// BenchmarkFSM_PeekFiltered100k measures one page of a filtered peek over
// a partition holding 100,000 messages, 1,000 of them leased: the leased
// ones of one group (a scan of every message) and, by a header no
// message has, the reads a header filter makes before it answers a page.
func BenchmarkFSM_PeekFiltered100k(b *testing.B) {
	f, err := New(DefaultQueueConfig(), NewMemBodyStore())
	if err != nil {
		b.Fatal(err)
	}
	const n, batch = 100_000, 1000
	for i := 0; i < n; i += batch {
		msgs := make([]NewMessage, batch)
		for k := range msgs {
			msgs[k] = NewMessage{ID: fmt.Sprintf("01HZX3Q9V8K2M4N6P%09d", i+k), Body: []byte("x"),
				Headers: map[string]string{"tenant": "blue"}, Group: fmt.Sprintf("g%d", (i+k)%100)}
		}
		if r := f.ApplyCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: msgs}}); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	if r := f.ApplyCommand(Command{Type: CmdReceive, At: t0, Receive: &ReceiveCmd{Consumer: "c", Max: 1000}}); r.Err != nil {
		b.Fatal(r.Err)
	}
	for _, c := range []struct {
		name string
		pf   PeekFilter
	}{
		{"leased-of-a-group", PeekFilter{Max: PeekMax, States: StatesLeased, Group: "g7", NoBodies: true}},
		{"header-miss", PeekFilter{Max: PeekMax, States: StatesLive, HeaderKey: "tenant", HeaderValue: "red", NoBodies: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if _, err := f.Peek(c.pf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
