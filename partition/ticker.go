package partition

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/hashicorp/raft"
)

// The tick: a leader proposes Tick when the FSM's next deadline has come,
// so that leases expire, delayed messages become ready and dedup entries,
// retained messages and dead letters age out without client activity. It
// runs on a timer armed for that deadline, and only then: a follower, or
// a leader with nothing pending, has no timer and proposes nothing. The
// timer is armed (or brought forward) when an apply on the leader brings
// the next deadline closer, when a tick has run, and by the scheduler's
// sweep for a replica that leads with a deadline pending (a new leader).
// When it fires it runs one tick on a goroutine of its own, which ends
// with it; a tick never runs twice at once.
type tickTimer struct {
	mu      sync.Mutex
	timer   *time.Timer // nil: not armed
	at      time.Time   // when the armed timer fires
	running bool        // a tick runs (fired, not yet re-armed)
	// proposed and failed count this replica's ticks as leader, lastErr
	// is the last failure's text (for TickDebug).
	proposed, failed uint64
	lastErr          string
}

// armTickForDeadline arms the tick timer for the FSM's next deadline, if
// this replica leads and one is pending.
//
// It reports whether the partition holds a deadline (false on a replica
// that does not lead): without a new entry applied none can appear, so
// the sweep need not look again until the applied index moves.
func (p *Partition) armTickForDeadline() bool {
	if p.raft.State() != raft.Leader {
		return false
	}
	p.mu.Lock()
	next, ok := p.fsm.NextDeadline()
	p.mu.Unlock()
	if ok {
		p.armTick(time.Duration(next - p.now().UnixNano()))
	}
	return ok
}

// noteDeadline records the FSM's next deadline for rearmIfLate.
func (p *Partition) noteDeadline(at int64, ok bool) {
	if !ok {
		at = 0
	}
	p.deadline.Store(at)
}

// tickLateSlack is how much later than the next deadline calls for an
// armed tick may fire before rearmIfLate arms it again.
const tickLateSlack = time.Second

// rearmIfLate arms the tick again when it is armed to fire well after the
// FSM's next deadline as this node's clock reads it now: a timer armed
// while the node's clock was behind (it was set by the real time left
// until the deadline, as that clock measured it) would otherwise fire an
// hour late after an hour's jump back, and until then neither a lease
// nor a delay of the partition would end (a pending deadline already past
// keeps applies from arming it sooner). The sweep calls it for leaders
// whose tick is armed: one atomic read and a lock per replica.
func (p *Partition) rearmIfLate(now time.Time) {
	at := p.deadline.Load()
	if at == 0 {
		return
	}
	wait := time.Duration(at - p.now().UnixNano())
	want := now.Add(wait + tickLateSlack)
	t := &p.ticks
	t.mu.Lock()
	late := !t.running && t.timer != nil && t.at.After(want)
	t.mu.Unlock()
	if late {
		p.logger.Debug("tick armed past the next deadline: armed again", "deadline_in", wait)
		p.armTick(wait)
	}
}

// tickArmed reports whether the tick timer is armed or a tick runs: an
// apply that brings the deadline closer re-arms it, so the sweep need not.
func (p *Partition) tickArmed() bool {
	t := &p.ticks
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running || t.timer != nil
}

