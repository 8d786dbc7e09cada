package fsm

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The model's side of peek filters, purge with leased messages and bulk
// deletes, and the checks of the property test that use them.

// genDeleteMessages draws a bulk delete of 1..4 seqs (ids filled in by
// realIDs) within a random state set.
func genDeleteMessages(t *rapid.T) *DeleteMessagesCmd {
	c := &DeleteMessagesCmd{States: StateSet(rapid.IntRange(0, 8).Draw(t, "delStates"))}
	for range rapid.IntRange(0, 4).Draw(t, "delItems") {
		c.Items = append(c.Items, MessageRef{Seq: rapid.Uint64Range(0, 12).Draw(t, "delManySeq"),
			ID: genID(rapid.IntRange(0, 14).Draw(t, "delManyID"))})
	}
	return c
}

// realIDs gives most items of c the id the model holds at their seq.
func realIDs(t *rapid.T, md *model, c *DeleteMessagesCmd) {
	for i := range c.Items {
		if m := md.find(c.Items[i].Seq); m != nil && rapid.IntRange(0, 3).Draw(t, "realManyID") > 0 {
			c.Items[i].ID = m.id
		}
	}
}

// purgeAll is CmdPurgeAll on the model.
func (md *model) purgeAll() int {
	n := 0
	for _, m := range md.msgs {
		if m.state == stateReady || m.state == stateDelayed || m.state == stateInFlight {
			m.state = 0
			n++
		}
	}
	md.counters.Purged += uint64(n)
	return n
}

// modelHas is StateSet.has on a model message.
func modelHas(s StateSet, st msgState) bool {
	switch st {
	case stateReady:
		return s&StatesReady != 0
	case stateDelayed:
		return s&StatesDelayed != 0
	case stateInFlight:
		return s&StatesLeased != 0
	}
	return false
}

// deleteMessages is CmdDeleteMessages on the model.
func (md *model) deleteMessages(c DeleteMessagesCmd) (int, error) {
	if len(c.Items) == 0 || len(c.Items) > BatchMax || c.States > StatesLive {
		return 0, ErrInvalidArgument
	}
	for _, it := range c.Items {
		if it.Seq == 0 || it.ID == "" {
			return 0, ErrInvalidArgument
		}
	}
	states := c.States
	if states == 0 {
		states = StatesLive
	}
	n := 0
	for _, it := range c.Items {
		if m := md.find(it.Seq); m != nil && m.id == it.ID && modelHas(states, m.state) {
			m.state = 0
			md.counters.Purged++
			n++
		}
	}
	return n, nil
}

// peek is FSM.Peek on the model, without its scan and byte bounds.
func (md *model) peek(pf PeekFilter) []string {
	if pf.States == 0 {
		pf.States = StatesReady
	}
	var out []string
	for _, m := range md.msgs {
		if len(out) == pf.Max {
			break
		}
		if m.seq <= pf.AfterSeq || !modelHas(pf.States, m.state) || (pf.Group != "" && m.group != pf.Group) ||
			(pf.MinAge > 0 && m.enq > md.clock-int64(pf.MinAge)) {
			continue
		}
		if v, ok := m.headers[pf.HeaderKey]; pf.HeaderKey != "" && (!ok || v != pf.HeaderValue) {
			continue
		}
		out = append(out, peekLine(m.seq, m.id, stateName(m.state), m.visibleAt, m.consumer, m.state))
	}
	return out
}

func stateName(st msgState) MessageState {
	return map[msgState]MessageState{stateReady: StateReady, stateDelayed: StateDelayed, stateInFlight: StateLeased}[st]
}

// peekLine renders what the property test compares of a peeked message:
// the lease holder only for a leased one, the visibility time only for a
// delayed or leased one.
func peekLine(seq uint64, id string, state MessageState, visibleAt int64, consumer string, st msgState) string {
	if st == stateReady {
		visibleAt = 0
	}
	if st != stateInFlight {
		consumer = ""
	}
	return fmt.Sprintf("%d %s %s %d %s", seq, id, state, visibleAt, consumer)
}

// genPeekFilter draws a peek filter of every kind.
func genPeekFilter(t *rapid.T) PeekFilter {
	pf := PeekFilter{
		Max:      rapid.IntRange(1, 20).Draw(t, "peekMax"),
		States:   StateSet(rapid.IntRange(0, 7).Draw(t, "peekStates")),
		Group:    rapid.SampledFrom([]string{"", "", "g1", "g2"}).Draw(t, "peekGroup"),
		MinAge:   rapid.SampledFrom([]time.Duration{0, 0, time.Second, 5 * time.Second}).Draw(t, "peekAge"),
		NoBodies: rapid.Bool().Draw(t, "peekNoBodies"),
		AfterSeq: rapid.Uint64Range(0, 3).Draw(t, "peekAfter"),
	}
	if rapid.IntRange(0, 2).Draw(t, "peekHeader") == 0 {
		pf.HeaderKey, pf.HeaderValue = "k", rapid.StringN(0, 4, 4).Draw(t, "peekHV")
	}
	return pf
}

