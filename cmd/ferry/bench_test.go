package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/internal/timerslack"
)

// benchJSON runs one bench mode with --json and decodes its result.
func benchJSON(t *testing.T, cl *cluster, args ...string) map[string]any {
	t.Helper()
	r := ferry(t, cl.addrs, append([]string{"--json", "bench"}, args...)...)
	if r.code != 0 {
		t.Fatalf("bench %v: exit %d: %s", args, r.code, r.stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("bench output %q: %v", r.stdout, err)
	}
	return out
}

// queueGone polls until the bench's queue is deleted.
func queueGone(t *testing.T, cl *cluster, name string) {
	t.Helper()
	testwait.UntilNil(t, 10*time.Second, "queue "+name+" deleted after the bench", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cl.c.QueueStats(ctx, name)
		cancel()
		if errors.Is(err, client.ErrQueueNotFound) {
			return nil
		}
		return fmt.Errorf("queue stats: %v", err)
	})
}

func TestBench_ModesCountEveryMessageAndDeleteTheirQueue(t *testing.T) {
	cl := startCluster(t)
	cl.createQueue(t, "ready") // waits for the cluster to take queue creates
	for _, tc := range []struct {
		name string
		args []string
		want float64
	}{
		{"pub sync", []string{"pub", "b1", "--sync", "-c", "2", "-n", "40"}, 40},
		{"pub pipelined", []string{"pub", "b2", "-c", "2", "-w", "8", "--batch", "3", "-n", "90"}, 90},
		{"pub async", []string{"pub", "b6", "-c", "2", "--async", "-w", "16", "-n", "100"}, 100},
		{"pub async defaults", []string{"pub", "b7", "-c", "2", "--async", "-w", "0", "-n", "100"}, 100},
		{"consume batched", []string{"consume", "b3", "-c", "2", "--batch", "10", "-n", "120"}, 120},
		{"consume handlers", []string{"consume", "b4", "-c", "2", "--handlers", "3", "--prefetch", "6", "-n", "120"}, 120},
		{"e2e", []string{"e2e", "b5", "-c", "1", "--rate", "200", "-n", "60"}, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := benchJSON(t, cl, tc.args...)
			if out["messages"] != tc.want || out["errors"] != 0.0 {
				t.Fatalf("messages %v errors %v, want %v and 0: %v", out["messages"], out["errors"], tc.want, out)
			}
			if out["msgs_per_s"].(float64) <= 0 {
				t.Fatalf("msgs_per_s %v", out["msgs_per_s"])
			}
			if tc.name != "consume handlers" {
				lat := out["latency"].(map[string]any)
				if lat["count"].(float64) < 1 || lat["p50_ms"].(float64) <= 0 || lat["max_ms"].(float64) < lat["p99_ms"].(float64) {
					t.Fatalf("latency %v", lat)
				}
			}
			if tc.name == "e2e" {
				e2e := out["end_to_end"].(map[string]any)
				if e2e["count"] != tc.want {
					t.Fatalf("end to end %v", e2e)
				}
			}
			queueGone(t, cl, tc.args[1])
		})
	}
}

func TestBench_RefusesAQueueThatExists(t *testing.T) {
	cl := startCluster(t)
	cl.createQueue(t, "mine")
	r := ferry(t, cl.addrs, "bench", "pub", "mine", "--sync", "-n", "1")
	if r.code == 0 {
		t.Fatal("bench ran on a queue it did not make")
	}
	if st := cl.stats(t, "mine"); st.Ready != 0 {
		t.Fatalf("the bench touched the queue: %+v", st)
	}
}

// TestBench_ZeroInFlightOnlyWithAsync: --inflight 0 (the Publisher's
// defaults) is refused, naming the flag, unless the run is --async; the
// flags are checked before any server is dialled.
func TestBench_ZeroInFlightOnlyWithAsync(t *testing.T) {
	r := ferry(t, []string{"127.0.0.1:1"}, "bench", "pub", "z1", "-w", "0", "-n", "1")
	if r.code == 0 || !strings.Contains(r.stderr, "--inflight 0") {
		t.Fatalf("pipelined bench with --inflight 0: exit %d, %q", r.code, r.stderr)
	}
}

