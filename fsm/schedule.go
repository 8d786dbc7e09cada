package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Bounds of recurring schedules. They are part of the replicated contract.
const (
	// ScheduleNameBytesMax is the longest schedule name.
	ScheduleNameBytesMax = 128
	// SchedulesMax is the most schedules one partition holds (a queue holds
	// at most SchedulesMax times its partition count).
	SchedulesMax = 1000
	// ScheduleTemplateBytesMax bounds one schedule's message (body plus
	// headers, counted as MaxMessageBytes counts them); the queue's
	// MaxMessageBytes applies too.
	ScheduleTemplateBytesMax = 64 << 10
	// SchedulesBytesMax bounds the templates of all of a partition's
	// schedules together, which the partition keeps in memory.
	SchedulesBytesMax = 8 << 20
	// ScheduleEveryMin is the shortest fixed interval.
	ScheduleEveryMin = time.Second
	// ScheduleEveryMax is the longest fixed interval.
	ScheduleEveryMax = 366 * 24 * time.Hour
	// ScheduleCatchUpMax is the most ticks a schedule catches up after a
	// gap (no leader, a stopped cluster): each missed tick within it fires,
	// in order; a longer gap is skipped whole (see FireScheduleCmd).
	ScheduleCatchUpMax = 1000
	// cronPeriodMin is the shortest time between two ticks of a cron
	// expression.
	cronPeriodMin = int64(time.Minute)
)

// ScheduleSpec is what a client gives to create or replace a schedule
// (CmdSetSchedule): its name, when it ticks, and the message each tick
// sends.
type ScheduleSpec struct {
	// Name is unique within the queue (the partition holding a schedule is
	// chosen by hashing it, like a group's): 1..ScheduleNameBytesMax bytes
	// of letters, digits, '.', '_' and '-'. Each tick's message has the id
	// "<name>@<tick in Unix seconds>".
	Name string `msgpack:"name"`
	// Every is a fixed interval, a whole number of seconds in
	// ScheduleEveryMin..ScheduleEveryMax; ticks fall on the multiples of
	// it since the Unix epoch (every 1m: at each minute's start).
	Every time.Duration `msgpack:"every,omitempty"`
	// Cron is a five-field cron expression in UTC (see ParseCron). Exactly
	// one of Every and Cron is set.
	Cron string `msgpack:"cron,omitempty"`
	// Group, Headers, Body and Priority make each tick's message.
	Group    string            `msgpack:"group,omitempty"`
	Headers  map[string]string `msgpack:"headers,omitempty"`
	Body     []byte            `msgpack:"body,omitempty"`
	Priority uint8             `msgpack:"priority,omitempty"`
}

// DeleteScheduleCmd deletes a schedule by name (CmdDeleteSchedule). Deleting
// a schedule that does not exist changes nothing and is no error (the
// result's Count says 0).
type DeleteScheduleCmd struct {
	Name string `msgpack:"name"`
}

// FireScheduleCmd fires one tick of a schedule (CmdFireSchedule): the
// partition's leader proposes it once Tick is due. It takes effect only
// when Tick is the schedule's next tick, so a proposal retried or repeated
// after a leader change is a no-op (Count 0), and never before Tick is due
// (then it is refused). The tick's message is sent with the id
// "<name>@<Tick in Unix seconds>", which the dedup window also catches.
// Then the schedule's next tick is the first after Tick. When more than
// ScheduleCatchUpMax ticks are due at once (the partition had no leader for
// that long), the command skips them all instead: nothing is sent, the
// schedule resumes at the first tick after the clock, and its Skipped count
// goes up by one. A tick whose message the queue refuses (full, too large
// under a changed config) counts in Refused and is not retried.
type FireScheduleCmd struct {
	Name string `msgpack:"name"`
	Tick int64  `msgpack:"tick"` // Unix nanoseconds
}

