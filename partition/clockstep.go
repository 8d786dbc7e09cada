package partition

import (
	"sync"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// DefaultMaxClockStep is how far one command may move a partition's clock
// forward (fsm.FSM.SetMaxClockStep). Every node must use the same value;
// ferryd has no flag for it. An idle leader proposes a Tick every third of
// it, so that a healthy partition never meets the bound.
const DefaultMaxClockStep = 10 * time.Second

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
// CmdClockResync first if the node's clock has been verified since the gap
// was seen, and otherwise refuses with ErrClockUnverified, which changes
// nothing.
func (p *Partition) checkClockStep(cmd fsm.Command) error {
	if p.cfg.ClockHealthy != nil && !p.cfg.ClockHealthy() {
		return ErrClockUnverified
	}
	step := p.cfg.MaxClockStep
	if step <= 0 || cmd.Type == fsm.CmdClockResync {
		return nil
	}
	p.mu.Lock()
	clock := p.fsm.Clock()
	p.mu.Unlock()
	ahead := time.Duration(cmd.At - clock)
	g := &p.clockGap
	g.mu.Lock()
	if clock == 0 || ahead <= step {
		g.since = time.Time{}
		g.mu.Unlock()
		return nil
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
