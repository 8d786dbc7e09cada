//go:build linux

package timerslack

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// helperEnv makes the test binary a helper process (see TestMain): its
// value is the slack, in nanoseconds, the helper asks Ensure for.
const helperEnv = "TIMERSLACK_TEST_HELPER_NS"

// lockedThreads is how many goroutines the helper locks to threads of
// their own, so that threads started after Ensure are checked too.
const lockedThreads = 4

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(runHelper(v))
	}
	os.Exit(m.Run())
}

// runHelper calls Ensure and prints, once it returns, one line per thread
// of the process: "thread <tid> <slack ns> <source>", then "done".
func runHelper(slackNs string) int {
	ns, err := strconv.ParseInt(slackNs, 10, 64)
	if err != nil {
		fmt.Println("bad helper slack:", err)
		return 3
	}
	fmt.Printf("start pid=%d reexecuted=%v\n", os.Getpid(), Reexecuted())
	if err := Ensure(time.Duration(ns)); err != nil {
		fmt.Println("ensure:", err)
		return 4
	}
	fmt.Printf("ensured pid=%d reexecuted=%v\n", os.Getpid(), Reexecuted())
	for _, line := range threadSlacks() {
		fmt.Println(line)
	}
	fmt.Println("done")
	return 0
}

// threadSlacks reports the slack of new locked threads (each reads its
// own) and of every thread in /proc/self/task (another thread's slack is
// readable only with CAP_SYS_NICE: "unreadable" without).
func threadSlacks() []string {
	var mu sync.Mutex
	var lines []string
	var started, release sync.WaitGroup
	release.Add(1)
	for range lockedThreads {
		started.Add(1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			d, err := Get()
			mu.Lock()
			lines = append(lines, fmt.Sprintf("locked %d %v", d.Nanoseconds(), err))
			mu.Unlock()
			started.Done()
			release.Wait()
		}()
	}
	started.Wait()
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", task.Name(), "timerslack_ns"))
		v := strings.TrimSpace(string(b))
		if err != nil {
			v = "unreadable"
		}
		lines = append(lines, fmt.Sprintf("thread %s %s", task.Name(), v))
	}
	release.Done()
	return lines
}

// helperReport is what a helper printed.
type helperReport struct {
	startPids, ensuredPids []string
	reexecuted             bool
	locked, threads        []string // slack values, ns
	unreadable             int
}

// runHelperProcess runs the test binary as a helper asking for slack d
// and parses its report; start, if set, starts the command.
func runHelperProcess(t *testing.T, d time.Duration, start func(*exec.Cmd) error) helperReport {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+strconv.FormatInt(d.Nanoseconds(), 10))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if start == nil {
		start = (*exec.Cmd).Start
	}
	if err := start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	var r helperReport
	for line := range strings.SplitSeq(out.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "start":
			r.startPids = append(r.startPids, f[1])
		case len(f) == 3 && f[0] == "ensured":
			r.ensuredPids = append(r.ensuredPids, f[1])
			r.reexecuted = f[2] == "reexecuted=true"
		case len(f) == 3 && f[0] == "locked" && f[2] == "<nil>":
			r.locked = append(r.locked, f[1])
		case len(f) == 3 && f[0] == "thread" && f[2] == "unreadable":
			r.unreadable++
		case len(f) == 3 && f[0] == "thread":
			r.threads = append(r.threads, f[2])
		}
	}
	if !strings.Contains(out.String(), "\ndone\n") || len(r.ensuredPids) != 1 {
		t.Fatalf("helper report incomplete:\n%s", out.String())
	}
	return r
}

// checkEveryThread fails unless every thread the helper saw has slack d:
// all its new locked threads, and every thread of the process when their
// slack could be read (as root, always).
func checkEveryThread(t *testing.T, r helperReport, d time.Duration) {
	t.Helper()
	want := strconv.FormatInt(d.Nanoseconds(), 10)
	if len(r.locked) != lockedThreads {
		t.Fatalf("%d of %d locked threads read their slack", len(r.locked), lockedThreads)
	}
	for _, v := range append(r.locked, r.threads...) {
		if v != want {
			t.Fatalf("a thread has slack %s ns, want %s (locked %v, all %v)", v, want, r.locked, r.threads)
		}
	}
	if os.Geteuid() == 0 && (r.unreadable > 0 || len(r.threads) < lockedThreads+2) {
		t.Fatalf("as root, %d threads' slack unreadable, %d read", r.unreadable, len(r.threads))
	}
}

func TestEnsure_ReexecutesOnceAndEveryThreadHasTheSlack(t *testing.T) {
	const d = 300 * time.Microsecond
	r := runHelperProcess(t, d, nil)
	if len(r.startPids) != 2 || r.startPids[0] != r.startPids[1] || r.ensuredPids[0] != r.startPids[0] {
		t.Fatalf("want one re-execution keeping the process ID: started %v, ensured %v", r.startPids, r.ensuredPids)
	}
	if !r.reexecuted {
		t.Fatal("the copy does not know it was re-executed")
	}
	// The runtime's monitor thread, started before any of the program's
	// code, is among the threads checked: the second task of the process.
	checkEveryThread(t, r, d)
}

func TestEnsure_StartedWithTheSlackRunsOn(t *testing.T) {
	const d = 400 * time.Microsecond
	// A child inherits the slack of the thread that forks it: set it on
	// this test's thread for the start only, as a launcher would.
	r := runHelperProcess(t, d, func(cmd *exec.Cmd) error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		old, err := Get()
		if err != nil {
			return err
		}
		if err := setSlack(d); err != nil {
			return err
		}
		defer func() { _ = setSlack(old) }()
		return cmd.Start()
	})
	if len(r.startPids) != 1 || r.reexecuted {
		t.Fatalf("a process started with the slack re-executed: started %v", r.startPids)
	}
	checkEveryThread(t, r, d)
}

func TestEnsure_AlreadySetReturnsAtOnce(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	if err := Ensure(cur); err != nil { // would re-execute the test binary if it did not see it set
		t.Fatalf("Ensure(%v) with the slack set: %v", cur, err)
	}
}

func TestEnsure_CopyWithoutTheSlackGivesUp(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(reexecEnv, "1")
	if err := Ensure(cur + time.Microsecond); !errors.Is(err, ErrNotApplied) {
		t.Fatalf("a re-executed copy lacking the slack: %v, want ErrNotApplied", err)
	}
	if after, _ := Get(); after != cur {
		t.Fatalf("slack changed to %v, was %v", after, cur)
	}
}

func TestEnsure_BadSlackChangesNothing(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, -time.Microsecond, SlackMax + 1} {
		if err := Ensure(d); !errors.Is(err, ErrBadSlack) {
			t.Fatalf("Ensure(%v): %v, want ErrBadSlack", d, err)
		}
	}
	if after, _ := Get(); after != cur {
		t.Fatalf("slack changed to %v, was %v", after, cur)
	}
}
