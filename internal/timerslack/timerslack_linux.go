//go:build linux

package timerslack

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// selfExe is the running program, whichever path started it (and even
// if that file was replaced since).
const selfExe = "/proc/self/exe"

// Get returns the calling thread's timer slack. Threads differ only when
// one set its own; after Ensure, all have the same.
func Get() (time.Duration, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("timerslack: read: %w", err)
	}
	return time.Duration(v), nil
}

// Ensure gives every thread of the process the slack d. If the calling
// thread already has it (the process was started with it), it returns
// nil at once. Otherwise it sets the calling thread's slack and replaces
// the process with a fresh copy of the program (same process ID,
// arguments, environment plus a marker, and standard streams), whose
// threads all inherit it: it does not return then. It returns
// ErrBadSlack for d out of range, ErrNotApplied if this process already
// is such a copy and still lacks the slack, or the failure to
// re-execute, with the calling thread's slack restored. Call it first
// thing in main: nothing the process did before survives.
func Ensure(d time.Duration) error {
	if err := checkSlack(d); err != nil {
		return err
	}
	runtime.LockOSThread() // read, set and execve on one thread
	defer runtime.UnlockOSThread()
	cur, err := Get()
	if err != nil || cur == d {
		return err
	}
	if Reexecuted() {
		return fmt.Errorf("%w: %v, want %v", ErrNotApplied, cur, d)
	}
	if err := setSlack(d); err != nil {
		return err
	}
	env := append(os.Environ(), reexecEnv+"="+strconv.FormatInt(d.Nanoseconds(), 10))
	err = syscall.Exec(selfExe, os.Args, env)
	_ = setSlack(cur)
	return fmt.Errorf("timerslack: re-execute %s: %w", selfExe, err)
}

// setSlack sets the calling thread's slack.
func setSlack(d time.Duration) error {
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return fmt.Errorf("timerslack: set %v: %w", d, err)
	}
	return nil
}
