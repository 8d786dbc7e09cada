package fsm

import (
	"fmt"
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
