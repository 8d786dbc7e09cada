package partition

import (
	"context"
	"errors"

	"github.com/ferrymq/ferry/fsm"
	"github.com/hashicorp/raft"
)

// Recurring schedules (fsm/schedule.go). A schedule's ticks are fired by
// the partition's leader on the tick timer (ticker.go), the same path that
// proposes CmdTick: the FSM's next deadline includes every schedule's next
// tick, and when the timer finds ticks due it proposes one CmdFireSchedule
// per due tick (up to fireBatchMax per run, earliest first) instead of a
// tick. A fire applies only for the schedule's current next tick, so a
// proposal that raced a leader change, or was retried, sends nothing.

// fireBatchMax bounds the fires one run of the tick timer proposes; the
// timer runs again at once while more are due.
const fireBatchMax = 64

// SetSchedule creates or replaces a schedule (fsm.ScheduleSpec). A spec
// the FSM would refuse for its own shape is refused before anything is
// proposed.
func (p *Partition) SetSchedule(ctx context.Context, spec fsm.ScheduleSpec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	_, err := p.proposeCount(ctx, fsm.Command{Type: fsm.CmdSetSchedule, Schedule: &spec})
	return err
}

// DeleteSchedule deletes a schedule by name and reports whether one
// existed.
func (p *Partition) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	if err := fsm.ValidateScheduleName(name); err != nil {
		return false, err
	}
	n, err := p.proposeCount(ctx, fsm.Command{Type: fsm.CmdDeleteSchedule, Unschedule: &fsm.DeleteScheduleCmd{Name: name}})
	return n > 0, err
}

// Schedules lists the partition's schedules by name, read on the leader
// as Find reads.
func (p *Partition) Schedules(ctx context.Context) ([]fsm.ScheduleInfo, error) {
	if err := p.ReadBarrier(ctx); err != nil {
		return nil, err
	}
	if err := p.raft.VerifyLeader().Error(); err != nil {
		if errors.Is(err, raft.ErrLeadershipLost) {
			return nil, p.notLeader()
		}
		return nil, p.mapRaftError(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fsm.Schedules(), nil
}

// fireDueSchedules proposes a CmdFireSchedule for each schedule tick due
// at now, earliest first, and reports whether any was due. It stops at
// the first failure.
func (p *Partition) fireDueSchedules(now int64) (bool, error) {
	p.mu.Lock()
	due := p.fsm.DueSchedules(now, fireBatchMax)
	p.mu.Unlock()
	for _, d := range due {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ApplyTimeout)
		res, err := p.Propose(ctx, fsm.Command{Type: fsm.CmdFireSchedule, Fire: &fsm.FireScheduleCmd{Name: d.Name, Tick: d.Tick}})
		cancel()
		if err == nil {
			err = res.Err
		}
		if err != nil {
			p.logger.Debug("schedule fire failed", "schedule", d.Name, "tick", d.Tick, "err", err)
			return true, err
		}
	}
	return len(due) > 0, nil
}
