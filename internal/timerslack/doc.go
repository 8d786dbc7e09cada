// Package timerslack gives every thread of this process one timer slack:
// how late the kernel may wake a thread from a timed sleep so that it can
// serve several timers with one wake-up (Linux's PR_SET_TIMERSLACK; 50 us
// unless the parent process set another).
//
// Why a node wants more than the default: the Go runtime's system monitor
// is a thread that polls every 20 us while any processor is busy or in a
// system call, and a node that fsyncs its log every few hundred
// microseconds is never idle long enough for it to back off. On a
// virtual machine each of those wake-ups costs a timer interrupt and two
// context switches; measured on a 2-core VM under load, the monitor thread
// took a fifth of a follower's CPU time. With a slack of 1 ms it wakes
// many times less often, and CPU per message fell by a fifth to a third
// (cmd/ferryd's defaultTimerSlack gives the figures).
//
// A thread inherits its slack from the thread that created it, and the
// runtime starts its monitor before any of the program's code runs, so
// the only way for a program to give the monitor a slack is to be started
// with it: Ensure sets the calling thread's slack and replaces the process
// with a fresh copy of itself (execve keeps the slack; the process ID,
// arguments, environment and open standard streams stay). A launcher that
// already sets it (systemd's TimerSlackNSec=) saves that step.
//
// What it costs: a thread's timed sleeps may end up to the slack late.
// The runtime already rounds its own short waits up to a millisecond when
// it sleeps in the network poller, so a slack of that order changes
// little for the program's timers.
//
// It owns only that setting: it must never be used by a library (it
// replaces the running process), only by a command's main before it
// opens or starts anything.
package timerslack
