package jsonview

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wire"
)

func TestScheduleOf(t *testing.T) {
	s := ScheduleOf(wire.ScheduleStatus{Schedule: wire.Schedule{Name: "beat", Every: 90 * time.Second, Body: []byte{0xff, 0x00}},
		Partition: 2, Next: 1_767_225_600_000_000_000, Created: 1_767_225_000_000_000_000, Fired: 3})
	if s.Every != "1m30s" || s.Body != "" || len(s.BodyBase64) != 2 || s.LastTick != "" || s.Headers == nil ||
		!strings.HasPrefix(s.Next, "2026-01-01T00:00:00") {
		t.Fatalf("%+v", s)
	}
	b, err := json.Marshal(SchedulesOf(nil))
	if err != nil || string(b) != "[]" {
		t.Fatalf("an empty list renders as %s, %v", b, err)
	}
	c := ScheduleOf(wire.ScheduleStatus{Schedule: wire.Schedule{Name: "r", Cron: "0 9 * * 1-5", Body: []byte("hi")}, LastTick: 1})
	if c.Every != "" || c.Cron != "0 9 * * 1-5" || c.Body != "hi" || c.LastTick == "" {
		t.Fatalf("%+v", c)
	}
}
