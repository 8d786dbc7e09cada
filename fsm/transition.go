package fsm

// Every change of a message's state goes through the functions of this file,
// which keep the indexes and gauges in step with the state.

// detach takes m out of the index of its current state and its gauge. The
// message keeps its state field until the caller sets a new one.
func (f *FSM) detach(m *message) {
	switch m.state {
	case stateReady:
		f.gauges.ready--
		f.dropEligible(m)
	case stateDelayed:
		f.gauges.delayed--
		f.mustDelete(f.timers.Delete(m))
	case stateInFlight:
		f.gauges.inFlight--
		f.mustDelete(f.timers.Delete(m))
	case stateDead:
		f.gauges.dead--
		f.gauges.deadBytes -= int64(m.stored)
		f.mustDelete(f.dead.Delete(m))
		f.mustDelete(f.deadOrder.Delete(m))
	}
}

func (f *FSM) mustDelete(_ *message, found bool) {
	if !found {
		panic("fsm: index out of step with message state")
	}
}

// dropEligible removes m from the eligible indexes. A message found by the
// fresh cursor needs no removal: the cursor skips it once m.eligible no
// longer says FIFO.
func (f *FSM) dropEligible(m *message) {
	switch m.eligible {
	case eligibleTree:
		p := m.priority()
		f.mustDelete(f.levelTree(p).Delete(m))
		f.dropLane(m)
		if p > 0 {
			f.high--
		}
		f.gauges.eligible--
	case eligibleFIFO:
		f.gauges.eligible--
	}
	m.eligible = notEligible
}

// schedule puts a non-dead m into ready (when visibleAt has come) or delayed.
// fresh is set for a message just sent (always the newest seq): eligible at
// once, one of priority 0 needs no index entry, as the fresh cursor walks
// the seq table.
func (f *FSM) schedule(m *message, visibleAt int64, fresh bool) {
	m.visibleAt = visibleAt
	if visibleAt > f.clock {
		m.state = stateDelayed
		f.gauges.delayed++
		f.timers.ReplaceOrInsert(m)
		return
	}
	m.state = stateReady
	f.gauges.ready++
	if m.group != nil && m.group.first() != m {
		return // waits behind an earlier message of its group
	}
	f.gauges.eligible++
	if fresh && m.priority() == 0 && (m.group == nil || !f.fair()) {
		m.eligible = eligibleFIFO
		return
	}
	f.indexEligible(m)
}

// lease hands m (just taken off the eligible indexes) to consumer.
func (f *FSM) lease(m *message, consumer string, visibility int64) {
	f.gauges.ready--
	m.attempts++
	if m.info == nil {
		m.info = &deliveryInfo{firstDeliveredAt: f.clock}
	}
	m.info.consumer = consumer
	m.info.lastDeliveredAt = f.clock
	m.state = stateInFlight
	m.visibleAt = f.clock + visibility
	f.gauges.inFlight++
	f.timers.ReplaceOrInsert(m)
	f.counters.Leased++
}

// unlink removes a live m from the table and its group, promoting the next
// member of the group when m was its head.
func (f *FSM) unlink(m *message) {
	f.table.remove(m.seq)
	f.gauges.bytes -= int64(m.stored)
	g := m.group
	if g == nil {
		return
	}
	wasHead := g.first() == m
	g.remove(m)
	if g.size() == 0 {
		delete(f.groups, g.name)
		return
	}
	if wasHead {
		f.promote(g)
	}
}

// promote makes a group's new head eligible if it is ready.
func (f *FSM) promote(g *group) {
	h := g.first()
	if h.state == stateReady && h.eligible == notEligible {
		f.indexEligible(h)
		f.gauges.eligible++
	}
}

// finish deletes a live m for good (ack, purge, retention).
func (f *FSM) finish(m *message) {
	f.detach(m)
	f.unlink(m)
	f.forgetBody(m)
}

// forgetBody tells the store m's body is no longer needed.
func (f *FSM) forgetBody(m *message) {
	f.keys.drop(m.seq)
	f.releaseBody(m)
}

// releaseBody is forgetBody for a message no longer in the FSM's state (a
// message of the state a restore replaced): f.keys is left alone.
func (f *FSM) releaseBody(m *message) {
	if err := f.store.MarkDead(m.pos, int(m.stored)); err != nil {
		panic("fsm: body store rejected mark-dead: " + err.Error())
	}
}

// deadLetter moves a live m to the dead letters.
func (f *FSM) deadLetter(m *message, reason DeadReason, text string) {
	f.detach(m)
	f.unlink(m)
	m.state = stateDead
	m.group = groupless(m.group)
	m.info.deadAt = f.clock
	m.info.deadReason = reason
	m.info.deadText = text
	f.dead.ReplaceOrInsert(m)
	f.deadOrder.ReplaceOrInsert(m)
	f.gauges.dead++
	f.gauges.deadBytes += int64(m.stored)
	f.counters.DeadLettered++
	f.trimDead()
}

// trimDead deletes the oldest dead letters (by dead-lettering time, then
// seq) while the partition holds more than MaxDead of them or more than
// MaxDeadBytes, counting each in DeadEvicted.
func (f *FSM) trimDead() {
	for (f.cfg.MaxDead > 0 && f.gauges.dead > f.cfg.MaxDead) ||
		(f.cfg.MaxDeadBytes > 0 && f.gauges.deadBytes > f.cfg.MaxDeadBytes) {
		m, ok := f.deadOrder.Min()
		if !ok {
			return
		}
		f.detach(m)
		f.forgetBody(m)
		f.counters.DeadEvicted++
	}
}

// groupless returns a detached copy of g holding only its name: a dead
// letter remembers its group but is no member of it.
func groupless(g *group) *group {
	if g == nil {
		return nil
	}
	return &group{name: g.name}
}

// freshFront advances the fresh cursor over the seq table to the first
// message still eligible since its send, and returns it (nil if none). Each
// seq is passed once, so the walk costs O(1) per message over its life.
func (f *FSM) freshFront() *message {
	for f.freshFrom <= f.lastSeq {
		if m := f.table.get(f.freshFrom); m != nil && m.eligible == eligibleFIFO {
			return m
		}
		f.freshFrom = f.table.nextAfter(f.freshFrom)
	}
	return nil
}

// oldestEligible returns the oldest eligible message of priority 0
// without taking it.
func (f *FSM) oldestEligible() *message {
	a := f.freshFront()
	b, ok := f.returned.Min()
	if a == nil || (ok && b.seq < a.seq) {
		if ok {
			return b
		}
		return nil
	}
	return a
}