// comparePeek checks a random filtered peek against the model, and that
// a peek changes nothing.
func comparePeek(t *rapid.T, f *FSM, md *model) {
	pf := genPeekFilter(t)
	before := f.Digest()
	res, err := f.Peek(pf)
	if err != nil {
		t.Fatalf("peek %+v: %v", pf, err)
	}
	if f.Digest() != before {
		t.Fatal("a peek changed the state")
	}
	if res.Next != 0 && len(res.Messages) < pf.Max {
		t.Fatalf("peek of a small partition stopped early at %d", res.Next)
	}
	var got []string
	for _, p := range res.Messages {
		st := map[MessageState]msgState{StateReady: stateReady, StateDelayed: stateDelayed, StateLeased: stateInFlight}[p.State]
		got = append(got, peekLine(p.Seq, p.ID, p.State, p.VisibleAt, p.Consumer, st))
		if pf.NoBodies != (p.Body == nil && p.Headers == nil) && pf.NoBodies {
			t.Fatalf("peek without bodies returned a body or headers: %+v", p)
		}
	}
	if want := md.peek(pf); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("peek %+v at clock %d:\n got %v\nwant %v", pf, md.clock, got, want)
	}
}

// liveView returns every live message of f with its headers, by seq.
func liveView(t *rapid.T, f *FSM) map[uint64]Peeked {
	out := map[uint64]Peeked{}
	after := uint64(0)
	for {
		res, err := f.Peek(PeekFilter{Max: PeekMax, States: StatesLive, AfterSeq: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Messages {
			out[p.Seq] = p
		}
		if res.Next == 0 {
			return out
		}
		after = res.Next
	}
}

// TestFSM_PropertyBulkDeleteOnlyMatching is the guarantee of a bulk
// delete by filter: list with a filtered peek, let random commands run,
// then delete the listed messages within the filter's states. Every
// message deleted was listed and still matched the whole filter (state,
// group, header, age) when the delete applied; no other message changed.
func TestFSM_PropertyBulkDeleteOnlyMatching(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f, err := New(genConfig(rt), NewMemBodyStore())
		if err != nil {
			rt.Fatal(err)
		}
		now := t0
		var handed []Receipt
		run := func(steps int) {
			for range steps {
				now += int64(rapid.SampledFrom([]time.Duration{0, 100 * time.Millisecond, time.Second, 3 * time.Second}).Draw(rt, "dt"))
				c := genCommand(rt, handed)
				c.At = now
				for _, d := range f.ApplyCommand(c).Delivered {
					handed = append(handed, d.Receipt)
				}
			}
		}
		run(rapid.IntRange(1, 60).Draw(rt, "before"))
		pf := genPeekFilter(rt)
		pf.Max, pf.AfterSeq, pf.NoBodies = PeekMax, 0, true
		listed, err := f.Peek(pf)
		if err != nil {
			rt.Fatal(err)
		}
		run(rapid.IntRange(0, 10).Draw(rt, "between"))
		f.ApplyCommand(Command{Type: CmdTick, At: now}) // timers due at the delete fire first
		before := liveView(rt, f)
		refs := map[uint64]string{}
		c := DeleteMessagesCmd{States: pf.States}
		for _, p := range listed.Messages {
			c.Items, refs[p.Seq] = append(c.Items, MessageRef{Seq: p.Seq, ID: p.ID}), p.ID
		}
		if c.States == 0 {
			c.States = StatesReady // a peek's default, which a delete must name
		}
		if len(c.Items) == 0 {
			return
		}
		r := f.ApplyCommand(Command{Type: CmdDeleteMessages, At: now, DeleteMany: &c})
		if r.Err != nil {
			rt.Fatalf("bulk delete: %v", r.Err)
		}
		after := liveView(rt, f)
		deleted := 0
		for seq, p := range before {
			q, kept := after[seq]
			if kept {
				if q.State != p.State || q.Attempts != p.Attempts {
					rt.Fatalf("seq %d changed from %s to %s", seq, p.State, q.State)
				}
				continue
			}
			deleted++
			if refs[seq] != p.ID {
				rt.Fatalf("seq %d (%s) deleted without being listed", seq, p.ID)
			}
			if v, ok := p.Headers[pf.HeaderKey]; !c.States.hasState(p.State) || (pf.Group != "" && p.Group != pf.Group) ||
				(pf.HeaderKey != "" && (!ok || v != pf.HeaderValue)) || (pf.MinAge > 0 && p.EnqueuedAt > f.Clock()-int64(pf.MinAge)) {
				rt.Fatalf("seq %d deleted outside the filter %+v: %+v", seq, pf, p)
			}
		}
		if deleted != r.Count || len(after) != len(before)-deleted {
			rt.Fatalf("deleted %d, counted %d, %d live before and %d after", deleted, r.Count, len(before), len(after))
		}
	})
}

// hasState is StateSet.has on a state's name.
func (s StateSet) hasState(st MessageState) bool {
	return map[MessageState]StateSet{StateReady: StatesReady, StateDelayed: StatesDelayed, StateLeased: StatesLeased}[st]&s != 0
}
