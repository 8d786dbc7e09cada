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
// VM the monitor took a fifth of a follower's CPU. Measured with
// scripts/cpu-per-message.sh (three nodes and the client, us per
// message), the build before the setting against 200 us, four pairs: 16
// synchronous senders 206, 194, 182, 191 against 178, 163, 162, 183,
// pipelined 29, 30, 27, 27 against 24, 24, 27, 32. Then 200 us against
// 1 ms, three pairs: one synchronous sender 1,235, 1,231, 1,322 against
// 954, 1,111, 1,178 (p50 0.83, 0.82, 0.92 against 0.71, 0.80, 0.85 ms),
// 4 senders 322, 334, 376 against 258, 312, 284, 16 senders 131, 158,
// 165 against 128, 134, 134, pipelined alike (24-31). Timers lose
// little: the runtime already rounds its own short waits up to a
// millisecond when it sleeps in the network poller, and the batcher's
// gathering (250 us waits) measured better, not worse.
const defaultTimerSlack = time.Millisecond

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
