package fsm

import "fmt"

// checkInvariants verifies that indexes, groups and gauges agree with the
// messages' states. It costs O(messages) and exists for tests and debugging.
func (f *FSM) checkInvariants() error {
	var g gauges
	var err error
	fail := func(format string, args ...any) bool {
		err = fmt.Errorf("fsm invariant: "+format, args...)
		return false
	}
	timed, inTree, high := 0, 0, 0
	f.table.ascend(func(m *message) bool {
		g.bytes += int64(m.stored)
		switch m.state {
		case stateReady:
			g.ready++
			head := m.group == nil || m.group.first() == m
			if head != (m.eligible != notEligible) {
				return fail("seq %d ready, head=%v, eligible=%d", m.seq, head, m.eligible)
			}
			if m.eligible != notEligible {
				g.eligible++
			}
			if m.eligible == eligibleTree {
				inTree++
				if _, ok := f.levelTree(m.priority()).Get(m); !ok {
					return fail("seq %d eligible but not in its index", m.seq)
				}
			}
			if m.eligible != notEligible && m.priority() > 0 {
				high++
				if m.eligible != eligibleTree {
					return fail("seq %d of priority %d found by the fresh cursor", m.seq, m.priority())
				}
			}
		case stateDelayed, stateInFlight:
			if m.state == stateDelayed {
				g.delayed++
			} else {
				g.inFlight++
			}
			timed++
			if m.visibleAt <= f.clock || m.eligible != notEligible {
				return fail("seq %d state %d due at %d (clock %d), eligible=%d", m.seq, m.state, m.visibleAt, f.clock, m.eligible)
			}
			if _, ok := f.timers.Get(m); !ok {
				return fail("seq %d timed but not in timers", m.seq)
			}
		default:
			return fail("seq %d in the table with state %d", m.seq, m.state)
		}
		if m.group != nil && f.groups[m.group.name] != m.group {
			return fail("seq %d points to a stale group %q", m.seq, m.group.name)
		}
		if m.seq > f.lastSeq {
			return fail("seq %d beyond last seq %d", m.seq, f.lastSeq)
		}
		return true
	})
	if err != nil {
		return err
	}
	f.dead.Ascend(func(m *message) bool {
		if m.state != stateDead || m.info == nil || m.info.deadReason == 0 {
			return fail("dead letter %d with state %d", m.seq, m.state)
		}
		g.dead++
		g.deadBytes += int64(m.stored)
		return true
	})
	if err != nil {
		return err
	}
	if f.deadOrder.Len() != f.dead.Len() {
		return fmt.Errorf("fsm invariant: %d dead letters by time, %d by seq", f.deadOrder.Len(), f.dead.Len())
	}
	if g != f.gauges {
		return fmt.Errorf("fsm invariant: gauges %+v, recounted %+v", f.gauges, g)
	}
	indexed := f.returned.Len()
	for _, t := range f.levels {
		if t != nil {
			indexed += t.Len()
		}
	}
	if timed != f.timers.Len() || inTree != indexed || high != f.high {
		return fmt.Errorf("fsm invariant: %d timed vs %d timers, %d vs %d returned, %d vs %d above priority 0",
			timed, f.timers.Len(), inTree, indexed, high, f.high)
	}
	if f.guard >= GuardEvery {
		return fmt.Errorf("fsm invariant: starvation guard at %d", f.guard)
	}
	if err := f.checkLanes(); err != nil {
		return err
	}
	if err := f.checkGroups(); err != nil {
		return err
	}
	if err := f.checkBodyKeys(); err != nil {
		return err
	}
	if (f.dedup.len() == 0) != (f.marks.len() == 0) {
		return fmt.Errorf("fsm invariant: %d dedup ids, %d marks", f.dedup.len(), f.marks.len())
	}
	return f.dedup.check()
}

func (f *FSM) checkGroups() error {
	members := 0
	for name, g := range f.groups {
		if g.size() == 0 || g.name != name {
			return fmt.Errorf("fsm invariant: group %q empty or misnamed", name)
		}
		var prev uint64
		for i, m := range g.members[g.head:] {
			if m.seq <= prev || f.table.get(m.seq) != m || m.group != g {
				return fmt.Errorf("fsm invariant: group %q member %d (seq %d) out of order or detached", name, i, m.seq)
			}
			if i > 0 && m.state == stateInFlight {
				return fmt.Errorf("fsm invariant: group %q leases seq %d behind its head", name, m.seq)
			}
			prev = m.seq
		}
		members += g.size()
	}
	grouped := 0
	f.table.ascend(func(m *message) bool {
		if m.group != nil {
			grouped++
		}
		return true
	})
	if grouped != members {
		return fmt.Errorf("fsm invariant: %d grouped messages, %d group members", grouped, members)
	}
	return nil
}

// checkBodyKeys verifies that f.keys names only messages the FSM holds, and
// that its two maps are inverses.
func (f *FSM) checkBodyKeys() error {
	if len(f.keys.ownerByKey) != f.keys.len() {
		return fmt.Errorf("fsm invariant: %d body keys by seq, %d owners by key", f.keys.len(), len(f.keys.ownerByKey))
	}
	for seq, key := range f.keys.keyBySeq {
		if f.anyBySeq(seq) == nil || f.keys.owner(key) != seq || key == seq {
			return fmt.Errorf("fsm invariant: body key %d of seq %d names no held message or is not its own inverse", key, seq)
		}
	}
	return nil
}

// checkLanes verifies that while delivery is fair the lanes hold exactly
// the eligible group heads, none found by the fresh cursor, and no stamp
// is ahead of the lane clock.
func (f *FSM) checkLanes() error {
	var count [PriorityMax + 1]int
	for _, g := range f.groups {
		if g.served > f.laneClock {
			return fmt.Errorf("fsm invariant: group %q stamped %d after the lane clock %d", g.name, g.served, f.laneClock)
		}
		h := g.first()
		if !f.fair() || h.eligible == notEligible {
			continue
		}
		if h.eligible != eligibleTree {
			return fmt.Errorf("fsm invariant: head seq %d of group %q found by the fresh cursor while fair", h.seq, g.name)
		}
		if _, ok := f.lanes.Get(h); !ok {
			return fmt.Errorf("fsm invariant: head seq %d of group %q not in the lanes", h.seq, g.name)
		}
		count[h.priority()]++
	}
	n := 0
	if f.lanes != nil {
		n = f.lanes.Len()
	}
	total := 0
	for _, c := range count {
		total += c
	}
	if count != f.laneCount || n != total || f.plainTick > f.laneClock {
		return fmt.Errorf("fsm invariant: lanes %v (%d entries), recounted %v; ungrouped stamp %d, clock %d",
			f.laneCount, n, count, f.plainTick, f.laneClock)
	}
	return nil
}
