package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// FaultKind names a kind of fault.
type FaultKind string

// Fault kinds.
const (
	KillRandom    FaultKind = "kill-random"           // kill -9 a random node, restart it later
	KillLeader    FaultKind = "kill-partition-leader" // kill -9 the leader of a chosen partition
	KillMeta      FaultKind = "kill-meta-leader"      // kill -9 the meta group's leader
	PauseLeader   FaultKind = "pause-leader"          // SIGSTOP a partition leader past the election timeout
	PauseFollower FaultKind = "pause-follower"        // SIGSTOP a follower of a partition
	Isolate       FaultKind = "partition-isolate"     // cut one node off from the others
	Split         FaultKind = "partition-split"       // cut a minority off from the majority
	Bridge        FaultKind = "partition-bridge"      // two halves that see one bridge node but not each other
	CrashAll      FaultKind = "crash-all"             // kill -9 every node, then restart them all
	WipeNode      FaultKind = "wipe-node"             // kill -9 a node, delete its data, restart it empty
	ClockAhead    FaultKind = "clock-ahead"           // a node's clock runs an hour ahead
	ClockBehind   FaultKind = "clock-behind"          // a node's clock runs an hour behind
	ClockJump     FaultKind = "clock-jump-leader"     // a partition leader's clock jumps (seconds to hours, either way)
	SlowLink      FaultKind = "slow-link"             // a leader-follower link is slow and lossy both ways
	SlowOneWay    FaultKind = "slow-link-one-way"     // a leader-follower link is slow and lossy one way
	DiskFull      FaultKind = "disk-full"             // a node's data directory (a small tmpfs) fills up
	FsyncError    FaultKind = "fsync-error"           // a node's next raft log fsyncs fail with EIO
	WriteError    FaultKind = "write-error"           // a node's next raft log writes fail with EIO, whole or short
	PauseQueue    FaultKind = "pause-queue"           // an operator pauses a queue's deliveries, then resumes them
)

// AllFaults lists every kind, in a fixed order.
var AllFaults = []FaultKind{KillRandom, KillLeader, KillMeta, PauseLeader, PauseFollower, Isolate, Split, Bridge, CrashAll, WipeNode,
	ClockAhead, ClockBehind, ClockJump, SlowLink, SlowOneWay, DiskFull, FsyncError, WriteError, DrainNode, RollingRestart,
	KillMetaMidMove, KillLeaderMidMove, ReplaceNode, AddNodes, PauseQueue}

func (k FaultKind) needsFirewall() bool {
	return k == Isolate || k == Split || k == Bridge || k == SlowLink || k == SlowOneWay
}

// FaultSpec is one scheduled fault. Everything random about it is drawn
// from the seed when the schedule is made; Pick chooses among the
// candidates (nodes, partitions) found when it runs.
type FaultSpec struct {
	Kind FaultKind     `json:"kind"`
	Gap  time.Duration `json:"gap"`  // quiet time before the fault
	Hold time.Duration `json:"hold"` // how long the fault lasts
	Pick uint64        `json:"pick"`
}

// holdFor draws how long a fault of kind k lasts. Pauses and partitions
// outlast the election timeout (1 s) several times over.
func holdFor(rng *rand.Rand, k FaultKind) time.Duration {
	switch k {
	case CrashAll:
		return time.Second + time.Duration(rng.Int64N(int64(time.Second)))
	case WipeNode, RollingRestart, ReplaceNode:
		return 500 * time.Millisecond
	case DrainNode, AddNodes:
		return 2 * time.Second // after the node is drained (the nodes are balanced), before it is undrained (they leave)
	case PauseLeader, PauseFollower:
		return 3*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
	case ClockAhead, ClockBehind, ClockJump, SlowLink, SlowOneWay, DiskFull, FsyncError, WriteError:
		// Long enough for the nodes to measure the offset and hand over
		// leadership, or for the slow link to back up.
		return 6*time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
	}
	return 2*time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
}

