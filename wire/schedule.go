package wire

import "time"

// Schedule is a recurring schedule of a queue: each tick sends one message
// made of Group, Headers, Body and Priority, with the id
// "<Name>@<tick in Unix seconds>". A schedule lives in the partition its
// messages belong to, SchedulePartition, which refuses it elsewhere.
type Schedule struct {
	// Name is unique within the queue: 1..128 bytes of letters, digits,
	// '.', '_' and '-'.
	Name string `msgpack:"name"`
	// Every is a fixed interval, a whole number of seconds from 1s to 366
	// days; ticks fall on its multiples since the Unix epoch. Exactly one
	// of Every and Cron is set.
	Every time.Duration `msgpack:"every,omitempty"`
	// Cron is a five-field cron expression (minute hour day-of-month
	// month day-of-week), read in UTC.
	Cron     string            `msgpack:"cron,omitempty"`
	Group    string            `msgpack:"group,omitempty"`
	Headers  map[string]string `msgpack:"headers,omitempty"`
	Body     []byte            `msgpack:"body,omitempty"`
	Priority Priority          `msgpack:"priority,omitempty"`
}

// SchedulePartition is the partition of a schedule: the one its group
// maps to (PartitionFor), so that its messages keep their group's order;
// the one its name maps to when it has no group.
func SchedulePartition(s *Schedule, partitions int) int {
	if s.Group != "" {
		return PartitionFor(s.Group, partitions)
	}
	return PartitionFor(s.Name, partitions)
}

// ScheduleStatus is a schedule with its state: the next tick, when it was
// created, the last tick handled (Unix nanoseconds, partition clock; 0:
// none), and counts of ticks that sent their message (Fired), that the
// queue refused (Refused: full, too large), and of gaps of more than 1,000
// missed ticks skipped whole (Skipped).
type ScheduleStatus struct {
	Schedule
	Partition int    `msgpack:"partition"`
	Next      int64  `msgpack:"next"`
	Created   int64  `msgpack:"created"`
	LastTick  int64  `msgpack:"last_tick,omitempty"`
	Fired     uint64 `msgpack:"fired,omitempty"`
	Refused   uint64 `msgpack:"refused,omitempty"`
	Skipped   uint64 `msgpack:"skipped,omitempty"`
}

// SetScheduleRequest creates a schedule, or replaces the one of the same
// name; served by the leader of partition SchedulePartition. A name is
// unique within a partition; clients keep it unique within the queue by
// deleting it from the other partitions once the set succeeded (a schedule
// whose group changed moves to another partition).
// A replacement keeping Every and Cron keeps the next tick; one changing
// them starts at the first new tick after now.
type SetScheduleRequest struct {
	Queue     string   `msgpack:"queue"`
	Partition int      `msgpack:"partition"`
	Schedule  Schedule `msgpack:"schedule"`
}

// SetScheduleResponse is the schedule as stored.
type SetScheduleResponse struct {
	Schedule ScheduleStatus `msgpack:"schedule"`
}

// ListSchedulesRequest lists the schedules of one partition; served by its
// leader. To list a queue's, ask every partition.
type ListSchedulesRequest struct {
	Queue     string `msgpack:"queue"`
	Partition int    `msgpack:"partition"`
}

// ListSchedulesResponse holds the partition's schedules by name (at most
// 1,000).
type ListSchedulesResponse struct {
	Schedules []ScheduleStatus `msgpack:"schedules,omitempty"`
}

// DeleteScheduleRequest deletes a schedule by name from one partition;
// served by its leader (clients ask every partition). Deleting a schedule that does not exist
// is no error (Deleted is 0).
type DeleteScheduleRequest struct {
	Queue     string `msgpack:"queue"`
	Partition int    `msgpack:"partition"`
	Name      string `msgpack:"name"`
}

// DeleteScheduleResponse says whether a schedule was deleted (1) or none
// had the name (0).
type DeleteScheduleResponse struct {
	Deleted int `msgpack:"deleted"`
}
