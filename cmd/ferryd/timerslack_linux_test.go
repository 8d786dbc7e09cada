//go:build linux

package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/freeport"
	"github.com/ferrymq/ferry/internal/syncbuf"
	"github.com/ferrymq/ferry/internal/testwait"
)

// ferrydProcess is a one-node ferryd started from the test binary.
type ferrydProcess struct {
	cmd  *exec.Cmd
	logs syncbuf.Buffer
}

// output returns what the process wrote so far.
func (p *ferrydProcess) output() string { return p.logs.String() }

// startFerryd starts a one-node insecure ferryd with extra flags and waits
// until it is ready; it is stopped when the test ends.
func startFerryd(t *testing.T, extra ...string) *ferrydProcess {
	t.Helper()
	addrs := map[string]string{}
	for _, flag := range []string{"raft-addr", "client-addr", "http-addr", "gossip-addr"} {
		a, err := freeport.Loopback("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		addrs[flag] = a
	}
	args := []string{"-id", "n1", "-insecure", "-data-dir", filepath.Join(t.TempDir(), "data"), "-bootstrap-expect", "1", "-fast-gossip"}
	for flag, a := range addrs {
		args = append(args, "-"+flag, a)
	}
	p := &ferrydProcess{cmd: exec.Command(os.Args[0], append(args, extra...)...)}
	p.cmd.Env = append(os.Environ(), asFerrydEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-exited
		}
	})
	hc := &http.Client{Timeout: 2 * time.Second}
	testwait.UntilNil(t, 60*time.Second, "ferryd ready", func() error {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("ferryd exited: %v\n%s", err, p.output())
		default:
		}
		resp, err := hc.Get("http://" + addrs["http-addr"] + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
	return p
}

// threadSlacks returns the timer slack of every thread of process pid, in
// nanoseconds; ok is false when another process's slack cannot be read
// (it takes CAP_SYS_NICE).
func threadSlacks(t *testing.T, pid int) (slacks []int64, ok bool) {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", task.Name(), "timerslack_ns"))
		if err != nil {
			return nil, false
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		slacks = append(slacks, v)
	}
	return slacks, true
}

func TestFerryd_EveryThreadRunsWithTheTimerSlack(t *testing.T) {
	p := startFerryd(t, "-timer-slack", "300us")
	if out := p.output(); !strings.Contains(out, "timer slack set") || !strings.Contains(out, "reexecuted=true") {
		t.Fatalf("no log of the slack set by re-executing:\n%s", out)
	}
	slacks, ok := threadSlacks(t, p.cmd.Process.Pid)
	if !ok && os.Geteuid() == 0 {
		t.Fatal("as root, a thread's slack could not be read")
	}
	for _, s := range slacks {
		if s != 300_000 {
			t.Fatalf("a thread of ferryd has slack %d ns, want 300000 (all: %v)", s, slacks)
		}
	}
	if ok && len(slacks) < 3 {
		t.Fatalf("only %d threads read", len(slacks))
	}

	// -timer-slack 0 leaves the slack the process was started with.
	self, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	p = startFerryd(t, "-timer-slack", "0")
	if strings.Contains(p.output(), "timer slack set") {
		t.Fatalf("-timer-slack 0 set a slack:\n%s", p.output())
	}
	slacks, _ = threadSlacks(t, p.cmd.Process.Pid)
	for _, s := range slacks {
		if strconv.FormatInt(s, 10) != strings.TrimSpace(string(self)) {
			t.Fatalf("with -timer-slack 0 a thread has slack %d ns, the test's is %s", s, self)
		}
	}
}