// ScheduleInfo is a schedule as the partition holds it: its spec, its next
// tick and its counts. It is also a schedule's snapshot record.
type ScheduleInfo struct {
	ScheduleSpec `msgpack:",inline"`
	// Next is the schedule's next tick, Unix nanoseconds.
	Next int64 `msgpack:"next"`
	// Created is when the schedule was first created (the partition clock).
	Created int64 `msgpack:"created"`
	// LastTick is the last tick fired or refused (0: none yet).
	LastTick int64 `msgpack:"last_tick,omitempty"`
	// Fired counts ticks that sent their message; Refused those whose
	// message the queue refused; Skipped the gaps skipped whole.
	Fired   uint64 `msgpack:"fired,omitempty"`
	Refused uint64 `msgpack:"refused,omitempty"`
	Skipped uint64 `msgpack:"skipped,omitempty"`
}

// ScheduleTick names one due tick of a schedule (FSM.DueSchedules).
type ScheduleTick struct {
	Name string
	Tick int64
}

// schedule is a partition's schedule: its info and its parsed cron
// expression (nil for a fixed interval).
type schedule struct {
	info  ScheduleInfo
	cron  *cronSpec
	bytes int // the template's size, as counted against SchedulesBytesMax
}

// ScheduleMessageID returns the id of the message a schedule's tick sends.
func ScheduleMessageID(name string, tick int64) string {
	return name + "@" + strconv.FormatInt(tick/int64(time.Second), 10)
}

// ValidateScheduleName checks a schedule name (see ScheduleSpec.Name).
func ValidateScheduleName(name string) error {
	if name == "" || len(name) > ScheduleNameBytesMax {
		return fmt.Errorf("%w: schedule name must be 1..%d bytes", ErrInvalidArgument, ScheduleNameBytesMax)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: schedule name %q: only letters, digits, '.', '_' and '-'", ErrInvalidArgument, name)
		}
	}
	return nil
}

// Validate checks a spec against the bounds that do not depend on a
// partition's state (its queue's MaxMessageBytes, the count and byte caps
// are checked when it applies).
func (s *ScheduleSpec) Validate() error {
	_, _, err := s.check()
	return err
}

// check validates s and returns its parsed cron expression and template
// size.
func (s *ScheduleSpec) check() (*cronSpec, int, error) {
	if err := ValidateScheduleName(s.Name); err != nil {
		return nil, 0, err
	}
	var c *cronSpec
	switch {
	case (s.Every != 0) == (s.Cron != ""):
		return nil, 0, fmt.Errorf("%w: schedule %s needs exactly one of an interval and a cron expression", ErrInvalidArgument, s.Name)
	case s.Cron != "":
		var err error
		if c, err = parseCron(s.Cron); err != nil {
			return nil, 0, err
		}
	case s.Every < ScheduleEveryMin || s.Every > ScheduleEveryMax || s.Every%time.Second != 0:
		return nil, 0, fmt.Errorf("%w: schedule interval %v (want whole seconds in %v..%v)", ErrInvalidArgument,
			s.Every, ScheduleEveryMin, ScheduleEveryMax)
	}
	nm := NewMessage{ID: ScheduleMessageID(s.Name, 0), Group: s.Group, Headers: s.Headers, Body: s.Body, Priority: s.Priority}
	probe := FSM{cfg: QueueConfig{MaxMessageBytes: ScheduleTemplateBytesMax}}
	if err := probe.validateNew(&nm); err != nil {
		return nil, 0, fmt.Errorf("schedule %s message: %w", s.Name, err)
	}
	return c, messageBytes(s.Headers, s.Body), nil
}

// after returns the schedule's first tick strictly after t (Unix
// nanoseconds).
func (s *schedule) after(t int64) int64 {
	if s.cron == nil {
		e := int64(s.info.Every)
		return (t/e + 1) * e
	}
	next, ok := s.cron.next(t)
	if !ok {
		// parseCron refused expressions without a tick in the span.
		panic("fsm: cron expression " + s.info.Cron + " has no next tick")
	}
	return next
}

