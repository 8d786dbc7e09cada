package partition

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// A leader whose clock jumps an hour ahead changes nothing until its clock
// has been verified after the jump; then one resync moves the partition's
// clock and work goes on.
func TestPartition_ClockJumpWaitsForVerification(t *testing.T) {
	var shift atomic.Int64
	var verifiedAt atomic.Int64 // UnixNano of the last good check; 0: none
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
		cfg.ClockVerified = func(since time.Time) bool {
			v := verifiedAt.Load()
			return v != 0 && time.Unix(0, v).After(since)
		}
	})
	p := c.reps[c.leader()]
	send(t, p, "before", 1)
	p.mu.Lock()
	clock0 := p.fsm.Clock()
	p.mu.Unlock()

	shift.Store(int64(time.Hour))
	_, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdTick})
	if !errors.Is(err, ErrClockUnverified) {
		t.Fatalf("tick an hour ahead, unverified: %v, want ErrClockUnverified", err)
	}
	p.mu.Lock()
	clock, st := p.fsm.Clock(), p.fsm.Stats()
	p.mu.Unlock()
	if clock-clock0 > int64(time.Minute) || st.Counters.ClockResyncs != 0 {
		t.Fatalf("unverified jump moved the clock by %v (%d resyncs)", time.Duration(clock-clock0), st.Counters.ClockResyncs)
	}

	verifiedAt.Store(time.Now().UnixNano()) // a check after the gap was seen
	send(t, p, "after", 1)
	p.mu.Lock()
	clock, st = p.fsm.Clock(), p.fsm.Stats()
	p.mu.Unlock()
	if clock-clock0 < int64(59*time.Minute) || st.Counters.ClockResyncs != 1 {
		t.Fatalf("verified jump: clock moved %v, %d resyncs", time.Duration(clock-clock0), st.Counters.ClockResyncs)
	}
}

// An idle leader keeps the partition's clock within the max clock step,
// so a healthy leader never needs a resync.
func TestPartition_IdleLeaderKeepsClockFresh(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.MaxClockStep = 150 * time.Millisecond
		cfg.ClockVerified = func(time.Time) bool { return false }
	})
	p := c.reps[c.leader()]
	send(t, p, "x", 1)
	for range 3 {
		time.Sleep(300 * time.Millisecond) // idle, twice the max step: what is under test
		send(t, p, "y", 1)
	}
	if st := p.Stats(); st.Counters.ClockRefused != 0 || st.Counters.ClockResyncs != 0 {
		t.Fatalf("idle leader: %d refused, %d resyncs", st.Counters.ClockRefused, st.Counters.ClockResyncs)
	}
}
