package meta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func moveCmdOf(q Queue, index int, from, to string) Command {
	return Command{Type: CmdMoveReplica, MoveReplica: &MoveReplicaCmd{Queue: q.Name, QueueID: q.ID, Index: index, From: from, To: to}}
}

func caughtUpCmd(q Queue, index int, id string, inc uint64) Command {
	return Command{Type: CmdReplicaCaughtUp, ReplicaCaughtUp: &ReplicaCmd{Queue: q.Name, QueueID: q.ID, Index: index, Node: id, Incarnation: inc}}
}

func leftCmd(q Queue, index int, id string) Command {
	return Command{Type: CmdReplicaLeft, ReplicaLeft: &ReplicaCmd{Queue: q.Name, QueueID: q.ID, Index: index, Node: id}}
}

func drainCmd(id string, on bool) Command {
	return Command{Type: CmdSetDraining, SetDraining: &SetDrainingCmd{ID: id, Draining: on}}
}

func (h *harness) partition(name string, index int) Partition {
	h.t.Helper()
	q, ok := h.f.Queue(name)
	if !ok {
		h.t.Fatalf("queue %s missing", name)
	}
	return q.Partitions[index]
}

// A move places the new replica in the old one's slot as joining and keeps
// the old one running as leaving; the partition takes no second move until
// the leader recorded both ends, and each end applies once.
func TestMeta_MoveReplicaLifecycle(t *testing.T) {
	h := newHarness(t)
	h.registerN(4)
	q := h.create("orders", shape(1, 3))
	before := h.partition("orders", 0)
	from := before.Replicas[1]
	if r := h.apply(moveCmdOf(q, 0, from, "n4")); r.Err != nil {
		t.Fatal(r.Err)
	}
	p := h.partition("orders", 0)
	if p.Replicas[1] != "n4" || !slices.Equal(p.Joining, []string{"n4"}) || !slices.Equal(p.Leaving, []string{from}) {
		t.Fatalf("after the move: %+v", p)
	}
	var leave *Assignment
	for _, a := range h.f.Assignments(from) {
		leave = &a
	}
	if leave == nil || !leave.Leave || leave.Join || !slices.Equal(leave.Leaving, []string{from}) {
		t.Fatalf("the leaving node's assignment: %+v", leave)
	}
	if got := h.f.MovingList(10); len(got) != 1 || got[0].Queue != "orders" || got[0].Index != 0 ||
		!slices.Equal(got[0].Joining, []string{"n4"}) || !slices.Equal(got[0].Leaving, []string{from}) {
		t.Fatalf("moving list %+v", got)
	}
	if got := h.f.MovingList(0); len(got) != 0 {
		t.Fatalf("moving list past its bound: %+v", got)
	}
	wantErr(t, h.apply(moveCmdOf(q, 0, p.Replicas[0], from)).Err, ErrStalePlacement)
	wantErr(t, h.apply(leftCmd(q, 0, "n4")).Err, ErrStalePlacement)
	wantErr(t, h.apply(caughtUpCmd(q, 0, from, 0)).Err, ErrStalePlacement)
	if r := h.apply(caughtUpCmd(q, 0, "n4", 0)); r.Err != nil {
		t.Fatal(r.Err)
	}
	wantErr(t, h.apply(caughtUpCmd(q, 0, "n4", 0)).Err, ErrStalePlacement)
	if r := h.apply(leftCmd(q, 0, from)); r.Err != nil {
		t.Fatal(r.Err)
	}
	p = h.partition("orders", 0)
	if p.Moving() || len(h.f.Assignments(from)) != 0 {
		t.Fatalf("after both ends: %+v, %d assignments left on %s", p, len(h.f.Assignments(from)), from)
	}
	// A command for a queue deleted and created again under the same name
	// never touches the new one.
	h.apply(deleteCmd("orders"))
	h.create("orders", shape(1, 3))
	wantErr(t, h.apply(moveCmdOf(q, 0, from, "n4")).Err, ErrStalePlacement)
}

