package fsm

import "github.com/ferrymq/ferry/wal"

// Stats returns counts, gauges and counters of the partition.
func (f *FSM) Stats() Stats {
	s := Stats{
		Ready:     f.gauges.ready,
		Eligible:  f.gauges.eligible,
		Delayed:   f.gauges.delayed,
		InFlight:  f.gauges.inFlight,
		Dead:      f.gauges.dead,
		Bytes:     f.gauges.bytes,
		DeadBytes: f.gauges.deadBytes,
		Groups:    int64(len(f.groups)),
		LastSeq:   f.lastSeq,
		Clock:     f.clock,
		Counters:  f.counters,
		Config:    f.cfg,
		Pause:     f.pause,
	}
	if m := f.oldestAnyEligible(); m != nil {
		s.OldestEligibleAge = f.clock - m.enqueuedAt
	}
	if m, ok := f.deadOrder.Min(); ok {
		s.OldestDeadAt = m.info.deadAt
	}
	s.Schedules = f.scheduleTotals()
	return s
}

// scheduleTotals sums the schedules (at most SchedulesMax of them).
func (f *FSM) scheduleTotals() ScheduleTotals {
	var t ScheduleTotals
	for _, sc := range f.schedules {
		in := &sc.info
		t.Count++
		t.Fired, t.Refused, t.Skipped = t.Fired+in.Fired, t.Refused+in.Refused, t.Skipped+in.Skipped
		if t.NextTick == 0 || in.Next < t.NextTick {
			t.NextTick = in.Next
		}
	}
	return t
}

// Counters returns the partition's event counters.
func (f *FSM) Counters() Counters { return f.counters }

// HasEligible says whether a receive applied now would lease something
// (never while paused, nor at MaxInFlight). Long-poll waiters use it after
// each apply.
func (f *FSM) HasEligible() bool {
	atBound := f.cfg.MaxInFlight > 0 && f.gauges.inFlight >= f.cfg.MaxInFlight
	return f.gauges.eligible > 0 && !f.pause.Paused && !atBound
}

// Leasable returns how many messages a receive stamped now (the leader's
// clock, Unix nanoseconds) could lease: the eligible ones, within
// MaxInFlight and the delivery rate bound; 0 while paused. A leader
// budgets its waiting receives with it, so that one eligible message
// draws one receive, not one from every waiting consumer. Apply never
// uses it.
func (f *FSM) Leasable(now int64) int64 {
	if f.pause.Paused || f.gauges.eligible <= 0 {
		return 0
	}
	n := f.gauges.eligible
	if limit := f.cfg.MaxInFlight; limit > 0 {
		n = min(n, max(0, limit-f.gauges.inFlight))
	}
	return f.rateRoomAt(max(now, f.clock), n)
}

// CompactBodies asks the body store, if it can, to move live payloads out
// of mostly dead segments or log entries. It is not a command: locations
// are local to a replica and nothing logical changes. The caller holds the
// FSM's lock.
//
// The store reports each payload under the key it was stored with: the seq
// of the message that stored it, which for a redriven message is an older
// seq than its own (see applyRedrive); f.keys finds the owner.
func (f *FSM) CompactBodies() (wal.CompactStats, error) {
	c, ok := f.store.(Compactor)
	if !ok {
		return wal.CompactStats{}, nil
	}
	live := func(key uint64, loc Loc) bool {
		m := f.anyBySeq(f.keys.owner(key))
		return m != nil && m.pos == loc
	}
	moved := func(key uint64, from, to Loc) {
		if m := f.anyBySeq(f.keys.owner(key)); m != nil && m.pos == from {
			m.pos = to
		}
	}
	return c.Compact(live, moved)
}

// anyBySeq finds a live message or a dead letter.
func (f *FSM) anyBySeq(seq uint64) *message {
	if m := f.table.get(seq); m != nil {
		return m
	}
	return f.deadBySeq(seq)
}
