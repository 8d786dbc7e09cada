package partition

import (
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
)

// A schedule every second fires from the leader's tick timer; when the
// leader stops, the new leader goes on from the next tick: the queue holds
// one message per tick, none twice, on every replica.
func TestPartition_ScheduleFiresAcrossLeaderChange(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	first := c.leader()
	if err := c.reps[first].SetSchedule(ctxT(t), fsm.ScheduleSpec{Name: "beat", Every: time.Second, Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := c.reps[first].SetSchedule(ctxT(t), fsm.ScheduleSpec{Name: "bad", Every: time.Millisecond}); err == nil {
		t.Fatal("an interval under a second was accepted")
	}
	fired := func(i int) uint64 {
		list, err := c.reps[i].Schedules(ctxT(t))
		if err != nil || len(list) != 1 {
			return 0
		}
		return list[0].Fired
	}
	testwait.Until(t, 15*time.Second, "three ticks", func() bool { return fired(first) >= 3 })
	c.stop(first)
	second := c.leader()
	base := fired(second)
	testwait.Until(t, 15*time.Second, "three more ticks on the new leader", func() bool { return fired(second) >= base+3 })
	c.start(first)
	c.converged()
	list, err := c.reps[second].Schedules(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	s := list[0]
	st := c.reps[second].Stats()
	if st.Counters.Duplicates != 0 || uint64(st.Ready+st.Delayed) != s.Fired || s.Skipped != 0 {
		t.Fatalf("schedule %+v, stats %+v", s, st)
	}
	for tick := s.LastTick - int64(s.Fired-1)*int64(time.Second); tick <= s.LastTick; tick += int64(time.Second) {
		found, err := c.reps[second].Find(ctxT(t), fsm.ScheduleMessageID("beat", tick))
		if err != nil || len(found) != 1 {
			t.Fatalf("tick %d: %d messages, %v", tick, len(found), err)
		}
	}
	ok, err := c.reps[second].DeleteSchedule(ctxT(t), "beat")
	if err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
}