// epochCmd returns c with its replica command stamped with move epoch e.
func epochCmd(c Command, e uint64) Command {
	if c.ReplicaLeft != nil {
		c.ReplicaLeft.MoveEpoch = e
	}
	if c.ReplicaCaughtUp != nil {
		c.ReplicaCaughtUp.MoveEpoch = e
	}
	return c
}

// A report outlives its move (the leader gossips it for a while): a node
// that left, came back and leaves again must not be recorded as gone by
// the first move's report while it is still a voter, nor a node joining
// again be recorded as caught up by its earlier catch-up's report.
func TestMeta_ReportsOfAnEarlierMoveAreStale(t *testing.T) {
	h := newHarness(t)
	h.registerN(5)
	q := h.create("jobs", shape(1, 3))
	p := h.partition("jobs", 0)
	a := p.Replicas[1]
	run := func(c Command) {
		t.Helper()
		if r := h.apply(c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	// Move 1: a -> n4, finished; its reports are made in epoch 1.
	run(moveCmdOf(q, 0, a, "n4"))
	e1 := h.partition("jobs", 0).MoveEpoch
	run(epochCmd(caughtUpCmd(q, 0, "n4", 0), e1))
	run(epochCmd(leftCmd(q, 0, a), e1))
	// Move 2: n4 -> a, finished in epoch 2.
	run(moveCmdOf(q, 0, "n4", a))
	e2 := h.partition("jobs", 0).MoveEpoch
	if e2 == e1 {
		t.Fatalf("a new move kept epoch %d", e1)
	}
	wantErr(t, h.apply(epochCmd(caughtUpCmd(q, 0, a, 0), e1)).Err, ErrStalePlacement)
	run(epochCmd(caughtUpCmd(q, 0, a, 0), e2))
	run(epochCmd(leftCmd(q, 0, "n4"), e2))
	// Move 3: a -> n5. Move 1's "a left" report arrives late.
	run(moveCmdOf(q, 0, a, "n5"))
	e3 := h.partition("jobs", 0).MoveEpoch
	wantErr(t, h.apply(epochCmd(leftCmd(q, 0, a), e1)).Err, ErrStalePlacement)
	wantErr(t, h.apply(epochCmd(leftCmd(q, 0, a), e2)).Err, ErrStalePlacement)
	if p := h.partition("jobs", 0); !slices.Equal(p.Leaving, []string{a}) || !slices.Equal(p.Joining, []string{"n5"}) {
		t.Fatalf("a stale report changed the move: %+v", p)
	}
	run(epochCmd(caughtUpCmd(q, 0, "n5", 0), e3))
	run(epochCmd(leftCmd(q, 0, a), e3))
	if p := h.partition("jobs", 0); p.Moving() || p.MoveEpoch != e3 {
		t.Fatalf("after move 3: %+v", p)
	}
	// The assignment hands the epoch to the leader's reports.
	for _, as := range h.f.Assignments("n5") {
		if as.MoveEpoch != e3 {
			t.Fatalf("assignment epoch %d, want %d", as.MoveEpoch, e3)
		}
	}
}

// Moving the preferred leader's replica hands the role to the next replica
// and appends the newcomer, which cannot lead before it caught up.
func TestMeta_MovingThePreferredLeaderPassesTheRole(t *testing.T) {
	h := newHarness(t)
	h.registerN(4)
	q := h.create("orders", shape(1, 3))
	before := h.partition("orders", 0)
	h.apply(moveCmdOf(q, 0, before.Replicas[0], "n4"))
	p := h.partition("orders", 0)
	want := append(slices.Clone(before.Replicas[1:]), "n4")
	if !slices.Equal(p.Replicas, want) {
		t.Fatalf("replicas %v, want %v", p.Replicas, want)
	}
}

// A move is refused to a node that is draining, unregistered or already a
// replica, and from a node that holds none; nothing changes.
func TestMeta_MoveReplicaRefusals(t *testing.T) {
	h := newHarness(t)
	h.registerN(5)
	q := h.create("orders", shape(1, 3))
	p := h.partition("orders", 0)
	outside := []string{}
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
		if !slices.Contains(p.Replicas, id) {
			outside = append(outside, id)
		}
	}
	h.apply(drainCmd(outside[0], true))
	digest := h.f.Digest()
	wantErr(t, h.apply(moveCmdOf(q, 0, p.Replicas[0], outside[0])).Err, ErrInvalidArgument)
	wantErr(t, h.apply(moveCmdOf(q, 0, p.Replicas[0], "nobody")).Err, ErrNodeNotFound)
	wantErr(t, h.apply(moveCmdOf(q, 0, p.Replicas[0], p.Replicas[1])).Err, ErrStalePlacement)
	wantErr(t, h.apply(moveCmdOf(q, 0, outside[1], outside[1])).Err, ErrStalePlacement)
	wantErr(t, h.apply(moveCmdOf(q, 3, p.Replicas[0], outside[1])).Err, ErrInvalidArgument)
	if h.f.Digest() == digest {
		t.Fatal("digest did not move with the clock") // the refusals still advanced the clock
	}
	if got := h.partition("orders", 0); got.Moving() || !slices.Equal(got.Replicas, p.Replicas) {
		t.Fatalf("a refused move changed the partition: %+v", got)
	}
}

// A node that registers with a new incarnation lost its data: each of its
// replicas in a partition with other replicas becomes joining; a
// single-replica partition is left as it is; incarnation 0 never counts as
// a change. A caught-up record for an older incarnation is refused.
func TestMeta_NewIncarnationRejoinsEveryReplica(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"n1", "n2", "n3"} {
		n := node(id)
		n.Incarnation = 1
		h.apply(registerCmd(n))
	}
	q := h.create("orders", shape(2, 3))
	single := h.create("solo", shape(3, 1))
	n1 := node("n1")
	h.apply(registerCmd(n1)) // incarnation 0: unknown, no change
	if got, _ := h.f.Node("n1"); got.Incarnation != 1 {
		t.Fatalf("incarnation %d after a registration without one, want 1 kept", got.Incarnation)
	}
	for _, p := range h.f.Queues()[0].Partitions {
		if len(p.Joining) != 0 {
			t.Fatalf("a registration without incarnation marked %+v", p)
		}
	}
	n1.Incarnation = 2
	h.apply(registerCmd(n1))
	for i := range q.Partitions {
		if p := h.partition("orders", i); !slices.Equal(p.Joining, []string{"n1"}) {
			t.Fatalf("orders partition %d after n1 lost its data: %+v", i, p)
		}
	}
	for i := range single.Partitions {
		if p := h.partition("solo", i); len(p.Joining) != 0 {
			t.Fatalf("solo partition %d marked joining: %+v", i, p)
		}
	}
	for _, a := range h.f.Assignments("n1") {
		if a.Join != (a.Queue == "orders") {
			t.Fatalf("assignment %+v", a)
		}
	}
	wantErr(t, h.apply(caughtUpCmd(q, 0, "n1", 1)).Err, ErrStalePlacement)
	if r := h.apply(caughtUpCmd(q, 0, "n1", 2)); r.Err != nil {
		t.Fatal(r.Err)
	}
}