// armTick has the tick run in wait (at once if not positive), unless it is
// armed to run sooner or runs now (which re-arms when it ends).
func (p *Partition) armTick(wait time.Duration) {
	wait = max(wait, 0)
	at := time.Now().Add(wait)
	t := &p.ticks
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running || (t.timer != nil && !t.at.After(at)) {
		return
	}
	select {
	case <-p.closing:
		return
	default:
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	t.at = at
	t.timer = time.AfterFunc(wait, p.tickFired)
}

// tickFired runs on the timer's goroutine: one tick, then the timer is
// armed again for the FSM's next deadline as it is then (an apply that
// brought it closer meanwhile could not arm the timer while the tick
// ran), if this replica still leads; after a failed tick, in
// TickIntervalMax.
func (p *Partition) tickFired() {
	t := &p.ticks
	t.mu.Lock()
	if t.running {
		t.mu.Unlock()
		return // a stopped timer that fired anyway: the running tick re-arms
	}
	t.running, t.timer = true, nil
	t.mu.Unlock()
	failed, tracked := false, p.track()
	if tracked {
		failed = p.raft.State() == raft.Leader && p.tickIfDue() != nil
		p.loops.Done()
	}
	t.mu.Lock()
	t.running = false
	t.mu.Unlock()
	switch {
	case !tracked: // closing
	case failed:
		p.armTick(p.cfg.TickIntervalMax)
	default:
		p.armTickForDeadline()
	}
}

// tickIfDue proposes a Tick if the next deadline has passed, or the fires
// of the schedule ticks due (schedules.go), which move the clock as a
// tick does. A tick the
// FSM refused (its result's error) failed too: retrying it at once would
// spin.
func (p *Partition) tickIfDue() error {
	p.mu.Lock()
	next, ok := p.fsm.NextDeadline()
	p.mu.Unlock()
	now := p.now().UnixNano()
	if !ok || next > now {
		return nil
	}
	if fired, err := p.fireDueSchedules(now); fired || err != nil {
		return err // the fires moved the clock; the timer comes back for the rest
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ApplyTimeout)
	defer cancel()
	res, err := p.Propose(ctx, fsm.Command{Type: fsm.CmdTick})
	if err == nil {
		err = res.Err
	}
	t := &p.ticks
	t.mu.Lock()
	t.proposed++
	if err != nil {
		t.failed++
		t.lastErr = err.Error()
	}
	t.mu.Unlock()
	if err != nil {
		p.logger.Debug("tick failed", "err", err)
	}
	return err
}

// TickDebug is a replica's tick state, for diagnostics: the partition
// clock and next deadline (Unix nanoseconds; 0 when none), the node's
// clock as the partition reads it, and the ticks this replica proposed
// as leader, failed, and the last failure.
type TickDebug struct {
	Clock, NextDeadline, Now int64
	Proposed, Failed         uint64
	LastErr                  string
}

// TickDebug returns the replica's tick state.
func (p *Partition) TickDebug() TickDebug {
	p.mu.Lock()
	d := TickDebug{Clock: p.fsm.Clock(), Now: p.now().UnixNano()}
	if next, ok := p.fsm.NextDeadline(); ok {
		d.NextDeadline = next
	}
	p.mu.Unlock()
	t := &p.ticks
	t.mu.Lock()
	d.Proposed, d.Failed, d.LastErr = t.proposed, t.failed, t.lastErr
	t.mu.Unlock()
	return d
}

// relocateBytesMax bounds the payload bytes one relocation step copies
// (it runs under the partition's lock).
const relocateBytesMax = 8 << 20

// relocateOldPayloads copies the payloads still living in old, mostly
// dead raft entries (older than the TrailingLogs that raft keeps anyway)
// into body records, so that the log can let those entries go: one
// long-waiting message must not keep the whole log behind it. The copies
// are made durable before the entries are released (a pin holds them
// meanwhile).
func (p *Partition) relocateOldPayloads() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.applied <= p.cfg.TrailingLogs {
		return
	}
	cut := p.applied - p.cfg.TrailingLogs
	if !p.bodies.sparseBelow(cut) || p.disk.check(time.Now()) != nil {
		return // nothing worth moving, or no room to move it to
	}
	hold := p.bodies.Pin()
	defer hold()
	mark := p.body.End()
	n, bytes, err := p.fsm.RelocateBodies(func(l fsm.Loc) bool { return l.A != 0 && l.A < cut }, relocateBytesMax, p.body.Sync)
	if err != nil {
		// Nothing moved: the copies are referenced by nothing, cut them off.
		if rerr := p.body.RollbackTo(mark); rerr != nil {
			err = fmt.Errorf("%w (and cutting the copies back failed: %w)", err, rerr)
		}
		p.logger.Error("moving payloads out of old log entries failed", "err", err)
		return
	}
	p.logger.Debug("payloads moved out of old log entries", "messages", n, "bytes", bytes, "below", cut)
}

// compact runs one WAL compaction of the replica (the scheduler hands it
// out every CompactInterval, on every replica): payloads are moved out of
// old, mostly dead entries, then mostly dead body segments are compacted.
func (p *Partition) compact() {
	p.relocateOldPayloads()
	p.mu.Lock()
	st, err := p.fsm.CompactBodies()
	p.mu.Unlock()
	if err != nil {
		p.logger.Error("wal compaction failed", "err", err)
	} else if st.SegmentsCompacted > 0 {
		p.logger.Debug("wal compacted", "segments", st.SegmentsCompacted, "moved", st.RecordsMoved, "reclaimed", st.BytesReclaimed)
	}
}

// stopTick disarms the tick timer for good (the replica is closing: armTick
// arms nothing more).
func (p *Partition) stopTick() {
	t := &p.ticks
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}
