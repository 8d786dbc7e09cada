package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ferrymq/ferry/internal/timerslack"
)

// benchTimerSlack is the bench's default --timer-slack: the one ferryd
// runs with. The bench client is measured beside the nodes (CPU per
// message counts both), and a client process pays what a node pays for
// the Go runtime's monitor thread: while its goroutines keep a processor
// busy or in system calls the monitor polls every 20 us, and on a
// virtual machine each wake-up costs a timer interrupt and two context
// switches. Under 16 synchronous senders the client's monitor thread took
// about an eighth of the client's CPU time (14 of 110 ticks in 3 s, with
// 8,000 wake-ups). A service embedding the client gets the same by
// starting with a timer slack (systemd's TimerSlackNSec=1ms).
const benchTimerSlack = time.Millisecond

// applyBenchTimerSlack gives the bench's threads the slack d (0: leave
// them as started). Unless the process was started with it, this
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
