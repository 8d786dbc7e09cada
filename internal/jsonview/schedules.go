package jsonview

import (
	"unicode/utf8"

	"github.com/ferrymq/ferry/wire"
)

// Schedule is one recurring schedule as `ferry schedule ls --json` and
// GET /v1/queues/{name}/schedules show it: every is a duration string
// ("30s") or cron a five-field expression in UTC; the message each tick
// sends (group, priority, headers, body or body_base64 when the body is
// not UTF-8); the next tick, the creation time and the last tick handled
// (RFC 3339, UTC); how many ticks sent their message (fired), how many the
// queue refused, and how many long gaps were skipped whole.
type Schedule struct {
	Name       string            `json:"name"`
	Partition  int               `json:"partition"`
	Every      string            `json:"every,omitempty"`
	Cron       string            `json:"cron,omitempty"`
	Group      string            `json:"group"`
	Priority   int               `json:"priority"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body,omitempty"`
	BodyBase64 []byte            `json:"body_base64,omitempty"`
	Next       string            `json:"next"`
	Created    string            `json:"created"`
	LastTick   string            `json:"last_tick,omitempty"`
	Fired      uint64            `json:"fired"`
	Refused    uint64            `json:"refused"`
	Skipped    uint64            `json:"skipped"`
}

// ScheduleOf renders a schedule.
func ScheduleOf(s wire.ScheduleStatus) Schedule {
	out := Schedule{Name: s.Name, Partition: s.Partition, Cron: s.Cron, Group: s.Group, Priority: int(s.Priority),
		Headers: map[string]string{}, Next: UnixTime(s.Next), Created: UnixTime(s.Created),
		Fired: s.Fired, Refused: s.Refused, Skipped: s.Skipped}
	if s.Every != 0 {
		out.Every = s.Every.String()
	}
	for k, v := range s.Headers {
		out.Headers[k] = v
	}
	if utf8.Valid(s.Body) {
		out.Body = string(s.Body)
	} else {
		out.BodyBase64 = append([]byte{}, s.Body...)
	}
	if s.LastTick != 0 {
		out.LastTick = UnixTime(s.LastTick)
	}
	return out
}

// SchedulesOf renders a list of schedules (an empty list, never null).
func SchedulesOf(list []wire.ScheduleStatus) []Schedule {
	out := make([]Schedule, 0, len(list))
	for _, s := range list {
		out = append(out, ScheduleOf(s))
	}
	return out
}
