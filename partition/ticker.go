package partition

import (
	"context"
	"fmt"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// runTicker proposes Tick on the leader whenever the FSM's next deadline has
// come, so leases expire, delayed messages become ready and dedup entries
// age out without client activity. It sleeps until the deadline, at most
// TickIntervalMax, and is woken early when an apply brings the deadline
// closer.
func (p *Partition) runTicker() {
	defer p.loops.Done()
	timer := time.NewTimer(p.cfg.TickIntervalMax)
	defer timer.Stop()
	for {
		select {
		case <-p.closing:
			return
		case <-timer.C:
		case <-p.deadlines:
		}
		wait := p.cfg.TickIntervalMax
		if p.IsLeader() {
			wait = p.tickIfDue()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// tickIfDue proposes a Tick if the next deadline has passed, or the
// partition's clock is a third of the max clock step behind, and returns
// how long to sleep before looking again.
func (p *Partition) tickIfDue() time.Duration {
	p.mu.Lock()
	next, ok := p.fsm.NextDeadline()
	clock := p.fsm.Clock()
	p.mu.Unlock()
	if beat := p.cfg.MaxClockStep / 3; beat > 0 && clock != 0 && (!ok || next > clock+int64(beat)) {
		// Keep the partition's clock within the max clock step of the
		// leader's, so that it never refuses a healthy leader's command.
		next, ok = clock+int64(beat), true
	}
	if !ok {
		return p.cfg.TickIntervalMax
	}
	if wait := time.Duration(next - p.now().UnixNano()); wait > 0 {
		return min(wait, p.cfg.TickIntervalMax)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ApplyTimeout)
	defer cancel()
	if _, err := p.Propose(ctx, fsm.Command{Type: fsm.CmdTick}); err != nil {
		p.logger.Debug("tick failed", "err", err)
		return min(10*time.Millisecond, p.cfg.TickIntervalMax)
	}
	return 0
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

// runCompactor compacts the WAL every CompactInterval, on every replica.
func (p *Partition) runCompactor() {
	defer p.loops.Done()
	t := time.NewTicker(p.cfg.CompactInterval)
	defer t.Stop()
	for {
		select {
		case <-p.closing:
			return
		case <-t.C:
		}
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
}
