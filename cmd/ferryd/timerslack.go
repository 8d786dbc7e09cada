package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/ferrymq/ferry/internal/timerslack"
)

// defaultTimerSlack is how late the kernel may wake ferryd's threads from
// a timed sleep (-timer-slack; Linux only). The Go runtime's monitor
// thread polls every 20 us while a processor is busy or in a system
// call, as a node's fsyncs keep one, and each wake-up on a virtual
// machine costs a timer interrupt and two context switches: on a 2-core
// VM the monitor took a fifth of a follower's CPU. With the monitor
// allowed 200 us, CPU per message (three nodes and the client,
// scripts/cpu-per-message.sh) fell from 189-211 to 130-161 us with 16
// synchronous senders and from 34-37 to 24-29 us pipelined, and the
// throughput rose with it; 1 ms saved little more. The runtime already
// rounds its own short waits up to a millisecond when it sleeps in the
// network poller, so timers lose little.
const defaultTimerSlack = 200 * time.Microsecond

// applyTimerSlack gives every thread of this process the slack d (0:
// leave the slack ferryd was started with). Unless ferryd was started
// with it (systemd's TimerSlackNSec=), that re-executes ferryd, which
// then does not return here with the old process. A slack out of range
// is a usage error; any other failure is returned for the caller to log:
// the node runs on without the setting.
func applyTimerSlack(d time.Duration) error {
	if d == 0 {
		return nil
	}
	err := timerslack.Ensure(d)
	if errors.Is(err, timerslack.ErrBadSlack) {
		return &usageError{fmt.Errorf("-timer-slack: %w", err)}
	}
	return err
}