// tooFarBehind reports whether more than ScheduleCatchUpMax ticks, tick
// included, are due at the clock.
func (s *schedule) tooFarBehind(tick, clock int64) bool {
	if s.cron == nil {
		return (clock-tick)/int64(s.info.Every) >= ScheduleCatchUpMax
	}
	if clock-tick < (ScheduleCatchUpMax-1)*cronPeriodMin {
		return false // too short a span to hold that many ticks
	}
	t := tick
	for range ScheduleCatchUpMax {
		if t = s.after(t); t > clock {
			return false
		}
	}
	return true
}

// applySetSchedule creates or replaces a schedule (CmdSetSchedule). A
// replacement that keeps the interval or cron expression keeps the next
// tick; one that changes it starts at the first new tick after the clock.
// Counts and creation time stay with the name.
func (f *FSM) applySetSchedule(spec *ScheduleSpec) error {
	c, size, err := spec.check()
	if err != nil {
		return err
	}
	if size > f.cfg.MaxMessageBytes {
		return fmt.Errorf("%w: schedule %s message of %d bytes (limit %d)", ErrMessageTooLarge, spec.Name, size, f.cfg.MaxMessageBytes)
	}
	old := f.schedules[spec.Name]
	count, total := len(f.schedules), f.scheduleBytes+size
	if old != nil {
		count--
		total -= old.bytes
	}
	if count >= SchedulesMax {
		return fmt.Errorf("%w: %d schedules in the partition (at most %d)", ErrInvalidArgument, count, SchedulesMax)
	}
	if total > SchedulesBytesMax {
		return fmt.Errorf("%w: schedules of %d bytes in the partition (at most %d)", ErrInvalidArgument, total, SchedulesBytesMax)
	}
	s := &schedule{cron: c, bytes: size}
	s.info.ScheduleSpec = *spec
	s.info.Headers = maps.Clone(spec.Headers)
	s.info.Body = slices.Clone(spec.Body)
	s.info.Created = f.clock
	s.info.Next = s.after(f.clock)
	if old != nil {
		f.dropSchedule(old)
		s.info.Created, s.info.LastTick = old.info.Created, old.info.LastTick
		s.info.Fired, s.info.Refused, s.info.Skipped = old.info.Fired, old.info.Refused, old.info.Skipped
		if old.info.Every == spec.Every && old.info.Cron == spec.Cron {
			s.info.Next = old.info.Next
		}
	}
	f.addSchedule(s)
	return nil
}

// addSchedule indexes s.
func (f *FSM) addSchedule(s *schedule) {
	f.schedules[s.info.Name] = s
	f.scheduleTimes.ReplaceOrInsert(s)
	f.scheduleBytes += s.bytes
}

// dropSchedule removes s from the indexes.
func (f *FSM) dropSchedule(s *schedule) {
	delete(f.schedules, s.info.Name)
	f.scheduleTimes.Delete(s)
	f.scheduleBytes -= s.bytes
}

// applyDeleteSchedule deletes a schedule (CmdDeleteSchedule); it returns 1
// if one was deleted, 0 if none had the name.
func (f *FSM) applyDeleteSchedule(c *DeleteScheduleCmd) (int, error) {
	if err := ValidateScheduleName(c.Name); err != nil {
		return 0, err
	}
	s := f.schedules[c.Name]
	if s == nil {
		return 0, nil
	}
	f.dropSchedule(s)
	return 1, nil
}