func specFor(rng *rand.Rand, k FaultKind, gapMin, gapSpread time.Duration) FaultSpec {
	return FaultSpec{Kind: k, Gap: gapMin + time.Duration(rng.Int64N(int64(gapSpread))), Hold: holdFor(rng, k), Pick: rng.Uint64()}
}

// BoundedSchedule returns every fault kind once, in an order drawn from
// seed.
func BoundedSchedule(seed int64) []FaultSpec {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xfa0175))
	kinds := append([]FaultKind(nil), AllFaults...)
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	out := make([]FaultSpec, len(kinds))
	for i, k := range kinds {
		out[i] = specFor(rng, k, time.Second, 2*time.Second)
	}
	return out
}

// LongSchedule returns an endless stream of faults drawn from seed: first
// every kind once (as BoundedSchedule), then kinds drawn at random, each
// equally likely except the heavy ones (crash-all, wipe, rolling restart)
// at a third of the weight.
func LongSchedule(seed int64) func() FaultSpec {
	first := BoundedSchedule(seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x10e9))
	var weighted []FaultKind
	for _, k := range AllFaults {
		n := 3
		if k == CrashAll || k == WipeNode || k == RollingRestart || k == ReplaceNode || k == AddNodes {
			n = 1
		}
		for range n {
			weighted = append(weighted, k)
		}
	}
	return func() FaultSpec {
		if len(first) > 0 {
			s := first[0]
			first = first[1:]
			return s
		}
		return specFor(rng, weighted[rng.IntN(len(weighted))], 2*time.Second, 6*time.Second)
	}
}

// FaultRecord is one injected fault on the run's timeline.
type FaultRecord struct {
	Kind      FaultKind `json:"kind"`
	Targets   []string  `json:"targets,omitempty"`
	Detail    string    `json:"detail,omitempty"`
	Start     time.Time `json:"start"`
	Healed    time.Time `json:"healed"`
	Recovered time.Time `json:"recovered,omitempty"`
	Skipped   string    `json:"skipped,omitempty"`
	// ClockOffset is the offset a clock fault gave its target.
	ClockOffset time.Duration `json:"clock_offset,omitempty"`
	Problem     string        `json:"problem,omitempty"`
	// LongestSendStall is the longest wait for a confirmation of the
	// messages whose sending started between Start and recovery.
	LongestSendStall time.Duration `json:"longest_send_stall,omitempty"`
	// MajoritySamples counts the samples a mid-move fault's sampler took
	// of every partition's caught-up voters; MajorityDips lists (the
	// first few) partitions it saw below a majority of their target set.
	MajoritySamples int      `json:"majority_samples,omitempty"`
	MajorityDips    []string `json:"majority_dips,omitempty"`
	// PauseLeases lists the partitions of a paused queue whose lease
	// count moved while paused (pause-queue).
	PauseLeases []string `json:"pause_leases,omitempty"`
	// pausedAt is each partition's lease count once the pause held.
	pausedAt map[int]uint64
}

// Line formats the record for the summary, with times relative to t0.
func (f FaultRecord) Line(t0 time.Time) string {
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("+%.1fs", t.Sub(t0).Seconds())
	}
	if f.Skipped != "" {
		return fmt.Sprintf("%-6s %-22s SKIPPED: %s", rel(f.Start), f.Kind, f.Skipped)
	}
	took := "-"
	if !f.Recovered.IsZero() && !f.Healed.IsZero() {
		took = fmt.Sprintf("%.1fs", f.Recovered.Sub(f.Healed).Seconds())
	}
	s := fmt.Sprintf("%-6s %-22s %-12s healed %-6s recovered %-6s (%-5s after heal) %s", rel(f.Start), f.Kind,
		strings.Join(f.Targets, ","), rel(f.Healed), rel(f.Recovered), took, f.Detail)
	if f.MajoritySamples > 0 {
		s += fmt.Sprintf("  %d samples of caught-up voters, %d below a majority", f.MajoritySamples, len(f.MajorityDips))
	}
	if f.LongestSendStall > 0 {
		s += fmt.Sprintf("  longest send stall %v", f.LongestSendStall.Round(time.Millisecond))
	}
	if f.Problem != "" {
		s += "  PROBLEM: " + f.Problem
	}
	return strings.TrimRight(s, " ")
}

