package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// scheduleRun is how long TestCluster_ScheduleEverySecondAcrossFailovers
// lets its schedule tick: 30s, or FERRY_SCHEDULE_SOAK (a duration, e.g. 2m)
// for a longer run by hand.
func scheduleRun(t *testing.T) time.Duration {
	v := os.Getenv("FERRY_SCHEDULE_SOAK")
	if v == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Second {
		t.Fatalf("FERRY_SCHEDULE_SOAK=%q: want a duration of at least 10s", v)
	}
	return d
}

// A schedule every second runs while the leader of its partition is
// stopped twice, at a third and two thirds of the run (whichever node
// leads then; the first one is back by the second stop): every tick from the first to the last sends exactly one message,
// none twice, and the last tick is close to the end of the run.
func TestCluster_ScheduleEverySecondAcrossFailovers(t *testing.T) {
	run := scheduleRun(t)
	c := startCluster(t, options{})
	cl := c.dial("schedules")
	c.createQueue(cl, "ticks", client.VisibilityTimeout(5*time.Minute))
	created, err := cl.CreateSchedule(opContext(t), "ticks", client.Schedule{Name: "beat", Every: time.Second, Body: []byte("b")})
	if err != nil {
		t.Fatalf("CreateSchedule: %v", err)
	}
	start := time.Now()
	sleepUntil := func(d time.Duration) {
		// The run's timeline, not a wait for a condition: the schedule
		// must be seen ticking for this long.
		time.Sleep(time.Until(start.Add(d)))
	}
	sleepUntil(run / 3)
	first := c.waitLeaders("ticks", 1)[0]
	t.Logf("%v: stopping %s, leader of ticks/0", time.Since(start).Round(time.Millisecond), c.members[first].cfg.ID)
	c.stop(first)
	c.waitLeaders("ticks", 1)
	// The restarted node need not have caught up before the second stop:
	// its stale log votes for the up-to-date third node, which then
	// leads. (Waiting for it here once timed out under a loaded CI run,
	// the restarted replica still at applied index 0 after 20 s.)
	c.start(first)
	sleepUntil(2 * run / 3)
	second := c.waitLeaders("ticks", 1)[0]
	t.Logf("%v: stopping %s, leader of ticks/0", time.Since(start).Round(time.Millisecond), c.members[second].cfg.ID)
	c.stop(second)
	c.waitLeaders("ticks", 1)
	sleepUntil(run)
	c.start(second)
	var last client.ScheduleStatus
	untilNil(t, opContext(t), "the schedule's state", func() error {
		list, err := cl.ListSchedules(opContext(t), "ticks")
		if err != nil || len(list) != 1 {
			return fmt.Errorf("%d schedules, %v", len(list), err)
		}
		last = list[0]
		return nil
	})
	if ok, err := cl.DeleteSchedule(opContext(t), "ticks", "beat"); err != nil || !ok {
		t.Fatalf("DeleteSchedule: %v %v", ok, err)
	}
	got := drain(t, c, cl, "ticks", 0)
	firstTick, lastTick := created.Next/int64(time.Second), last.LastTick/int64(time.Second)
	checkOneMessagePerTick(t, got, "beat", firstTick, lastTick)
	want := lastTick - firstTick + 1
	t.Logf("run %v: %d ticks, %d messages, fired %d, refused %d, skipped %d, duplicates %d", run, want, len(got),
		last.Fired, last.Refused, last.Skipped, stats(t, cl, "ticks").Counters.Duplicates)
	if int64(len(got)) != want || last.Fired != uint64(want) || last.Skipped != 0 || last.Refused != 0 {
		t.Fatalf("%d messages for %d ticks (fired %d)", len(got), want, last.Fired)
	}
	if behind := start.Add(run).Unix() - lastTick; behind > 5 {
		t.Fatalf("the last tick fired is %ds before the end of the run", behind)
	}
}

// checkOneMessagePerTick checks that the messages received (by id) are
// exactly one per tick of schedule name from firstTick to lastTick (Unix
// seconds).
func checkOneMessagePerTick(t *testing.T, got map[string]uint64, name string, firstTick, lastTick int64) {
	t.Helper()
	ticks := map[int64]bool{}
	for id := range got {
		sec, err := strconv.ParseInt(strings.TrimPrefix(id, name+"@"), 10, 64)
		if err != nil || !strings.HasPrefix(id, name+"@") {
			t.Fatalf("unexpected message %q", id)
		}
		ticks[sec] = true
	}
	for s := firstTick; s <= lastTick; s++ {
		if !ticks[s] {
			t.Errorf("tick %d sent no message", s)
		}
		delete(ticks, s)
	}
	if len(ticks) > 0 {
		t.Errorf("%d messages outside the ticks %d..%d", len(ticks), firstTick, lastTick)
	}
}

