package fsm

import "time"

// advance fires everything due at the FSM's clock: delayed messages become
// ready, expired leases count as failed attempts, the dedup window slides
// and retention deletes old messages. It returns how many leases expired.
func (f *FSM) advance() int {
	expired := 0
	for {
		m, ok := f.timers.Min()
		if !ok || m.visibleAt > f.clock {
			break
		}
		if m.state == stateInFlight {
			f.expire(m)
			expired++
			continue
		}
		f.detach(m)
		f.schedule(m, m.visibleAt, false)
	}
	f.pruneDedup()
	f.applyRetention()
	f.applyDeadRetention()
	return expired
}

// applyDeadRetention deletes dead letters dead-lettered DeadRetention ago
// or longer, oldest first, counting them in DeadExpired.
func (f *FSM) applyDeadRetention() {
	if f.cfg.DeadRetention <= 0 {
		return
	}
	cutoff := f.clock - int64(f.cfg.DeadRetention)
	for {
		m, ok := f.deadOrder.Min()
		if !ok || m.info.deadAt > cutoff {
			return
		}
		f.detach(m)
		f.forgetBody(m)
		f.counters.DeadExpired++
	}
}

// applyRetention deletes messages older than Retention, oldest first. Leased
// messages are spared until their lease ends; dead letters are never
// touched by retention.
func (f *FSM) applyRetention() {
	if f.cfg.Retention <= 0 {
		return
	}
	cutoff := f.clock - int64(f.cfg.Retention)
	var victims []*message
	f.table.ascend(func(m *message) bool {
		if m.enqueuedAt > cutoff {
			return false
		}
		if m.state != stateInFlight {
			victims = append(victims, m)
		}
		return true
	})
	for _, m := range victims {
		f.finish(m)
		f.counters.RetentionExpired++
	}
}

// NextDeadline returns the earliest time at which a Tick would change
// something (a delayed message becomes ready, a lease expires, a dedup entry,
// a message or a dead letter ages out, a schedule's tick is due: then the
// leader proposes CmdFireSchedule, see DueSchedules), and false when
// nothing is pending. Ageing out is rounded up to a grain (see
// lateExpiry), so that a Tick at that time ages out everything due within
// the grain.
func (f *FSM) NextDeadline() (int64, bool) {
	var next int64
	found := false
	consider := func(t int64) {
		if !found || t < next {
			next, found = t, true
		}
	}
	if m, ok := f.timers.Min(); ok {
		consider(m.visibleAt)
	}
	if t, ok := f.nextScheduleTick(); ok {
		consider(t)
	}
	if f.marks.len() > 0 {
		consider(lateExpiry(f.marks.front().at+int64(f.cfg.DedupWindow), int64(f.cfg.DedupWindow)))
	}
	if m, ok := f.deadOrder.Min(); ok && f.cfg.DeadRetention > 0 {
		consider(lateExpiry(m.info.deadAt+int64(f.cfg.DeadRetention), int64(f.cfg.DeadRetention)))
	}
	if f.cfg.Retention > 0 {
		f.table.ascend(func(m *message) bool {
			if m.state == stateInFlight {
				return true // its lease deadline is a timer already
			}
			consider(lateExpiry(m.enqueuedAt+int64(f.cfg.Retention), int64(f.cfg.Retention)))
			return false
		})
	}
	return next, found
}

// expiryGrainMax is the coarsest grain lateExpiry rounds to.
const expiryGrainMax = int64(time.Second)

// lateExpiry rounds the deadline at of an expiry that may come a little
// late up to the next multiple of a grain: a tenth of the period it ends
// (an id's dedup window, a retention), at most expiryGrainMax. Dedup ids,
// retained messages and dead letters that expire within one grain then
// take one tick between them, not one each: a burst of sends followed by
// silence would otherwise make the leader propose (and every replica
// write) a tick per message sent, a dedup window later. Nothing expires
// early: the rounded deadline is never before at. Leases and delays, which
// must end on time, are not rounded.
func lateExpiry(at, period int64) int64 {
	grain := min(expiryGrainMax, max(period/10, 1))
	if r := at % grain; r != 0 {
		at += grain - r
	}
	return at
}
