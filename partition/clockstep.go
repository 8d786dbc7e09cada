package partition

import (
	"sync"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// DefaultMaxClockStep is how far one command may move a partition's clock
// forward (fsm.FSM.SetMaxClockStep). Every node must use the same value;
// ferryd has no flag for it. An idle partition proposes nothing to keep
// its clock fresh: the first command after a longer pause is preceded by
// a resync that the time elapsed since the clock last moved accounts for
// (see clockMark).
const DefaultMaxClockStep = 10 * time.Second

// clockMark is when (monotonic time of this process) this replica applied
// the entry that last moved the partition's clock, and the clock it left.
// A stamp ahead of the clock by no more than the max step plus the time
// elapsed since then is explained by that time, not by a clock that
// jumped: this node's clock advanced with real time (to within the step)
// since the partition accepted its clock. Guarded by Partition.mu; zero
// (no mark) after a snapshot restore. Marks do not survive a restart: the
// replay of the log happens later than its entries were stamped, which
// makes the elapsed time look shorter, never longer.
type clockMark struct {
	clock int64
	at    time.Time
}

// markClockLocked records a move of the partition's clock from before,
// made by the entries just applied. p.mu held.
func (p *Partition) markClockLocked(before int64) {
	if c := p.fsm.Clock(); c != before {
		p.clockMark = clockMark{clock: c, at: time.Now()}
	}
}

// elapsedExplains reports whether a stamp ahead of clock by ahead is
// accounted for by the time since mark (see clockMark).
func elapsedExplains(mark clockMark, clock int64, ahead, step time.Duration) bool {
	return !mark.at.IsZero() && mark.clock == clock && ahead-time.Since(mark.at) <= step
}

// clockGap tracks the time since this leader's clock was first seen too far
// ahead of the partition's clock: a resync then waits for a check of the
// clock against the other nodes made after that moment.
type clockGap struct {
	mu    sync.Mutex
	since time.Time // zero: no gap
}

// checkClockStep is called with a freshly stamped command. It refuses
// with ErrClockUnverified while the node's clock is known to be off. When the stamp
// is more than the max clock step ahead of the FSM's clock, it proposes a
// CmdClockResync first if the time elapsed since the clock last moved
// explains the gap (an idle partition: see clockMark) or the node's clock
// has been verified since the gap was seen, and otherwise refuses with
// ErrClockUnverified, which changes nothing.
func (p *Partition) checkClockStep(cmd fsm.Command) error {
	if p.cfg.ClockHealthy != nil && !p.cfg.ClockHealthy() {
		return ErrClockUnverified
	}
	step := p.cfg.MaxClockStep
	if step <= 0 || cmd.Type == fsm.CmdClockResync {
		return nil
	}
	p.mu.Lock()
	clock, mark := p.fsm.Clock(), p.clockMark
	p.mu.Unlock()
	ahead := time.Duration(cmd.At - clock)
	g := &p.clockGap
	g.mu.Lock()
	if clock == 0 || ahead <= step {
		g.since = time.Time{}
		g.mu.Unlock()
		return nil
	}
	if elapsedExplains(mark, clock, ahead, step) {
		g.mu.Unlock()
		p.logger.Debug("partition clock resynced after an idle pause", "ahead", ahead, "max_clock_step", step)
		_, err := p.propose(fsm.Command{Type: fsm.CmdClockResync, At: cmd.At}, p.cfg.ApplyTimeout)
		return err
	}
	first := g.since.IsZero()
	if first {
		g.since = time.Now()
	}
	since := g.since
	g.mu.Unlock()
	if p.cfg.ClockVerified != nil && !p.cfg.ClockVerified(since) {
		if first {
			p.logger.Warn("this leader's clock is ahead of the partition clock by more than the max clock step; "+
				"commands wait for a check of the clock against the other nodes", "ahead", ahead, "max_clock_step", step)
		}
		return ErrClockUnverified
	}
	p.logger.Info("partition clock resynced to this leader's clock, checked against the other nodes",
		"ahead", ahead, "max_clock_step", step)
	_, err := p.propose(fsm.Command{Type: fsm.CmdClockResync, At: cmd.At}, p.cfg.ApplyTimeout)
	return err
}
