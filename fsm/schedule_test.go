package fsm

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func (h *harness) setSchedule(spec ScheduleSpec) error {
	h.t.Helper()
	return h.apply(Command{Type: CmdSetSchedule, Schedule: &spec}).Err
}

func (h *harness) fire(name string, tick int64) Result {
	h.t.Helper()
	return h.apply(Command{Type: CmdFireSchedule, Fire: &FireScheduleCmd{Name: name, Tick: tick}})
}

// fireDue fires every due tick as a leader would, returning how many
// messages were sent.
func (h *harness) fireDue() int {
	h.t.Helper()
	n := 0
	for {
		due := h.f.DueSchedules(h.now, 10)
		if len(due) == 0 {
			return n
		}
		for _, d := range due {
			n += h.fire(d.Name, d.Tick).Count
		}
	}
}

func TestSchedule_EveryFiresOncePerTick(t *testing.T) {
	h := newHarness(t)
	if err := h.setSchedule(ScheduleSpec{Name: "beat", Every: time.Second, Body: []byte("b"), Group: "g", Priority: 3}); err != nil {
		t.Fatal(err)
	}
	next := h.f.Schedules()[0].Next
	if want := (t0/int64(time.Second) + 1) * int64(time.Second); next != want {
		t.Fatalf("next %d, want %d", next, want)
	}
	if d, ok := h.f.NextDeadline(); !ok || d != next {
		t.Fatalf("NextDeadline %d %v, want %d", d, ok, next)
	}
	// Not due yet: refused, nothing changes.
	if r := h.fire("beat", next); !errors.Is(r.Err, ErrInvalidArgument) || r.Count != 0 {
		t.Fatalf("early fire: %+v", r)
	}
	h.advance(5 * time.Second)
	if n := h.fireDue(); n != 5 {
		t.Fatalf("fired %d, want 5", n)
	}
	// Repeating any earlier proposal sends nothing.
	for k := int64(0); k < 6; k++ {
		if r := h.fire("beat", next+k*int64(time.Second)-int64(time.Second)); r.Count != 0 || r.Err != nil {
			t.Fatalf("repeat %d: %+v", k, r)
		}
	}
	ids := []string{}
	for _, in := range h.f.Find("beat@" + itoa(next/int64(time.Second))) {
		ids = append(ids, in.ID)
		if in.Priority != 3 || in.Group != "g" {
			t.Fatalf("message %+v", in)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("found %v", ids)
	}
	if st := h.f.Stats(); st.Counters.Sent != 5 {
		t.Fatalf("sent %d", st.Counters.Sent)
	}
	s := h.f.Schedules()[0]
	if s.Fired != 5 || s.LastTick != next+4*int64(time.Second) || s.Next != next+5*int64(time.Second) {
		t.Fatalf("schedule %+v", s)
	}
}

func itoa(n int64) string { return ScheduleMessageID("", n*int64(time.Second))[1:] }

func TestSchedule_CronAndGapSkip(t *testing.T) {
	h := newHarness(t)
	if err := h.setSchedule(ScheduleSpec{Name: "m", Cron: "*/5 * * * *"}); err != nil {
		t.Fatal(err)
	}
	first := h.f.Schedules()[0].Next
	if first%int64(5*time.Minute) != 0 || first <= t0 {
		t.Fatalf("first cron tick %d", first)
	}
	h.now = first + int64(12*time.Minute) // three ticks due
	if n := h.fireDue(); n != 3 {
		t.Fatalf("caught up %d ticks, want 3", n)
	}
	// A gap of more than ScheduleCatchUpMax ticks is skipped whole.
	if err := h.setSchedule(ScheduleSpec{Name: "fast", Every: time.Second}); err != nil {
		t.Fatal(err)
	}
	h.advance(2 * ScheduleCatchUpMax * time.Second)
	before := h.f.Stats().Counters.Sent
	h.fireDue()
	var fast ScheduleInfo
	for _, s := range h.f.Schedules() {
		if s.Name == "fast" {
			fast = s
		}
	}
	if fast.Skipped != 1 || fast.Fired != 0 || fast.Next <= h.now {
		t.Fatalf("fast after a long gap: %+v", fast)
	}
	if sent := h.f.Stats().Counters.Sent - before; sent > uint64(ScheduleCatchUpMax/5*60) {
		t.Fatalf("sent %d", sent)
	}
}

func TestSchedule_ReplaceDeleteAndBounds(t *testing.T) {
	h := newHarness(t)
	spec := ScheduleSpec{Name: "a", Every: 10 * time.Second, Body: []byte("x")}
	if err := h.setSchedule(spec); err != nil {
		t.Fatal(err)
	}
	next := h.f.Schedules()[0].Next
	h.advance(3 * time.Second)
	spec.Body = []byte("y")
	if err := h.setSchedule(spec); err != nil || h.f.Schedules()[0].Next != next {
		t.Fatalf("replace with the same interval moved the tick: %v", err)
	}
	digest := h.f.Digest()
	bad := []ScheduleSpec{
		{Name: "", Every: time.Second},
		{Name: "a b", Every: time.Second},
		{Name: string(bytes.Repeat([]byte("n"), ScheduleNameBytesMax+1)), Every: time.Second},
		{Name: "b"},
		{Name: "b", Every: time.Second, Cron: "* * * * *"},
		{Name: "b", Every: 500 * time.Millisecond},
		{Name: "b", Every: 1500 * time.Millisecond},
		{Name: "b", Every: ScheduleEveryMax + time.Second},
		{Name: "b", Cron: "0 0 30 2 *"},
		{Name: "b", Every: time.Second, Priority: PriorityMax + 1},
		{Name: "b", Every: time.Second, Body: make([]byte, ScheduleTemplateBytesMax+1)},
		{Name: "b", Every: time.Second, Group: string(bytes.Repeat([]byte("g"), GroupBytesMax+1))},
	}
	for i, b := range bad {
		if err := h.setSchedule(b); err == nil {
			t.Errorf("accepted %d: %+v", i, b.Name)
		}
	}
	if h.f.Digest() != digest {
		t.Fatal("a refused schedule changed the state")
	}
	if r := h.apply(Command{Type: CmdDeleteSchedule, Unschedule: &DeleteScheduleCmd{Name: "a"}}); r.Err != nil || r.Count != 1 {
		t.Fatalf("delete: %+v", r)
	}
	if r := h.apply(Command{Type: CmdDeleteSchedule, Unschedule: &DeleteScheduleCmd{Name: "a"}}); r.Err != nil || r.Count != 0 {
		t.Fatalf("delete again: %+v", r)
	}
	if _, ok := h.f.NextDeadline(); ok {
		t.Fatal("a deadline left after the delete")
	}
	if r := h.fire("a", next); r.Count != 0 || r.Err != nil {
		t.Fatalf("fire of a deleted schedule: %+v", r)
	}
}

func TestSchedule_CountAndByteCaps(t *testing.T) {
	h := newHarness(t)
	for i := range SchedulesMax {
		if err := h.setSchedule(ScheduleSpec{Name: "s" + itoa(int64(i)), Every: time.Hour}); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := h.setSchedule(ScheduleSpec{Name: "one-more", Every: time.Hour}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("schedule %d: %v", SchedulesMax+1, err)
	}
	if err := h.setSchedule(ScheduleSpec{Name: "s0", Every: 2 * time.Hour}); err != nil {
		t.Fatalf("replace at the cap: %v", err)
	}
	h2 := newHarness(t)
	body := make([]byte, ScheduleTemplateBytesMax-2)
	n := 0
	var err error
	for ; err == nil; n++ {
		err = h2.setSchedule(ScheduleSpec{Name: "b" + itoa(int64(n)), Every: time.Hour, Body: body})
	}
	if !errors.Is(err, ErrInvalidArgument) || h2.f.scheduleBytes > SchedulesBytesMax || n-1 != SchedulesBytesMax/ScheduleTemplateBytesMax {
		t.Fatalf("after %d templates: %v (%d bytes)", n-1, err, h2.f.scheduleBytes)
	}
}

func TestSchedule_SnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	_ = h.setSchedule(ScheduleSpec{Name: "a", Every: time.Second, Headers: map[string]string{"k": "v"}, Body: []byte("x")})
	_ = h.setSchedule(ScheduleSpec{Name: "c", Cron: "0 9 * * 1-5", Group: "g", Priority: 2})
	h.advance(3 * time.Second)
	h.fireDue()
	snap := h.f.Snapshot()
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	g, _ := New(h.f.Config(), NewMemBodyStore())
	if err := g.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if g.Digest() != h.f.Digest() {
		t.Fatal("digest differs after restore")
	}
	if got, want := g.Schedules(), h.f.Schedules(); len(got) != 2 || got[0].Next != want[0].Next || got[1].Cron != want[1].Cron ||
		got[0].Headers["k"] != "v" || got[0].Fired != want[0].Fired {
		t.Fatalf("restored %+v, want %+v", got, want)
	}
	// The restored replica fires the next tick once, like the original.
	h.advance(time.Second)
	g.ApplyCommand(Command{Type: CmdFireSchedule, At: h.now, Fire: &FireScheduleCmd{Name: "a", Tick: g.Schedules()[0].Next}})
	h.fireDue()
	if g.Digest() != h.f.Digest() {
		t.Fatal("replicas diverge after a fire")
	}
}

// TestSchedule_PropertyOneMessagePerTickAcrossLeaders runs one schedule
// through a series of leaders: each leader is a replica (restored from a
// snapshot of its predecessor, or replaying the same log), proposes the
// due ticks it sees, and may re-propose any fire it or an earlier leader
// proposed (a retry after an ambiguous failure). Whatever the order, the
// queue ends with exactly one message per tick between the first and the
// last fired one, in tick order.
func TestSchedule_PropertyOneMessagePerTickAcrossLeaders(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultQueueConfig()
		cfg.DedupWindow = 0 // the schedule alone must prevent doubles
		f, _ := New(cfg, NewMemBodyStore())
		now := t0
		every := time.Duration(rapid.IntRange(1, 3).Draw(rt, "every")) * time.Second
		var log []Command // every command applied, in order
		apply := func(c Command) Result {
			log = append(log, c)
			return f.ApplyCommand(c)
		}
		apply(Command{Type: CmdSetSchedule, At: now, Schedule: &ScheduleSpec{Name: "s", Every: every}})
		var proposed []FireScheduleCmd
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now += int64(rapid.SampledFrom([]time.Duration{0, 300 * time.Millisecond, time.Second, 4 * time.Second}).Draw(rt, "dt"))
			switch rapid.IntRange(0, 4).Draw(rt, "what") {
			case 0: // a new leader: a replica restored from a snapshot, or one that replays the log
				f = newLeaderReplica(rt, f, cfg, log, rapid.Bool().Draw(rt, "fromSnapshot"))
			case 1: // a stale or repeated proposal
				if len(proposed) > 0 {
					c := proposed[rapid.IntRange(0, len(proposed)-1).Draw(rt, "old")]
					if r := apply(Command{Type: CmdFireSchedule, At: now, Fire: &c}); r.Count != 0 {
						rt.Fatalf("a repeated fire of %d sent a message", c.Tick)
					}
				}
			default: // the leader fires what is due
				for _, d := range f.DueSchedules(now, 100) {
					c := FireScheduleCmd(d)
					proposed = append(proposed, c)
					apply(Command{Type: CmdFireSchedule, At: now, Fire: &c})
				}
			}
		}
		var ids []string
		f.table.ascend(func(m *message) bool { ids = append(ids, m.id()); return true })
		s := f.Schedules()[0]
		if uint64(len(ids)) != s.Fired {
			rt.Fatalf("%d messages, %d fired", len(ids), s.Fired)
		}
		var want []string
		if s.Fired > 0 {
			for tick := s.LastTick - int64(s.Fired-1)*int64(every); tick <= s.LastTick; tick += int64(every) {
				want = append(want, ScheduleMessageID("s", tick))
			}
		}
		if !slices.Equal(ids, want) {
			rt.Fatalf("messages %v, want one per tick %v", ids, want)
		}
	})
}

// newLeaderReplica returns a replica of f, restored from its snapshot or
// replaying its log, checked to hold the same state.
func newLeaderReplica(rt *rapid.T, f *FSM, cfg QueueConfig, log []Command, fromSnapshot bool) *FSM {
	g, _ := New(cfg, NewMemBodyStore())
	if fromSnapshot {
		snap := f.Snapshot()
		var buf bytes.Buffer
		if err := snap.Persist(&buf); err != nil {
			rt.Fatal(err)
		}
		snap.Release()
		if err := g.Restore(&buf); err != nil {
			rt.Fatal(err)
		}
	} else {
		for _, c := range log {
			g.ApplyCommand(c)
		}
	}
	if g.Digest() != f.Digest() {
		rt.Fatal("new leader's state differs")
	}
	return g
}

func FuzzCronParse(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/5 1-3 1,15 * 1-5", "0 0 29 2 *", "61 * * * *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		c, err := parseCron(expr)
		if err != nil {
			return
		}
		at := t0
		for range 3 {
			next, ok := c.next(at)
			if !ok || next <= at {
				t.Fatalf("%q: next after %d is %d, %v", expr, at, next, ok)
			}
			at = next
		}
	})
}
