package partition

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
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

// An idle leader proposes nothing to keep the partition's clock fresh;
// its first command after a pause longer than the max clock step goes
// through without a check of its clock (the pause explains the gap), with
// one resync before it, and a jump on top of a pause is still refused.
func TestPartition_IdlePauseNeedsNoClockCheck(t *testing.T) {
	var shift atomic.Int64
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
		cfg.MaxClockStep = 150 * time.Millisecond
		cfg.ClockVerified = func(time.Time) bool { return false }
	})
	p := c.reps[c.leader()]
	send(t, p, "x", 1)
	for i := range 3 {
		last := p.RaftStats()["last_log_index"]
		time.Sleep(300 * time.Millisecond) // idle, twice the max step: what is under test
		if now := p.RaftStats()["last_log_index"]; now != last {
			t.Fatalf("idle leader appended entries: last index %s, then %s", last, now)
		}
		send(t, p, "y"+strconv.Itoa(i), 1)
	}
	st := p.Stats()
	if st.Counters.ClockRefused != 0 || st.Counters.ClockResyncs != 3 {
		t.Fatalf("idle pauses: %d refused, %d resyncs; want 0 and 3", st.Counters.ClockRefused, st.Counters.ClockResyncs)
	}
	time.Sleep(300 * time.Millisecond)
	shift.Store(int64(time.Hour))
	if _, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdTick}); !errors.Is(err, ErrClockUnverified) {
		t.Fatalf("a jump of an hour after a pause: %v, want ErrClockUnverified", err)
	}
}

// A follower elected after an idle pause longer than the max clock step
// needs no check of its clock either: it applied the entry that last moved
// the clock, and the time since explains the gap.
func TestPartition_NewLeaderAfterIdlePauseNeedsNoClockCheck(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.MaxClockStep = 150 * time.Millisecond
		cfg.ClockVerified = func(time.Time) bool { return false }
	})
	l := c.leader()
	send(t, c.reps[l], "x", 1)
	c.converged()
	time.Sleep(300 * time.Millisecond) // idle, twice the max step: what is under test
	c.stop(l)
	p := c.reps[c.leader()]
	testwait.Until(t, 10*time.Second, "a send on the new leader", func() bool {
		msgs := []fsm.NewMessage{{ID: "after", Body: []byte("b")}}
		res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdSend, Send: &fsm.SendCmd{Messages: msgs}})
		if errors.Is(err, ErrClockUnverified) {
			t.Fatalf("new leader after an idle pause: %v", err)
		}
		return err == nil && res.Err == nil
	})
}

// A lease granted while the leader's clock is an hour behind could not
// arm the tick for its end (by that clock it ends in an hour), so the
// tick stays armed for a later deadline (the dedup window's); once the
// clock is back, the sweep arms it again for the lease's end, and the
// message is ready again within seconds, with no command to carry the
// expiry.
func TestPartition_TickArmedUnderABackwardClockIsArmedAgain(t *testing.T) {
	var shift atomic.Int64
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	})
	p := c.reps[c.leader()]
	send(t, p, "m", 1)
	shift.Store(int64(-time.Hour))
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 1, Visibility: 2 * time.Second}, time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive under a clock an hour behind: %v, %v", ds, err)
	}
	p.ticks.mu.Lock()
	armedIn := time.Until(p.ticks.at)
	p.ticks.mu.Unlock()
	if armedIn < time.Minute {
		t.Fatalf("the tick is armed in %v: the test wants one armed well past the lease's end", armedIn)
	}
	shift.Store(0)
	testwait.Until(t, 10*time.Second, "the lease to end and its message to be ready again", func() bool {
		st := p.Stats()
		return st.InFlight == 0 && st.Ready == 1
	})
}
