package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ferrymq/ferry/internal/timerslack"
)

// benchTimerSlack is the bench's default --timer-slack: none, so that the
// client's CPU in the bench's figures is what an application's would be
// (a library must not re-execute its host program, so the client cannot
// set it itself). --timer-slack 1ms shows what an application started
// with ferryd's slack (systemd's TimerSlackNSec=1ms) saves: the Go
// runtime's monitor thread polls every 20 us while the client's
// goroutines keep a processor busy or in system calls, and on a virtual
// machine each wake-up costs a timer interrupt and two context switches.
// Under 16 synchronous senders the monitor took about an eighth of the
// bench client's CPU time (14 of 110 ticks in 3 s, 8,000 wake-ups); with
// the slack the client's context switches per message fell by a third.
const benchTimerSlack time.Duration = 0

// applyBenchTimerSlack gives the bench's threads the slack d (0: leave
// them as started, the default). Unless the process was started with it, this
// re-executes the bench with the same arguments, before it opens any
// connection; the run then happens in that copy. A slack out of range is
// a usage error; any other failure is reported and the bench runs on
// without it (the figures then include the monitor's polling).
func applyBenchTimerSlack(d time.Duration) error {
	if d == 0 {
		return nil
	}
	err := timerslack.Ensure(d)
	switch {
	case err == nil, errors.Is(err, timerslack.ErrUnsupported):
		return nil
	case errors.Is(err, timerslack.ErrBadSlack):
		return fmt.Errorf("--timer-slack: %w", err)
	}
	fmt.Fprintf(os.Stderr, "ferry: bench: --timer-slack not applied: %v\n", err)
	return nil
}