// A draining node gets no replica of a new queue and does not count
// towards the default replica count; undraining takes it back.
func TestMeta_DrainingNodeGetsNoNewReplicas(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	if r := h.apply(drainCmd("n2", true)); r.Err != nil || !r.Node.Draining {
		t.Fatalf("drain: %+v", r)
	}
	q := h.create("orders", shape(4, 0))
	if q.Config.Replicas != 2 {
		t.Fatalf("default replicas %d with one of three nodes draining, want 2", q.Config.Replicas)
	}
	for _, p := range q.Partitions {
		if slices.Contains(p.Replicas, "n2") {
			t.Fatalf("partition %d placed on the draining node: %v", p.Index, p.Replicas)
		}
	}
	wantErr(t, h.apply(createCmd("big", shape(1, 3))).Err, ErrNotEnoughNodes)
	n2 := node("n2")
	n2.ClientAddr = "elsewhere:1"
	h.apply(registerCmd(n2))
	if got, _ := h.f.Node("n2"); !got.Draining {
		t.Fatal("a registration cleared the draining flag")
	}
	wantErr(t, h.apply(drainCmd("nobody", true)).Err, ErrNodeNotFound)
	h.apply(drainCmd("n2", false))
	h.create("big", shape(1, 3))
}

// completeMoves records every move in progress as done, as partition
// leaders would once their raft groups changed.
func (h *harness) completeMoves() {
	h.t.Helper()
	for _, q := range h.f.Queues() {
		for _, p := range q.Partitions {
			for _, id := range p.Joining {
				n, _ := h.f.Node(id)
				if r := h.apply(caughtUpCmd(q, p.Index, id, n.Incarnation)); r.Err != nil {
					h.t.Fatal(r.Err)
				}
			}
			for _, id := range p.Leaving {
				if r := h.apply(leftCmd(q, p.Index, id)); r.Err != nil {
					h.t.Fatal(r.Err)
				}
			}
		}
	}
}