func TestLatencies_PercentilesAreBoundedAndOrdered(t *testing.T) {
	l := newLatencies()
	for i := 1; i <= 1000; i++ {
		l.record(time.Duration(i) * time.Millisecond)
	}
	l.record(time.Hour) // past the range: counted as the maximum
	s := l.summary()
	if s.Count != 1001 {
		t.Fatalf("count %d", s.Count)
	}
	if s.P50 < 495*time.Millisecond || s.P50 > 505*time.Millisecond {
		t.Fatalf("p50 %v", s.P50)
	}
	if !(s.P50 <= s.P90 && s.P90 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) {
		t.Fatalf("not ordered: %v", s)
	}
	if s.Max < 4*time.Minute {
		t.Fatalf("max %v, want the range's top", s.Max)
	}
}

func TestBench_CPUProfileIsWritten(t *testing.T) {
	cl := startCluster(t)
	cl.createQueue(t, "ready")
	path := filepath.Join(t.TempDir(), "client.prof")
	benchJSON(t, cl, "pub", "prof1", "-c", "2", "-w", "8", "-n", "200", "--cpu-profile", path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no profile: %v", err)
	}
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Fatalf("the profile (%d bytes) is not a gzipped pprof profile", len(data))
	}
	queueGone(t, cl, "prof1")

	r := ferry(t, cl.addrs, "bench", "pub", "prof2", "-n", "10", "--cpu-profile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"))
	if r.code == 0 || !strings.Contains(r.stderr, "--cpu-profile") {
		t.Fatalf("an unwritable profile path: exit %d, stderr %q; want a failure naming --cpu-profile", r.code, r.stderr)
	}
	queueGone(t, cl, "prof2")
}

func TestLatencies_HeldSamplesAreBoundedAndAllCounted(t *testing.T) {
	workers := []*latencies{newLatencies(), newLatencies()}
	n := 3*latencySamplesMax + 7
	for i := range n {
		for _, w := range workers {
			w.record(time.Duration(i%1000+1) * time.Microsecond)
			if len(w.samples) >= latencySamplesMax {
				t.Fatalf("%d samples held, bound %d", len(w.samples), latencySamplesMax)
			}
		}
	}
	all := newLatencies()
	all.merge(workers...)
	if s := all.summary(); s.Count != int64(2*n) {
		t.Fatalf("count %d, want %d", s.Count, 2*n)
	}
}

// TestBench_RunsWithItsTimerSlack: the bench runs with --timer-slack
// (re-executing itself to give every thread the slack) and reports it;
// by default it keeps the slack it was started with (what an application
// has); a slack out of range is refused, naming the flag, before any
// server is dialled.
func TestBench_RunsWithItsTimerSlack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("per-thread timer slack is Linux only")
	}
	r := ferry(t, []string{"127.0.0.1:1"}, "bench", "pub", "ts0", "--timer-slack", "1h", "-n", "1")
	if r.code == 0 || !strings.Contains(r.stderr, "--timer-slack") {
		t.Fatalf("--timer-slack 1h: exit %d, stderr %q; want a refusal naming the flag", r.code, r.stderr)
	}
	cl := startCluster(t)
	cl.createQueue(t, "ready")
	out := benchJSON(t, cl, "pub", "ts1", "--sync", "-n", "5", "--timer-slack", "3ms")
	if out["timer_slack_ms"] != 3.0 || out["messages"] != 5.0 {
		t.Fatalf("--timer-slack 3ms: %v; want timer_slack_ms 3 and 5 messages", out)
	}
	queueGone(t, cl, "ts1")
	own, err := timerslack.Get() // what a process started from here inherits
	if err != nil {
		t.Fatal(err)
	}
	out = benchJSON(t, cl, "pub", "ts2", "--sync", "-n", "5") // the default: as started
	if out["timer_slack_ms"] != float64(own.Microseconds())/1000 {
		t.Fatalf("no --timer-slack: %v; want the inherited slack %v", out, own)
	}
	queueGone(t, cl, "ts2")
}
