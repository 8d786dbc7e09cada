// Package testwait waits, in tests, for a condition to come to hold.
//
// Until and UntilNil poll the condition, pausing between polls for a
// millisecond at first and twice as long after every miss up to
// pauseMax, and fail the test once the deadline passes, saying what they
// waited for and how long (and, for UntilNil, the condition's last
// error). The deadline is the timeout given or, if it comes first, a
// moment before the test's own deadline (go test -timeout), so that a
// wait fails with its own message rather than the test binary panicking.
// No pause runs past the deadline, and the condition is polled once more
// at the deadline before the test fails.
//
// A test waits with this package, not with a sleep long enough "most of
// the time": the condition says what the test needs, and the deadline
// only bounds how long a broken build takes to fail.
package testwait

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

const (
	// pauseMin is the pause after the first poll that misses; it doubles
	// with every miss up to pauseMax.
	pauseMin = time.Millisecond
	pauseMax = 20 * time.Millisecond
	// testDeadlineMargin is how long before the test's own deadline a wait
	// gives up.
	testDeadlineMargin = time.Second
)

// Until polls cond until it returns true, and fails the test (t.Fatalf)
// naming what and the time waited once timeout passes, or once the
// test's own deadline is near if that comes first.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	systemClock.until(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilNil polls cond until it returns nil, and fails the test
// (t.Fatalf) naming what, the time waited and cond's last error once
// timeout passes, or once the test's own deadline is near if that comes
// first. The error says what cond saw, for the failure message.
func UntilNil(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	systemClock.until(t, timeout, what, cond)
}

// errNotYet is the error Until's condition stands for when it is false.
var errNotYet = errors.New("condition not met")

// clock is what a wait reads the time from and pauses with.
type clock struct {
	now   func() time.Time
	sleep func(time.Duration)
}

// systemClock is the real time.
var systemClock = clock{now: time.Now, sleep: time.Sleep}

// until is Until and UntilNil on clock c.
func (c clock) until(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	start := c.now()
	deadline, byTest := deadlineFor(t, start, timeout)
	err := c.poll(deadline, cond)
	if err == nil {
		return
	}
	waited := c.now().Sub(start).Round(time.Millisecond)
	limit := ""
	if byTest {
		limit = " (the test's own deadline is near)"
	}
	if errors.Is(err, errNotYet) {
		t.Fatalf("timed out after %v%s waiting for %s", waited, limit, what)
	}
	t.Fatalf("timed out after %v%s waiting for %s; last error: %v", waited, limit, what, err)
}

// poll calls cond until it returns nil (poll returns nil) or the
// deadline has passed (poll returns cond's last error). It pauses
// between calls, never past the deadline, and calls cond once more at
// the deadline.
func (c clock) poll(deadline time.Time, cond func() error) error {
	pause := pauseMin
	for {
		err := cond()
		if err == nil {
			return nil
		}
		left := deadline.Sub(c.now())
		if left <= 0 {
			return err
		}
		c.sleep(min(pause, left))
		pause = min(2*pause, pauseMax)
	}
}

// deadlineFor returns when a wait of timeout that starts at start must
// end, and whether the test's own deadline (less testDeadlineMargin) is
// what set it.
func deadlineFor(t testing.TB, start time.Time, timeout time.Duration) (deadline time.Time, byTest bool) {
	deadline = start.Add(timeout)
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return deadline, false
	}
	if testEnd, ok := d.Deadline(); ok && testEnd.Add(-testDeadlineMargin).Before(deadline) {
		return testEnd.Add(-testDeadlineMargin), true
	}
	return deadline, false
}

// A *testing.T has a deadline for deadlineFor to find.
var _ interface{ Deadline() (time.Time, bool) } = (*testing.T)(nil)

// Goroutines returns the stack of every goroutine, one string each (as
// runtime.Stack prints them: a "goroutine N [state]:" header, the frames,
// and a "created by" line), for conditions about which goroutines run
// or where they wait.
func Goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