// planAndRun applies plans (completing the moves after each) until the
// planner has nothing more, and returns how many moves ran.
func (h *harness) planAndRun(in PlanInput) int {
	h.t.Helper()
	total := 0
	for round := 0; ; round++ {
		if round > 1000 {
			h.t.Fatal("the planner never settles")
		}
		plan := h.f.PlanMoves(in)
		if len(plan) > in.InFlightMax {
			h.t.Fatalf("plan of %d moves, limit %d", len(plan), in.InFlightMax)
		}
		if len(plan) == 0 {
			return total
		}
		seen := map[string]bool{}
		for _, m := range plan {
			key := fmt.Sprintf("%s/%d", m.Queue, m.Index)
			if seen[key] {
				h.t.Fatalf("two moves of %s in one plan", key)
			}
			seen[key] = true
			if r := h.apply(Command{Type: CmdMoveReplica, MoveReplica: &m}); r.Err != nil {
				h.t.Fatalf("planned move %+v: %v", m, r.Err)
			}
		}
		if again := h.f.PlanMoves(in); len(again) != 0 {
			h.t.Fatalf("the planner planned %d more with its limit in flight", len(again))
		}
		h.completeMoves()
		total += len(plan)
	}
}

func (h *harness) counts() map[string]int {
	out := map[string]int{}
	for _, q := range h.f.Queues() {
		for _, p := range q.Partitions {
			for _, id := range p.Replicas {
				out[id]++
			}
		}
	}
	return out
}

// Draining a node moves every replica off it, a bounded number at a time,
// onto the least loaded nodes.
func TestMeta_PlanDrainsANode(t *testing.T) {
	h := newHarness(t)
	h.registerN(4)
	for i := range 6 {
		h.create(fmt.Sprintf("q%d", i), shape(2, 3))
	}
	held := h.counts()["n1"]
	h.apply(drainCmd("n1", true))
	moved := h.planAndRun(PlanInput{InFlightMax: 2})
	c := h.counts()
	if c["n1"] != 0 || moved != held {
		t.Fatalf("after draining n1: counts %v, %d moves for %d replicas", c, moved, held)
	}
	if d := c["n2"] - c["n4"]; d > 1 || d < -1 {
		t.Fatalf("uneven after the drain: %v", c)
	}
}

// A drain with nowhere to go (three nodes, three replicas) moves nothing
// and leaves the replicas where they are.
func TestMeta_PlanDrainWithNowhereToGo(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	h.create("orders", shape(2, 3))
	h.apply(drainCmd("n1", true))
	if plan := h.f.PlanMoves(PlanInput{InFlightMax: 4}); len(plan) != 0 {
		t.Fatalf("planned %+v with nowhere to go", plan)
	}
}

