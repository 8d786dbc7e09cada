package fsm

import (
	"time"

	"pgregory.net/rapid"
)

// modelSchedule is the model's schedule: only fixed intervals are drawn
// by the property tests, so its next tick is plain arithmetic.
type modelSchedule struct {
	spec                    ScheduleSpec
	next, created, lastTick int64
	fired, refused, skipped uint64
}

// modelNextTick is the first multiple of every after t.
func modelNextTick(every time.Duration, t int64) int64 {
	return (t/int64(every) + 1) * int64(every)
}

func (md *model) setSchedule(spec ScheduleSpec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if messageBytes(spec.Headers, spec.Body) > md.cfg.MaxMessageBytes {
		return ErrMessageTooLarge
	}
	if md.schedules == nil {
		md.schedules = map[string]*modelSchedule{}
	}
	s := &modelSchedule{spec: spec, next: modelNextTick(spec.Every, md.clock), created: md.clock}
	if old := md.schedules[spec.Name]; old != nil {
		s.created, s.lastTick, s.fired, s.refused, s.skipped = old.created, old.lastTick, old.fired, old.refused, old.skipped
		if old.spec.Every == spec.Every {
			s.next = old.next
		}
	}
	md.schedules[spec.Name] = s
	return nil
}

func (md *model) fireSchedule(c FireScheduleCmd) ([]SendOutcome, error) {
	s := md.schedules[c.Name]
	if s == nil || s.next != c.Tick {
		return nil, nil
	}
	if c.Tick > md.clock {
		return nil, ErrInvalidArgument
	}
	if (md.clock-c.Tick)/int64(s.spec.Every) >= ScheduleCatchUpMax {
		s.skipped++
		s.next = modelNextTick(s.spec.Every, md.clock)
		return nil, nil
	}
	out := md.send(NewMessage{ID: ScheduleMessageID(c.Name, c.Tick), Group: s.spec.Group, Headers: s.spec.Headers,
		Body: s.spec.Body, Priority: s.spec.Priority})
	if out.Err != nil {
		s.refused++
	} else {
		s.fired++
	}
	s.lastTick, s.next = c.Tick, modelNextTick(s.spec.Every, c.Tick)
	return []SendOutcome{out}, nil
}

// applyModelSchedule applies the schedule commands to the model; it
// reports false for any other command.
func applyModelSchedule(md *model, c Command, r *Result) bool {
	switch c.Type {
	case CmdSetSchedule:
		r.Err = md.setSchedule(*c.Schedule)
	case CmdDeleteSchedule:
		if md.schedules[c.Unschedule.Name] != nil {
			delete(md.schedules, c.Unschedule.Name)
			r.Count = 1
		}
	case CmdFireSchedule:
		r.Sent, r.Err = md.fireSchedule(*c.Fire)
		r.Count = len(r.Sent)
	default:
		return false
	}
	return true
}

// genScheduleCommand draws a set, delete or fire of one of two schedules;
// a fire's tick is aimed later (aimFire).
func genScheduleCommand(t *rapid.T) Command {
	name := rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "schedName")
	switch rapid.IntRange(0, 5).Draw(t, "schedOp") {
	case 0:
		return Command{Type: CmdSetSchedule, Schedule: &ScheduleSpec{Name: name,
			Every:    rapid.SampledFrom([]time.Duration{time.Second, 2 * time.Second, 0}).Draw(t, "every"),
			Group:    rapid.SampledFrom([]string{"", "g1"}).Draw(t, "schedGroup"),
			Body:     []byte("tick"),
			Priority: uint8(rapid.IntRange(0, 2).Draw(t, "schedPrio"))}}
	case 1:
		return Command{Type: CmdDeleteSchedule, Unschedule: &DeleteScheduleCmd{Name: name}}
	default:
		return Command{Type: CmdFireSchedule, Fire: &FireScheduleCmd{Name: name}}
	}
}

// aimFire sets a fire's tick from the schedule's next tick as the FSM
// (or the model) holds it: mostly that tick, sometimes the one before (a
// stale or repeated proposal) or after (not yet due, or never current).
func aimFire(t *rapid.T, c *Command, next int64) {
	if c.Type != CmdFireSchedule {
		return
	}
	off := rapid.SampledFrom([]int64{0, 0, 0, -1, 1}).Draw(t, "fireOffset")
	c.Fire.Tick = next + off*int64(time.Second)
}

// fsmNext returns the FSM's next tick of a schedule (0 when none).
func fsmNext(f *FSM, name string) int64 {
	if s := f.schedules[name]; s != nil {
		return s.info.Next
	}
	return 0
}

// compareSchedules checks that the FSM and the model hold the same
// schedules.
func compareSchedules(t *rapid.T, f *FSM, md *model) {
	got := f.Schedules()
	if len(got) != len(md.schedules) {
		t.Fatalf("fsm has %d schedules, model %d", len(got), len(md.schedules))
	}
	for _, g := range got {
		w := md.schedules[g.Name]
		if w == nil || g.Next != w.next || g.Created != w.created || g.LastTick != w.lastTick ||
			g.Fired != w.fired || g.Refused != w.refused || g.Skipped != w.skipped || g.Every != w.spec.Every {
			t.Fatalf("schedule %s: fsm %+v, model %+v", g.Name, g, w)
		}
	}
}
