package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChaos_Bounded runs every fault kind once against three nodes, then
// the faults whose shape depends on the cluster's size (the partitions,
// the meta leader's kill, a leader's pause) against five; a few minutes in
// all. FERRY_CHAOS_NODES runs every kind against that many nodes instead;
// FERRY_CHAOS_FAULTS=kind,kind runs only those kinds.
// It runs with go test ./... and in CI; -short skips it.
func TestChaos_Bounded(t *testing.T) {
	skipUnlessSupported(t)
	if testing.Short() {
		t.Skip("chaos suite skipped in -short mode")
	}
	seed := envSeed(t)
	if os.Getenv("FERRY_CHAOS_NODES") != "" || os.Getenv("FERRY_CHAOS_FAULTS") != "" {
		runBounded(t, seed, envInt(t, "FERRY_CHAOS_NODES", 3), envFaults(t))
		return
	}
	t.Run("3-nodes", func(t *testing.T) { runBounded(t, seed, 3, AllFaults) })
	t.Run("5-nodes", func(t *testing.T) {
		runBounded(t, seed, 5, []FaultKind{Bridge, Split, Isolate, KillMeta, PauseLeader, DrainNode, RollingRestart,
			KillMetaMidMove, KillLeaderMidMove, ReplaceNode})
	})
}

// runBounded runs the bounded schedule's faults of the given kinds.
func runBounded(t *testing.T, seed int64, nodes int, kinds []FaultKind) {
	var sched []FaultSpec
	for _, s := range BoundedSchedule(seed) {
		if slices.Contains(kinds, s.Kind) {
			sched = append(sched, s)
		}
	}
	next := func() (FaultSpec, bool) {
		if len(sched) == 0 {
			return FaultSpec{}, false
		}
		s := sched[0]
		sched = sched[1:]
		return s, true
	}
	runChaos(t, Options{Seed: seed, Nodes: nodes, Next: next, Producers: 4, Consumers: 3, Pace: 50 * time.Millisecond})
}

// TestChaos_Long runs random faults for FERRY_CHAOS_DURATION (default 10m)
// against FERRY_CHAOS_NODES nodes (default 5). It runs only with
// FERRY_CHAOS=1: make chaos.
func TestChaos_Long(t *testing.T) {
	skipUnlessSupported(t)
	if os.Getenv("FERRY_CHAOS") != "1" {
		t.Skip("long chaos suite: set FERRY_CHAOS=1 (make chaos)")
	}
	seed := envSeed(t)
	d, err := time.ParseDuration(envOr("FERRY_CHAOS_DURATION", "10m"))
	if err != nil {
		t.Fatalf("FERRY_CHAOS_DURATION: %v", err)
	}
	gen := LongSchedule(seed)
	runChaos(t, Options{Seed: seed, Nodes: envInt(t, "FERRY_CHAOS_NODES", 5), FaultPhase: d,
		Next: func() (FaultSpec, bool) { return gen(), true }, Producers: 4, Consumers: 3, Pace: 40 * time.Millisecond})
}

func skipUnlessSupported(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the chaos suite needs Linux (per-node loopback addresses, SIGSTOP, iptables)")
	}
}