// applyFireSchedule fires one tick (CmdFireSchedule; see FireScheduleCmd).
// It returns the send's outcome when a message was offered to the queue.
func (f *FSM) applyFireSchedule(c *FireScheduleCmd) ([]SendOutcome, error) {
	if err := ValidateScheduleName(c.Name); err != nil {
		return nil, err
	}
	s := f.schedules[c.Name]
	if s == nil || s.info.Next != c.Tick {
		return nil, nil // deleted, or this tick was handled already
	}
	if c.Tick > f.clock {
		return nil, fmt.Errorf("%w: schedule %s tick %d is not due (clock %d)", ErrInvalidArgument, c.Name, c.Tick, f.clock)
	}
	f.scheduleTimes.Delete(s)
	defer f.scheduleTimes.ReplaceOrInsert(s)
	if s.tooFarBehind(c.Tick, f.clock) {
		s.info.Skipped++
		s.info.Next = s.after(f.clock)
		return nil, nil
	}
	nm := NewMessage{ID: ScheduleMessageID(c.Name, c.Tick), Group: s.info.Group, Headers: s.info.Headers,
		Body: s.info.Body, Priority: s.info.Priority}
	out := f.sendOne(&nm, 0)
	if out.Err != nil {
		s.info.Refused++
	} else {
		s.info.Fired++
	}
	s.info.LastTick = c.Tick
	s.info.Next = s.after(c.Tick)
	return []SendOutcome{out}, nil
}

// DueSchedules returns up to max ticks due at now (Unix nanoseconds),
// earliest first: what a leader proposes as CmdFireSchedule commands.
func (f *FSM) DueSchedules(now int64, max int) []ScheduleTick {
	var out []ScheduleTick
	f.scheduleTimes.Ascend(func(s *schedule) bool {
		if s.info.Next > now || len(out) >= max {
			return false
		}
		out = append(out, ScheduleTick{Name: s.info.Name, Tick: s.info.Next})
		return true
	})
	return out
}

// Schedules returns the partition's schedules ordered by name (copies).
func (f *FSM) Schedules() []ScheduleInfo {
	out := make([]ScheduleInfo, 0, len(f.schedules))
	for _, name := range slices.Sorted(maps.Keys(f.schedules)) {
		in := f.schedules[name].info
		in.Headers, in.Body = maps.Clone(in.Headers), slices.Clone(in.Body)
		out = append(out, in)
	}
	return out
}

// nextScheduleTick returns the earliest next tick of any schedule.
func (f *FSM) nextScheduleTick() (int64, bool) {
	s, ok := f.scheduleTimes.Min()
	if !ok {
		return 0, false
	}
	return s.info.Next, true
}

// restoreSchedules rebuilds the schedules of a snapshot.
func (f *FSM) restoreSchedules(list []ScheduleInfo) error {
	if len(list) > SchedulesMax {
		return fmt.Errorf("%d schedules (at most %d)", len(list), SchedulesMax)
	}
	for i := range list {
		in := list[i]
		c, size, err := in.check()
		if err != nil {
			return fmt.Errorf("schedule %d: %w", i, err)
		}
		if f.schedules[in.Name] != nil {
			return fmt.Errorf("schedule %s twice", in.Name)
		}
		if f.scheduleBytes+size > SchedulesBytesMax {
			return fmt.Errorf("schedules of more than %d bytes", SchedulesBytesMax)
		}
		if in.Next <= 0 || in.Created < 0 || in.LastTick < 0 {
			return fmt.Errorf("schedule %s: times next %d, created %d, last %d", in.Name, in.Next, in.Created, in.LastTick)
		}
		f.addSchedule(&schedule{info: in, cron: c, bytes: size})
	}
	return nil
}

// digestSchedules adds the schedules to a digest, in name order.
func (f *FSM) digestSchedules(d *digester) {
	list := f.Schedules()
	d.Ints(-2, int64(len(list)))
	for i := range list {
		s := &list[i]
		d.Str(s.Name)
		d.Str(s.Cron)
		d.Str(s.Group)
		d.Ints(int64(s.Every), int64(s.Priority), s.Next, s.Created, s.LastTick,
			int64(s.Fired), int64(s.Refused), int64(s.Skipped), int64(len(s.Headers)))
		for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
			d.Str(k)
			d.Str(s.Headers[k])
		}
		d.Str(string(s.Body))
	}
}
