package client

import (
	"context"
	"slices"
	"strings"

	"github.com/ferrymq/ferry/wire"
)

// Schedule is a recurring schedule of a queue: a name unique in the queue,
// when it ticks (Every, a whole number of seconds from 1s to 366 days on
// the multiples of which since the Unix epoch it ticks, or Cron, a
// five-field cron expression in UTC: exactly one of them), and the message
// each tick sends (Group, Headers, Body, Priority). Each tick sends one
// message with the id "<Name>@<tick in Unix seconds>", once, whatever
// leader changes and retries happen in the cluster.
type Schedule = wire.Schedule

// ScheduleStatus is a schedule with its partition, next tick, creation
// time, last tick handled (Unix nanoseconds) and counts of ticks fired,
// refused by the queue (full) and of long gaps skipped.
type ScheduleStatus = wire.ScheduleStatus

// CreateSchedule creates the schedule, or replaces the one of the same
// name, and returns it as stored. It lives in the partition its messages
// belong to (its group's, or its name's when it has none: see
// wire.SchedulePartition); once it is stored there, the name is deleted
// from every other partition, so a schedule whose group changed moves.
// A replacement keeping Every and Cron keeps its next tick.
//
//	s, err := c.CreateSchedule(ctx, "reports", client.Schedule{
//		Name: "nightly", Cron: "0 3 * * *", Body: []byte(`{"report":"daily"}`)})
func (c *Client) CreateSchedule(ctx context.Context, queue string, s Schedule) (ScheduleStatus, error) {
	if s.Priority > MaxPriority {
		return ScheduleStatus{}, &priorityError{invalidArg("schedule priority %d out of range 0..%d", s.Priority, MaxPriority)}
	}
	n, err := c.partitions(ctx, queue)
	if err != nil {
		return ScheduleStatus{}, err
	}
	home := wire.SchedulePartition(&s, n)
	var resp wire.SetScheduleResponse
	req := wire.SetScheduleRequest{Queue: queue, Partition: home, Schedule: s}
	if err := c.call(ctx, partRoute{c, queue, home}, wire.OpSetSchedule, req, &resp); err != nil {
		return ScheduleStatus{}, err
	}
	for p := range n {
		if p != home {
			if _, err := c.deleteSchedule(ctx, queue, p, s.Name); err != nil {
				return resp.Schedule, err
			}
		}
	}
	return resp.Schedule, nil
}

// ListSchedules returns the queue's schedules, from every partition,
// ordered by name.
func (c *Client) ListSchedules(ctx context.Context, queue string) ([]ScheduleStatus, error) {
	n, err := c.partitions(ctx, queue)
	if err != nil {
		return nil, err
	}
	var out []ScheduleStatus
	for p := range n {
		var resp wire.ListSchedulesResponse
		req := wire.ListSchedulesRequest{Queue: queue, Partition: p}
		if err := c.call(ctx, partRoute{c, queue, p}, wire.OpListSchedules, req, &resp); err != nil {
			return out, err
		}
		out = append(out, resp.Schedules...)
	}
	slices.SortFunc(out, func(a, b ScheduleStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteSchedule deletes the schedule of that name from the queue and
// reports whether there was one. Messages it sent already stay.
func (c *Client) DeleteSchedule(ctx context.Context, queue, name string) (bool, error) {
	n, err := c.partitions(ctx, queue)
	if err != nil {
		return false, err
	}
	deleted := false
	for p := range n {
		ok, err := c.deleteSchedule(ctx, queue, p, name)
		if err != nil {
			return deleted, err
		}
		deleted = deleted || ok
	}
	return deleted, nil
}

func (c *Client) deleteSchedule(ctx context.Context, queue string, p int, name string) (bool, error) {
	var resp wire.DeleteScheduleResponse
	req := wire.DeleteScheduleRequest{Queue: queue, Partition: p, Name: name}
	if err := c.call(ctx, partRoute{c, queue, p}, wire.OpDeleteSchedule, req, &resp); err != nil {
		return false, err
	}
	return resp.Deleted > 0, nil
}