// runChaos runs the suite and fails the test on any violation or node
// crash. The data and logs are kept when it fails (or with
// FERRY_CHAOS_KEEP=1); the JSON report goes to FERRY_CHAOS_REPORT, by
// default ferry-chaos-<seed>-<nodes>n.json in the temporary directory.
func runChaos(t *testing.T, o Options) *Report {
	root, err := os.MkdirTemp("", fmt.Sprintf("ferry-chaos-%d-%dn-", o.Seed, o.Nodes))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	o.Root = root
	o.TLS = os.Getenv("FERRY_CHAOS_TLS") != "0"
	switch {
	case os.Getenv("FERRY_CHAOS_TMPFS") == "0":
		o.Tmpfs = ""
	case o.Tmpfs == "":
		// Room for a node's steady footprint under the workload with the
		// default segment sizes (the shared raft log's active segment
		// alone may hold 64 MiB, each partition's body records another
		// segment, plus the live bodies of backlog and dead letters) above
		// the 64 MiB free-space reserve. A smaller disk keeps the nodes at
		// their reserve, refusing sends, for much of a long run.
		o.Tmpfs = "512m"
	}
	o.Logf = func(format string, args ...any) {
		t.Logf("[%6.1fs] %s", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
	o.Logf("seed %d (FERRY_CHAOS_SEED=%d replays this schedule), %d nodes, TLS %v (FERRY_CHAOS_TLS=0 turns it off); data and logs in %s",
		o.Seed, o.Seed, o.Nodes, o.TLS, root)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("chaos run could not be carried out: %v\ndata and logs kept in %s", err, root)
		return nil
	}
	var sb strings.Builder
	rep.Summary(&sb)
	t.Log("\n" + sb.String())
	path := envOr("FERRY_CHAOS_REPORT", filepath.Join(os.TempDir(), fmt.Sprintf("ferry-chaos-%d-%dn.json", o.Seed, o.Nodes)))
	if err := rep.WriteJSON(path); err != nil {
		t.Errorf("write report: %v", err)
	} else {
		t.Logf("JSON report: %s", path)
	}
	crashed := false
	for _, n := range rep.Notes {
		crashed = crashed || strings.HasPrefix(n, "NODE CRASH")
	}
	if rep.Failed() || crashed {
		t.Errorf("chaos run FAILED (seed %d): violations %v, node crashes %v; data, logs and history.json kept in %s",
			o.Seed, rep.ViolationCounts, crashed, root)
		return rep
	}
	if os.Getenv("FERRY_CHAOS_KEEP") == "1" {
		t.Logf("data and logs kept in %s", root)
		return rep
	}
	os.RemoveAll(root)
	return rep
}

// envFaults returns the kinds FERRY_CHAOS_FAULTS names (comma-separated),
// or every kind.
func envFaults(t *testing.T) []FaultKind {
	v := os.Getenv("FERRY_CHAOS_FAULTS")
	if v == "" {
		return AllFaults
	}
	var out []FaultKind
	for _, name := range strings.Split(v, ",") {
		k := FaultKind(strings.TrimSpace(name))
		if !slices.Contains(AllFaults, k) {
			t.Fatalf("FERRY_CHAOS_FAULTS: unknown fault kind %q (known: %v)", k, AllFaults)
		}
		out = append(out, k)
	}
	return out
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 3 || n > 5 {
		t.Fatalf("%s=%q: want 3, 4 or 5", name, v)
	}
	return n
}

// envSeed returns FERRY_CHAOS_SEED, or a fresh seed.
func envSeed(t *testing.T) int64 {
	v := os.Getenv("FERRY_CHAOS_SEED")
	if v == "" {
		return time.Now().UnixNano() % 1_000_000_000
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("FERRY_CHAOS_SEED=%q: %v", v, err)
	}
	return s
}

// TestChaos_Recheck runs the checker again on the history.json of a kept
// run: FERRY_CHAOS_HISTORY=/tmp/ferry-chaos-.../history.json.
func TestChaos_Recheck(t *testing.T) {
	path := os.Getenv("FERRY_CHAOS_HISTORY")
	if path == "" {
		t.Skip("set FERRY_CHAOS_HISTORY to a kept run's history.json")
	}
	h, final, err := readHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	rep := Check(h, final)
	var sb strings.Builder
	rep.Summary(&sb)
	t.Log("\n" + sb.String())
	if rep.Failed() {
		t.Error("violations found")
	}
}

// TestChaos_Soak runs the workload for FERRY_SOAK_DURATION (default 1h)
// against FERRY_CHAOS_NODES nodes (default 3) with a slow rotation of
// every fault kind (one every 20-50 s), sampling every node's RSS,
// goroutines and open files every 10 s. It fails on any violation or node
// crash, or when a node process that lived through the steady part (after
// the first quarter, at most 10 minutes) grew beyond DefaultGrowthBound.
// It runs only with FERRY_SOAK=1: make soak.
func TestChaos_Soak(t *testing.T) {
	skipUnlessSupported(t)
	if os.Getenv("FERRY_SOAK") != "1" {
		t.Skip("soak: set FERRY_SOAK=1 (make soak)")
	}
	seed := envSeed(t)
	d, err := time.ParseDuration(envOr("FERRY_SOAK_DURATION", "1h"))
	if err != nil || d < time.Minute {
		t.Fatalf("FERRY_SOAK_DURATION=%q: want a duration of at least 1m", os.Getenv("FERRY_SOAK_DURATION"))
	}
	gen := LongSchedule(seed)
	gaps := rand.New(rand.NewPCG(uint64(seed), 0x50a4))
	next := func() (FaultSpec, bool) {
		s := gen()
		s.Gap = 20*time.Second + time.Duration(gaps.Int64N(int64(30*time.Second)))
		return s, true
	}
	// The workload keeps every dead letter (the checker accounts for each
	// one), about 45,000 an hour with some of the largest size: an hour
	// filled 512 MiB data directories within 20 minutes, after which a
	// lagging replica could not store the snapshot that would let it catch
	// up. Each node gets 64 MiB of disk per minute of soak, at least 2 GiB
	// of tmpfs (memory only as far as it is written).
	tmpfs := fmt.Sprintf("%dm", max(2048, 64*int(d/time.Minute)))
	rep := runChaos(t, Options{Seed: seed, Nodes: envInt(t, "FERRY_CHAOS_NODES", 3), FaultPhase: d, Next: next,
		Producers: 4, Consumers: 3, Pace: 40 * time.Millisecond, SampleEvery: 10 * time.Second, Tmpfs: tmpfs})
	if rep == nil {
		return
	}
	steady := rep.Started.Add(min(d/4, 10*time.Minute))
	for _, g := range ResourceGrowth(rep.Resources, steady, DefaultGrowthBound) {
		t.Errorf("resource growth: %s", g)
	}
	for _, l := range IdleLeaks(rep.IdleBefore, rep.IdleAfter, IdleGoroutineBound) {
		t.Errorf("goroutine leak: %s", l)
	}
}
