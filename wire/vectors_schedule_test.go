package wire_test

import (
	"time"

	"github.com/ferrymq/ferry/wire"
)

// scheduleVectors show recurring schedules: creating one (a fixed
// interval, and a cron expression), listing and deleting them.
func scheduleVectors() []vector {
	return []vector{
		mustRequest("request-set-schedule", "Every 30 seconds, send a heartbeat message of group hb to partition 0 of orders (the partition of group hb).",
			24, wire.OpSetSchedule, &wire.SetScheduleRequest{Queue: "orders", Schedule: wire.Schedule{Name: "heartbeat",
				Every: 30 * time.Second, Group: "hb", Body: []byte(`{"ping":true}`)}}),
		mustRequest("request-set-schedule-cron", "At 09:00 UTC on weekdays, a priority-5 report message.",
			25, wire.OpSetSchedule, &wire.SetScheduleRequest{Queue: "orders", Schedule: wire.Schedule{Name: "daily-report",
				Cron: "0 9 * * 1-5", Headers: map[string]string{"kind": "report"}, Priority: 5}}),
		mustResponse("response-set-schedule", "The schedule as stored, with its first tick.", 24, wire.OpSetSchedule,
			&wire.SetScheduleResponse{Schedule: wire.ScheduleStatus{Schedule: wire.Schedule{Name: "heartbeat",
				Every: 30 * time.Second, Group: "hb", Body: []byte(`{"ping":true}`)}, Next: t0 + int64(30*time.Second), Created: t0}}),
		mustRequest("request-list-schedules", "List the schedules of partition 0.", 26, wire.OpListSchedules,
			&wire.ListSchedulesRequest{Queue: "orders"}),
		mustResponse("response-list-schedules", "One schedule that fired 120 ticks; its last message had the id heartbeat@<last tick in seconds>.",
			26, wire.OpListSchedules, &wire.ListSchedulesResponse{Schedules: []wire.ScheduleStatus{{Schedule: wire.Schedule{
				Name: "heartbeat", Every: 30 * time.Second, Group: "hb", Body: []byte(`{"ping":true}`)},
				Next: t0 + int64(3630*time.Second), Created: t0, LastTick: t0 + int64(3600*time.Second), Fired: 120}}}),
		mustRequest("request-delete-schedule", "Delete the schedule named heartbeat.", 27, wire.OpDeleteSchedule,
			&wire.DeleteScheduleRequest{Queue: "orders", Name: "heartbeat"}),
		mustResponse("response-delete-schedule", "One schedule deleted.", 27, wire.OpDeleteSchedule,
			&wire.DeleteScheduleResponse{Deleted: 1}),
	}
}