// covers reports whether t falls between the fault's start and its
// recovery (or heal, when it did not recover).
func (f FaultRecord) covers(t time.Time) bool {
	end := f.Recovered
	if end.IsZero() {
		end = f.Healed.Add(10 * time.Second)
	}
	return !t.Before(f.Start) && !t.After(end)
}

// Injector applies faults to a cluster.
type Injector struct {
	c     *Cluster
	fw    *Firewall
	links *Shaper
	parts []PartRef
	logf  func(string, ...any)
}

// Inject runs one fault: it waits the gap, injects, holds, heals, and
// returns the record (recovery is waited for by the caller).
func (in *Injector) Inject(ctx context.Context, spec FaultSpec) FaultRecord {
	sleep(ctx, spec.Gap)
	rec := FaultRecord{Kind: spec.Kind, Start: now()}
	if spec.Kind.needsFirewall() && !in.fw.Available() {
		rec.Skipped = "iptables unavailable: " + in.fw.Reason()
		in.logf("!!! SKIPPING %s: %s", spec.Kind, rec.Skipped)
		return rec
	}
	heal, err := in.inject(ctx, spec, &rec)
	if err != nil {
		rec.Problem = err.Error()
	}
	if rec.Skipped != "" {
		in.logf("!!! SKIPPING %s: %s", spec.Kind, rec.Skipped)
		return rec
	}
	in.logf("fault %s on %v: %s (hold %v)", spec.Kind, rec.Targets, rec.Detail, spec.Hold.Round(time.Millisecond))
	sleep(ctx, spec.Hold)
	if heal != nil {
		if err := heal(); err != nil {
			rec.Problem = strings.TrimPrefix(rec.Problem+"; heal: "+err.Error(), "; ")
		}
	}
	rec.Healed = now()
	return rec
}

// inject starts the fault and returns how to heal it.
func (in *Injector) inject(ctx context.Context, spec FaultSpec, rec *FaultRecord) (func() error, error) {
	c := in.c
	rng := rand.New(rand.NewPCG(spec.Pick, 7))
	switch spec.Kind {
	case KillRandom:
		return in.killAndRestart(pickNode(rng, c.Up()), rec, "random node")
	case KillLeader, PauseLeader, PauseFollower:
		return in.partitionFault(ctx, rng, spec.Kind, rec)
	case KillMeta:
		return in.killAndRestart(c.MetaLeader(ctx), rec, "meta leader")
	case Isolate, Split, Bridge:
		return in.netFault(rng, spec.Kind, rec)
	case ClockAhead, ClockBehind, ClockJump:
		return in.clockFault(ctx, rng, spec.Kind, rec)
	case SlowLink, SlowOneWay:
		return in.linkFault(ctx, rng, spec.Kind, rec)
	case DiskFull:
		return in.diskFault(rng, rec)
	case FsyncError:
		return in.fsyncFault(ctx, rng, rec)
	case WriteError:
		return in.writeFault(ctx, rng, rec)
	case CrashAll:
		rec.Targets, rec.Detail = []string{"all"}, "kill -9 of every node"
		c.KillAll()
		return c.StartAll, nil
	case DrainNode:
		return in.drainFault(ctx, rng, rec)
	case RollingRestart:
		return in.rollingRestart(ctx, rec)
	case KillMetaMidMove, KillLeaderMidMove:
		return in.killMidMove(ctx, rng, spec.Kind, rec)
	case ReplaceNode:
		return in.replaceNode(ctx, rng, rec)
	case AddNodes:
		return in.addNodes(ctx, rec)
	case PauseQueue:
		return in.pauseFault(ctx, rng, rec)
	case WipeNode:
		n := pickNode(rng, c.Up())
		if n == nil {
			return nil, fmt.Errorf("no node up")
		}
		rec.Targets, rec.Detail = []string{n.ID}, "kill -9, data dir deleted, restarted empty"
		if err := c.Kill(n); err != nil {
			return nil, err
		}
		if err := c.Wipe(n); err != nil {
			return nil, err
		}
		return func() error { return c.Start(n) }, nil
	}
	return nil, fmt.Errorf("unknown fault %q", spec.Kind)
}