// An evacuated (long dead) node's replicas move to live nodes only.
func TestMeta_PlanEvacuatesADeadNode(t *testing.T) {
	h := newHarness(t)
	h.registerN(5)
	for i := range 4 {
		h.create(fmt.Sprintf("q%d", i), shape(2, 3))
	}
	in := PlanInput{Evacuate: map[string]bool{"n5": true}, Unavailable: map[string]bool{"n5": true, "n4": true}, InFlightMax: 3}
	for _, m := range h.f.PlanMoves(in) {
		if m.From != "n5" || m.To == "n4" || m.To == "n5" {
			t.Fatalf("planned %+v", m)
		}
	}
	h.planAndRun(in)
	if c := h.counts(); c["n5"] != 0 || c["n4"] == 0 {
		t.Fatalf("counts after evacuating n5 (n4 down but kept): %v", c)
	}
}

// Two nodes joining three loaded ones end with their share: replica
// counts per node differ by at most one.
func TestMeta_PlanBalancesJoinedNodes(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	for i := range 10 {
		h.create(fmt.Sprintf("q%02d", i), shape(1, 3))
	}
	h.register("n4", "n5")
	moved := h.planAndRun(PlanInput{InFlightMax: 3, Balance: true})
	c := h.counts()
	lo, hi := 1<<30, 0
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
		lo, hi = min(lo, c[id]), max(hi, c[id])
	}
	if hi-lo > 1 || moved == 0 {
		t.Fatalf("counts %v after %d moves", c, moved)
	}
	for _, c := range h.f.PlanLeaders(PlanInput{}, 100) {
		if r := h.apply(Command{Type: CmdPreferLeader, PreferLeader: &c}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	leaders := map[string]int{}
	for _, q := range h.f.Queues() {
		leaders[q.Partitions[0].Replicas[0]]++
	}
	lo, hi = 1<<30, 0
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
		lo, hi = min(lo, leaders[id]), max(hi, leaders[id])
	}
	if hi-lo > 1 {
		t.Fatalf("preferred leaders %v after balancing", leaders)
	}
	if plan := h.f.PlanLeaders(PlanInput{}, 100); len(plan) != 0 {
		t.Fatalf("balanced leaders planned again: %+v", plan)
	}
}

// Preferring a joining replica or a node without one is refused.
func TestMeta_PreferLeaderNeedsACaughtUpReplica(t *testing.T) {
	h := newHarness(t)
	h.registerN(4)
	q := h.create("orders", shape(1, 3))
	p := h.partition("orders", 0)
	prefer := func(id string) error {
		return h.apply(Command{Type: CmdPreferLeader, PreferLeader: &ReplicaCmd{Queue: q.Name, QueueID: q.ID, Node: id}}).Err
	}
	h.apply(moveCmdOf(q, 0, p.Replicas[2], "n4"))
	wantErr(t, prefer("n4"), ErrStalePlacement)
	wantErr(t, prefer(p.Replicas[2]), ErrStalePlacement)
	if err := prefer(p.Replicas[1]); err != nil {
		t.Fatal(err)
	}
	if got := h.partition("orders", 0).Replicas; got[0] != p.Replicas[1] || got[1] != p.Replicas[0] {
		t.Fatalf("replicas %v after preferring %s (were %v)", got, p.Replicas[1], p.Replicas)
	}
}

