package node

import (
	"context"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wire"
)

// handleSetSchedule creates or replaces a schedule on the leader of the
// partition it belongs to (wire.SchedulePartition); the partition checks
// the spec with the FSM's rules.
func (n *Node) handleSetSchedule(ctx context.Context, r *wire.SetScheduleRequest) (*wire.SetScheduleResponse, error) {
	p, q, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	if want := wire.SchedulePartition(&r.Schedule, len(q.Partitions)); want != r.Partition {
		return nil, wire.Errorf(wire.CodeInvalidArgument, "schedule %q belongs to partition %d", r.Schedule.Name, want)
	}
	if r.Schedule.Priority > wire.PriorityMax {
		return nil, wire.Errorf(wire.CodeInvalidArgument, "priority %d (want 0..%d)", r.Schedule.Priority, wire.PriorityMax)
	}
	spec := scheduleSpecOf(&r.Schedule)
	if err := p.SetSchedule(ctx, spec); err != nil {
		return nil, err
	}
	list, err := p.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if s.Name == spec.Name {
			return &wire.SetScheduleResponse{Schedule: scheduleStatusOf(r.Partition, s)}, nil
		}
	}
	return nil, wire.Errorf(wire.CodeUnavailable, "schedule %q was replaced or deleted meanwhile", spec.Name)
}

// handleListSchedules lists a partition's schedules on its leader.
func (n *Node) handleListSchedules(ctx context.Context, r *wire.ListSchedulesRequest) (*wire.ListSchedulesResponse, error) {
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	list, err := p.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	out := &wire.ListSchedulesResponse{}
	for _, s := range list {
		out.Schedules = append(out.Schedules, scheduleStatusOf(r.Partition, s))
	}
	return out, nil
}

// handleDeleteSchedule deletes a schedule by name from one partition.
func (n *Node) handleDeleteSchedule(ctx context.Context, r *wire.DeleteScheduleRequest) (*wire.DeleteScheduleResponse, error) {
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	ok, err := p.DeleteSchedule(ctx, r.Name)
	if err != nil {
		return nil, err
	}
	out := &wire.DeleteScheduleResponse{}
	if ok {
		out.Deleted = 1
	}
	return out, nil
}

// scheduleSpecOf converts a wire schedule to the FSM's spec.
func scheduleSpecOf(s *wire.Schedule) fsm.ScheduleSpec {
	return fsm.ScheduleSpec{Name: s.Name, Every: s.Every, Cron: s.Cron, Group: s.Group, Headers: s.Headers,
		Body: s.Body, Priority: uint8(s.Priority)}
}

// scheduleStatusOf converts a schedule of partition partitionIndex to the
// wire.
func scheduleStatusOf(partitionIndex int, s fsm.ScheduleInfo) wire.ScheduleStatus {
	return wire.ScheduleStatus{
		Schedule: wire.Schedule{Name: s.Name, Every: s.Every, Cron: s.Cron, Group: s.Group, Headers: s.Headers,
			Body: s.Body, Priority: wire.Priority(s.Priority)},
		Partition: partitionIndex, Next: s.Next, Created: s.Created, LastTick: s.LastTick,
		Fired: s.Fired, Refused: s.Refused, Skipped: s.Skipped,
	}
}