func pickNode(rng *rand.Rand, nodes []*Node) *Node {
	if len(nodes) == 0 {
		return nil
	}
	return nodes[rng.IntN(len(nodes))]
}

func (in *Injector) killAndRestart(n *Node, rec *FaultRecord, what string) (func() error, error) {
	if n == nil {
		return nil, fmt.Errorf("no %s found", what)
	}
	rec.Targets, rec.Detail = []string{n.ID}, "kill -9 of the "+what
	if err := in.c.Kill(n); err != nil {
		return nil, err
	}
	return func() error { return in.c.Start(n) }, nil
}

// partitionFault kills or pauses the leader of a chosen partition, or
// pauses one of its followers.
func (in *Injector) partitionFault(ctx context.Context, rng *rand.Rand, k FaultKind, rec *FaultRecord) (func() error, error) {
	c := in.c
	p := in.parts[rng.IntN(len(in.parts))]
	v := c.View(ctx)
	leader := c.ByID(v.leader(p))
	if leader == nil {
		leader = pickNode(rng, c.Up())
		rec.Detail = "no agreed leader of " + p.String() + "; "
	}
	if leader == nil {
		return nil, fmt.Errorf("no node up")
	}
	switch k {
	case KillLeader:
		return in.killAndRestart(leader, rec, "leader of "+p.String())
	case PauseFollower:
		var followers []*Node
		for _, r := range v[p] {
			if n := c.ByID(r.node); n != nil && n != leader {
				followers = append(followers, n)
			}
		}
		if f := pickNode(rng, followers); f != nil {
			leader = f
			rec.Detail += "SIGSTOP of a follower of " + p.String()
			break
		}
		rec.Detail += "no follower of " + p.String() + " found; SIGSTOP of its leader"
	default:
		rec.Detail += "SIGSTOP of the leader of " + p.String()
	}
	rec.Targets = []string{leader.ID}
	if err := c.Pause(leader); err != nil {
		return nil, err
	}
	return func() error { return c.Resume(leader) }, nil
}

// netFault builds the sides of a network partition and cuts them apart.
func (in *Injector) netFault(rng *rand.Rand, k FaultKind, rec *FaultRecord) (func() error, error) {
	nodes := append([]*Node(nil), in.c.Nodes...)
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	var a, b []*Node
	switch k {
	case Isolate:
		a, b = nodes[:1], nodes[1:]
		rec.Detail = nodes[0].ID + " isolated"
	case Split:
		m := (len(nodes) - 1) / 2
		a, b = nodes[:m], nodes[m:]
		rec.Detail = fmt.Sprintf("minority %s | majority %s", ids(a), ids(b))
	case Bridge:
		rest := nodes[1:]
		half := len(rest) / 2
		a, b = rest[:half], rest[half:]
		rec.Detail = fmt.Sprintf("%s | bridge %s | %s", ids(a), nodes[0].ID, ids(b))
	}
	rec.Targets = strings.Split(ids(a), ",")
	if err := in.fw.Cut(a, b); err != nil {
		in.fw.Heal()
		return nil, err
	}
	return in.fw.Heal, nil
}

func ids(ns []*Node) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return strings.Join(out, ",")
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