// Removing a node with nowhere to place its replicas leaves its partitions
// under-replicated with a reason; a node joining takes the slots as
// joining replicas (still under-replicated, catching up) until caught up.
func TestMeta_UnderReplicatedPartitionsAndWhy(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	q := h.create("orders", shape(2, 3))
	if u := h.f.UnderReplicatedPartitions(PlanInput{}); len(u) != 0 {
		t.Fatalf("fresh queue under-replicated: %+v", u)
	}
	h.apply(removeCmd("n3"))
	u := h.f.UnderReplicatedPartitions(PlanInput{})
	if len(u) != 2 || u[0].CaughtUp != 2 || u[0].Want != 3 || !strings.Contains(u[0].Reason, "no node") {
		t.Fatalf("after removing n3: %+v", u)
	}
	h.register("n4")
	u = h.f.UnderReplicatedPartitions(PlanInput{})
	if len(u) != 2 || !strings.Contains(u[0].Reason, "n4") {
		t.Fatalf("after n4 joined: %+v", u)
	}
	for i := range 2 {
		h.apply(caughtUpCmd(q, i, "n4", 0))
	}
	if u := h.f.UnderReplicatedPartitions(PlanInput{}); len(u) != 0 {
		t.Fatalf("after n4 caught up: %+v", u)
	}
}

// A replica on a node that is down does not count as caught up, and the
// reason says whether the node may come back, is being replaced, or has
// nowhere to be replaced.
func TestMeta_UnderReplicatedCountsReplicasOnDownNodes(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	h.create("orders", shape(1, 3))
	down := PlanInput{Unavailable: map[string]bool{"n3": true}}
	u := h.f.UnderReplicatedPartitions(down)
	if len(u) != 1 || u[0].CaughtUp != 2 || !strings.Contains(u[0].Reason, "n3 is down") {
		t.Fatalf("n3 down: %+v", u)
	}
	dead := PlanInput{Unavailable: map[string]bool{"n3": true}, Evacuate: map[string]bool{"n3": true}}
	u = h.f.UnderReplicatedPartitions(dead)
	if len(u) != 1 || !strings.Contains(u[0].Reason, "n3 is dead past the dead-node timeout and there is no node") {
		t.Fatalf("n3 dead with nowhere to go: %+v", u)
	}
	h.register("n4")
	u = h.f.UnderReplicatedPartitions(dead)
	if len(u) != 1 || !strings.Contains(u[0].Reason, "being rebuilt elsewhere") {
		t.Fatalf("n3 dead, n4 joined: %+v", u)
	}
	if u := h.f.UnderReplicatedPartitions(PlanInput{Unavailable: map[string]bool{"n4": true}}); len(u) != 0 {
		t.Fatalf("a down node without a replica counted: %+v", u)
	}
}

// Preferred leaders even out (counts per node within one) whatever the
// placement, also when the node with the most shares no partition with
// the one with the fewest: the role then passes along a chain of nodes.
func TestMeta_PlanLeadersEvensOutThroughChains(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 3))
		h := newHarness(t)
		nodes := 3 + rng.IntN(3)
		h.registerN(nodes)
		for i := range 3 + rng.IntN(6) {
			h.create(fmt.Sprintf("q%02d", i), shape(1+rng.IntN(4), 3))
		}
		added := 1 + rng.IntN(3)
		for i := range added {
			h.register(fmt.Sprintf("n%d", nodes+i+1))
		}
		h.planAndRun(PlanInput{InFlightMax: 3, Balance: true})
		for round := 0; ; round++ {
			plan := h.f.PlanLeaders(PlanInput{}, 3)
			if len(plan) == 0 {
				break
			}
			if len(plan) > 3 || round > 200 {
				t.Fatalf("seed %d: plan of %d hand-overs in round %d", seed, len(plan), round)
			}
			for _, c := range plan {
				if r := h.apply(Command{Type: CmdPreferLeader, PreferLeader: &c}); r.Err != nil {
					t.Fatalf("seed %d: %v", seed, r.Err)
				}
			}
		}
		leaders := map[string]int{}
		for _, q := range h.f.Queues() {
			for _, p := range q.Partitions {
				leaders[p.Replicas[0]]++
			}
		}
		lo, hi := 1<<30, 0
		for i := range nodes + added {
			c := leaders[fmt.Sprintf("n%d", i+1)]
			lo, hi = min(lo, c), max(hi, c)
		}
		if hi-lo > 1 {
			t.Errorf("seed %d (%d+%d nodes): preferred leaders %v", seed, nodes, added, leaders)
		}
	}
}
