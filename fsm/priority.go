package fsm

import (
	"fmt"

	"github.com/google/btree"
)

// Priorities. A message carries a priority from 0 (the default) to
// PriorityMax, the most urgent. A receive takes the eligible message of the
// highest priority first, the oldest (lowest seq) within a priority. Group
// order comes first: only a group's head is eligible, so a group competes
// with its head's priority and its messages are delivered in send order
// whatever their priorities.
//
// The starvation guard keeps the lower priorities moving under a steady
// stream of urgent work: of every GuardEvery messages a partition takes
// off its eligible indexes while a message of a priority below the top
// eligible one waits, at least one is the oldest eligible message of those
// lower priorities. It is one counter in the replicated state (in
// snapshots, and in the digest when not 0), moved only by receives, so
// every replica leases the same messages.
const (
	// PriorityMax is the highest (most urgent) priority.
	PriorityMax = 9
	// GuardEvery is the starvation guard's period: at most GuardEvery-1
	// messages of the top priority are taken in a row while a message of
	// a lower priority is eligible.
	GuardEvery = 16
)

// The eligible indexes by priority. Priority 0 keeps the indexes it always
// had: the fresh cursor over the seq table for messages eligible since
// their send, and f.returned for the others. A message of a higher
// priority p is in f.levels[p-1], a tree by seq created when first needed,
// and f.high counts them: while it is 0, a partition picks exactly as it
// did before priorities existed. The level trees share one free list, so
// the nodes they keep for reuse are bounded per partition, not per level.

// levelTree returns the tree of eligible messages of priority p (for p =
// 0, the returned ones only), creating it if needed.
func (f *FSM) levelTree(p uint8) *btree.BTreeG[*message] {
	if p == 0 {
		return f.returned
	}
	if f.levels[p-1] == nil {
		if f.levelNodes == nil {
			f.levelNodes = btree.NewFreeListG[*message](btree.DefaultFreeListSize)
		}
		f.levels[p-1] = btree.NewWithFreeListG(btreeDegree, func(a, b *message) bool { return a.seq < b.seq }, f.levelNodes)
	}
	return f.levels[p-1]
}

// indexEligible puts a ready m into the tree of its priority; the caller
// counts it in the eligible gauge.
func (f *FSM) indexEligible(m *message) {
	m.eligible = eligibleTree
	p := m.priority()
	f.levelTree(p).ReplaceOrInsert(m)
	if p > 0 {
		f.high++
	}
	f.addLane(m)
}

// pick is the message a receive takes next, with what the starvation guard
// makes of it.
type pick struct {
	m *message
	// lower: a message of a priority below the top eligible one waits.
	lower bool
	// guarded: m is that message, taken by the guard.
	guarded bool
}

// nextEligible returns the message a receive takes next (nil m when none
// is eligible) without taking it.
func (f *FSM) nextEligible() pick {
	if f.high == 0 {
		return pick{m: f.fairPick(0, f.oldestEligible())}
	}
	top := uint8(PriorityMax)
	for f.levels[top-1] == nil || f.levels[top-1].Len() == 0 {
		top--
	}
	low := f.oldestEligible()
	for p := uint8(1); p < top; p++ {
		if t := f.levels[p-1]; t != nil {
			if m, ok := t.Min(); ok && (low == nil || m.seq < low.seq) {
				low = m
			}
		}
	}
	if low != nil && f.guard >= GuardEvery-1 {
		return pick{m: low, lower: true, guarded: true}
	}
	m, _ := f.levels[top-1].Min()
	return pick{m: f.fairPick(top, m), lower: low != nil}
}

// takeEligible takes k.m (from nextEligible) off the eligible indexes and
// moves the starvation guard.
func (f *FSM) takeEligible(k pick) {
	switch {
	case k.lower && !k.guarded:
		f.guard++
	case f.guard != 0:
		f.guard = 0
	}
	m := k.m
	if m.eligible == eligibleFIFO {
		f.freshFrom = m.seq + 1 // m is the fresh cursor's front
	}
	f.dropEligible(m)
	f.served(m)
}

// oldestAnyEligible returns the oldest eligible message of any priority.
func (f *FSM) oldestAnyEligible() *message {
	out := f.oldestEligible()
	for i := 0; f.high > 0 && i < PriorityMax; i++ {
		if t := f.levels[i]; t != nil {
			if m, ok := t.Min(); ok && (out == nil || m.seq < out.seq) {
				out = m
			}
		}
	}
	return out
}

// ValidatePriority refuses a priority outside 0..PriorityMax with
// ErrInvalidArgument.
func ValidatePriority(p int) error {
	if p < 0 || p > PriorityMax {
		return fmt.Errorf("%w: priority %d out of range 0..%d", ErrInvalidArgument, p, PriorityMax)
	}
	return nil
}