// 10,000 messages scheduled up to a year ahead on one partition survive
// the loss of its leader and a restart of the whole cluster: the delayed
// count stays, and messages found by id keep their delivery time.
func TestCluster_ScheduledAYearAheadSurviveFailoverAndRestart(t *testing.T) {
	const n = 10_000
	c := startCluster(t, options{snapshotThreshold: 4, trailingLogs: 4})
	cl := c.dial("far")
	c.createQueue(cl, "later")
	q := cl.Queue("later")
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	for b := range n / 1000 {
		msgs := make([]client.Message, 1000)
		for i := range msgs {
			d := time.Duration(rng.Int64N(int64(client.MaxDelay-time.Hour))) + time.Hour
			msgs[i] = client.Message{ID: fmt.Sprintf("far-%d", b*1000+i), Delay: d, Body: []byte("x")}
		}
		msgs[0] = client.Message{ID: fmt.Sprintf("far-%d", b*1000), DeliverAt: start.Add(client.MaxDelay - time.Hour)}
		if _, err := q.SendBatch(opContext(t), msgs); err != nil {
			t.Fatalf("SendBatch %d: %v", b, err)
		}
	}
	check := func(when string) {
		t.Helper()
		untilNil(t, opContext(t), "the delayed count "+when, func() error {
			if st := stats(t, cl, "later"); st.Delayed != n || st.Ready != 0 {
				return fmt.Errorf("%d delayed, %d ready", st.Delayed, st.Ready)
			}
			return nil
		})
		for _, i := range []int{0, 1, 4999, 9000, n - 1} {
			found, err := cl.FindMessage(opContext(t), "later", fmt.Sprintf("far-%d", i))
			if err != nil || len(found) != 1 || found[0].State != "delayed" || found[0].VisibleAt < start.Add(time.Hour).UnixNano() {
				t.Fatalf("%s: far-%d: %+v, %v", when, i, found, err)
			}
			if i%1000 == 0 && found[0].VisibleAt < start.Add(client.MaxDelay-2*time.Hour).UnixNano() {
				t.Fatalf("%s: far-%d due at %v, want about %v", when, i, time.Unix(0, found[0].VisibleAt), start.Add(client.MaxDelay-time.Hour))
			}
		}
	}
	check("after the sends")
	leader := c.waitLeaders("later", 1)[0]
	c.stop(leader)
	c.waitLeaders("later", 1)
	check("after the leader stopped")
	c.start(leader)
	c.stopAll()
	for i := range c.members {
		c.start(i)
	}
	testwait.Until(t, waitLong, "a leader after the restart", func() bool { return len(c.waitLeaders("later", 1)) == 1 })
	check("after a restart of every node")
}

// A schedule lives in its messages' partition: its group's, or its
// name's; changing its group moves it, and the name stays unique in the
// queue.
func TestCluster_ScheduleLivesWithItsGroup(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	fc.CreateQueue("fan", client.Partitions(4))
	ctx := opContext(t)
	admin := fc.Client()
	groups := []string{"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"}
	var a, b string // two groups of different partitions
	for _, g := range groups[1:] {
		if wire.PartitionFor(g, 4) != wire.PartitionFor(groups[0], 4) {
			a, b = groups[0], g
			break
		}
	}
	s, err := admin.CreateSchedule(ctx, "fan", client.Schedule{Name: "sync", Every: time.Hour, Group: a})
	if err != nil || s.Partition != wire.PartitionFor(a, 4) {
		t.Fatalf("CreateSchedule in group %s: partition %d, %v", a, s.Partition, err)
	}
	if s, err = admin.CreateSchedule(ctx, "fan", client.Schedule{Name: "sync", Every: time.Hour, Group: b}); err != nil {
		t.Fatal(err)
	}
	list, err := admin.ListSchedules(ctx, "fan")
	if err != nil || len(list) != 1 || list[0].Partition != wire.PartitionFor(b, 4) || list[0].Group != b {
		t.Fatalf("after moving to group %s: %+v, %v", b, list, err)
	}
	if _, err := admin.CreateSchedule(ctx, "fan", client.Schedule{Name: "sync", Every: 1500 * time.Millisecond}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("an interval of 1.5s: %v, want ErrInvalidArgument", err)
	}
	if ok, err := admin.DeleteSchedule(ctx, "fan", "sync"); err != nil || !ok {
		t.Fatalf("DeleteSchedule: %v %v", ok, err)
	}
	if ok, err := admin.DeleteSchedule(ctx, "fan", "sync"); err != nil || ok {
		t.Fatalf("DeleteSchedule again: %v %v", ok, err)
	}
}
