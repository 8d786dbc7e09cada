package testwait

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recordingTB is a test whose failure is recorded instead of reported,
// with a deadline of its own (none if zero). Fatalf ends the calling
// goroutine, as testing.T's does: run the wait with runWait.
type recordingTB struct {
	testing.TB
	deadline time.Time
	failure  string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recordingTB) Deadline() (time.Time, bool) {
	return r.deadline, !r.deadline.IsZero()
}

// runWait runs wait in a goroutine of its own and returns once it has
// returned or failed.
func runWait(wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait()
	}()
	<-done
}

// fakeClock is a clock whose time moves only when a wait sleeps; it
// records the pauses, and panics on one that is not positive (a wait
// spinning on the spot).
type fakeClock struct {
	at     time.Time
	pauses []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{at: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (f *fakeClock) clock() clock {
	return clock{
		now: func() time.Time { return f.at },
		sleep: func(d time.Duration) {
			if d <= 0 {
				panic(fmt.Sprintf("a pause of %v", d))
			}
			f.pauses = append(f.pauses, d)
			f.at = f.at.Add(d)
		},
	}
}

func TestUntil_ReturnsOnceTheConditionHolds(t *testing.T) {
	const holdsAt = 5
	polls := 0
	Until(t, 10*time.Second, "the fifth poll", func() bool {
		polls++
		return polls == holdsAt
	})
	if polls != holdsAt {
		t.Fatalf("%d polls, want %d: Until must return at the first poll that holds", polls, holdsAt)
	}
}

func TestUntilNil_ReturnsOnceTheConditionIsNil(t *testing.T) {
	polls := 0
	UntilNil(t, 10*time.Second, "the third poll", func() error {
		polls++
		if polls < 3 {
			return fmt.Errorf("poll %d", polls)
		}
		return nil
	})
	if polls != 3 {
		t.Fatalf("%d polls, want 3", polls)
	}
}

// The pauses double from pauseMin to pauseMax, the last one ends at the
// deadline, not past it, and the condition is polled there once more.
func TestPoll_PausesGrowToTheCapAndEndAtTheDeadline(t *testing.T) {
	fc := newFakeClock()
	deadline := fc.at.Add(100 * time.Millisecond)
	var polledAt []time.Time
	err := fc.clock().poll(deadline, func() error {
		polledAt = append(polledAt, fc.at)
		return fmt.Errorf("poll %d", len(polledAt))
	})
	ms := time.Millisecond
	want := []time.Duration{1 * ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 20 * ms, 20 * ms, 20 * ms, 9 * ms}
	if fmt.Sprint(fc.pauses) != fmt.Sprint(want) {
		t.Fatalf("pauses %v, want %v", fc.pauses, want)
	}
	if last := polledAt[len(polledAt)-1]; !last.Equal(deadline) {
		t.Fatalf("last poll %v after the start, want at the deadline (%v)", last.Sub(deadline.Add(-100*ms)), 100*ms)
	}
	if err == nil || err.Error() != fmt.Sprintf("poll %d", len(polledAt)) {
		t.Fatalf("poll returned %v, want the last poll's error (poll %d)", err, len(polledAt))
	}
}

func TestUntilNil_TimeoutReportsWhatTheTimeAndTheLastError(t *testing.T) {
	fc := newFakeClock()
	rec := &recordingTB{TB: t}
	polls := 0
	runWait(func() {
		fc.clock().until(rec, 50*time.Millisecond, "the widget to turn blue", func() error {
			polls++
			return fmt.Errorf("widget is red (poll %d)", polls)
		})
	})
	want := fmt.Sprintf("timed out after 50ms waiting for the widget to turn blue; last error: widget is red (poll %d)", polls)
	if rec.failure != want {
		t.Fatalf("failure %q, want %q", rec.failure, want)
	}
}

func TestUntil_TimeoutReportsWhatAndTheTime(t *testing.T) {
	fc := newFakeClock()
	rec := &recordingTB{TB: t}
	runWait(func() {
		fc.clock().until(rec, 30*time.Millisecond, "the widget", func() error { return errNotYet })
	})
	if want := "timed out after 30ms waiting for the widget"; rec.failure != want {
		t.Fatalf("failure %q, want %q", rec.failure, want)
	}
}

// A wait longer than what is left of the test ends a margin before the
// test's deadline, and says so.
func TestUntil_HonoursTheTestsShorterDeadline(t *testing.T) {
	fc := newFakeClock()
	rec := &recordingTB{TB: t, deadline: fc.at.Add(testDeadlineMargin + 70*time.Millisecond)}
	runWait(func() {
		fc.clock().until(rec, time.Hour, "the widget", func() error { return errNotYet })
	})
	if want := "timed out after 70ms (the test's own deadline is near) waiting for the widget"; rec.failure != want {
		t.Fatalf("failure %q, want %q", rec.failure, want)
	}
	// A test deadline later than the timeout changes nothing.
	rec = &recordingTB{TB: t, deadline: fc.at.Add(time.Hour)}
	runWait(func() {
		fc.clock().until(rec, 40*time.Millisecond, "the widget", func() error { return errNotYet })
	})
	if want := "timed out after 40ms waiting for the widget"; rec.failure != want {
		t.Fatalf("failure %q, want %q", rec.failure, want)
	}
}

// On the real clock, a condition that never holds fails the test at
// the timeout, neither much before nor much after.
func TestUntil_FailsAtTheTimeoutOnTheRealClock(t *testing.T) {
	const timeout = 60 * time.Millisecond
	rec := &recordingTB{TB: t}
	start := time.Now()
	runWait(func() { Until(rec, timeout, "nothing", func() bool { return false }) })
	took := time.Since(start)
	if !strings.HasPrefix(rec.failure, "timed out after ") || !strings.HasSuffix(rec.failure, " waiting for nothing") {
		t.Fatalf("failure %q", rec.failure)
	}
	if took < timeout || took > timeout+2*time.Second {
		t.Fatalf("failed after %v, want about %v", took, timeout)
	}
}

// TestGoroutines_OneStackPerGoroutine: a goroutine parked in a select
// appears once, with its state in the header and its function below.
func TestGoroutines_OneStackPerGoroutine(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	started := make(chan struct{})
	go parkForGoroutinesTest(started, stop)
	<-started
	found := 0
	Until(t, 5*time.Second, "the parked goroutine in the dump", func() bool {
		found = 0
		for _, g := range Goroutines() {
			header, _, _ := strings.Cut(g, "\n")
			if strings.HasPrefix(header, "goroutine ") && strings.Contains(g, "testwait.parkForGoroutinesTest(") &&
				strings.Contains(header, "[chan receive") {
				found++
			}
		}
		return found == 1
	})
}

func parkForGoroutinesTest(started, stop chan struct{}) {
	close(started)
	<-stop
}
