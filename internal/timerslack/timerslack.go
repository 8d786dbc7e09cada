package timerslack

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Errors returned by Ensure and Get.
var (
	// ErrBadSlack is returned for a slack outside [SlackMin, SlackMax].
	ErrBadSlack = errors.New("timerslack: slack out of range")
	// ErrNotApplied is returned when the process was already replaced
	// once to apply a slack and the calling thread still does not have
	// it (the kernel may ignore it, as for real-time threads).
	ErrNotApplied = errors.New("timerslack: slack not applied after re-executing")
	// ErrUnsupported is returned on systems without per-thread timer
	// slack (anything but Linux).
	ErrUnsupported = errors.New("timerslack: not supported on this system")
)

// Limits on the slack Ensure accepts.
const (
	// SlackMin is the smallest slack: the kernel takes 0 to mean "back
	// to the default", which Ensure does not offer.
	SlackMin = time.Nanosecond
	// SlackMax is the largest slack: beyond it, timed sleeps of the
	// runtime (its monitor's, the network poller's) would be late by a
	// noticeable share of the shortest raft timeouts.
	SlackMax = 10 * time.Millisecond
)

// reexecEnv marks a process that Ensure started (its value is the slack
// in nanoseconds), so that a slack the kernel does not keep cannot make
// it replace the process forever.
const reexecEnv = "FERRY_TIMERSLACK_REEXEC_NS"

// Reexecuted reports whether this process is the copy Ensure started.
func Reexecuted() bool {
	_, ok := os.LookupEnv(reexecEnv)
	return ok
}

// checkSlack returns ErrBadSlack for a slack out of range.
func checkSlack(d time.Duration) error {
	if d < SlackMin || d > SlackMax {
		return fmt.Errorf("%w: %v, want %v to %v", ErrBadSlack, d, SlackMin, SlackMax)
	}
	return nil
}
