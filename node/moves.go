package node

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/mover"
	"github.com/ferrymq/ferry/wire"
)

// moveStepsPerPass bounds the membership changes one pass makes in one
// group, so a pass over thousands of groups stays short.
const moveStepsPerPass = 4

// moveInterval is how often the groups with a move in progress are
// stepped (between reconcile passes).
const moveInterval = 250 * time.Millisecond

// stepMembers has a leading replica take its raft group toward the
// catalog's placement (package mover) and reports whether the group is
// settled. A leader whose catalog may lag the meta group's leaves its
// group alone: it would act on an older placement.
func (rs *replicaSet) stepMembers(r *replica, nodes map[string]meta.Node) bool {
	if !r.p.IsLeader() {
		return true
	}
	if !rs.n.meta.caughtUp() || !rs.claimStep(r.a.GroupID) {
		return false
	}
	defer rs.releaseStep(r.a.GroupID)
	pl := placementOf(r.a, rs.n.cfg.ID, nodes)
	for range moveStepsPerPass {
		step, err := rs.n.mover.Step(r.p, pl, rs.n.members)
		r.awaitingVote.Store(step.Action == mover.AwaitingVote)
		if err != nil {
			rs.n.logger.Debug("partition membership step failed", "group", r.a.GroupID, "step", step.Action, "replica", step.Node, "err", err)
			return false
		}
		switch step.Action {
		case mover.Settled:
			return true
		case mover.Waiting, mover.HandedOver, mover.AwaitingVote:
			return false
		case mover.CaughtUp:
			rs.n.reports.add(moveReport{Kind: reportCaughtUp, Queue: r.a.Queue, QueueID: r.a.QueueID, Index: r.a.Index,
				Node: step.Node, Inc: nodes[step.Node].Incarnation, Epoch: r.a.MoveEpoch})
			return false
		case mover.Left:
			rs.n.reports.add(moveReport{Kind: reportLeft, Queue: r.a.Queue, QueueID: r.a.QueueID, Index: r.a.Index, Node: step.Node, Epoch: r.a.MoveEpoch})
			return false
		}
		rs.n.logger.Info("partition membership changed", "group", r.a.GroupID, "step", step.Action.String(), "replica", step.Node)
	}
	return false
}

// placementOf turns an assignment into the mover's placement.
func placementOf(a meta.Assignment, self string, nodes map[string]meta.Node) mover.Placement {
	pl := mover.Placement{GroupID: a.GroupID, Self: self, Replicas: a.Replicas, Joining: a.Joining, Leaving: a.Leaving,
		Addrs: make(map[string]string, len(a.Replicas)+len(a.Leaving))}
	for _, id := range slices.Concat(a.Replicas, a.Leaving) {
		if nd, ok := nodes[id]; ok {
			pl.Addrs[id] = nd.RaftAddr
		}
	}
	return pl
}

// claimStep marks group as being stepped; false if another pass is at it.
func (rs *replicaSet) claimStep(group string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.stepping[group] {
		return false
	}
	rs.stepping[group] = true
	return true
}

// releaseStep ends the step claimed by claimStep.
func (rs *replicaSet) releaseStep(group string) {
	rs.mu.Lock()
	delete(rs.stepping, group)
	rs.mu.Unlock()
}

// runMoves steps, every moveInterval, the led groups whose placement has a
// move in progress, or whose leader waits for a recorded learner to
// report that it votes, so a move does not wait for reconcile passes.
func (n *Node) runMoves() {
	defer n.loops.Done()
	tick := time.NewTicker(moveInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-tick.C:
		}
		var moving []*replica
		for _, r := range n.replicas.all() {
			if (len(r.a.Joining) > 0 || len(r.a.Leaving) > 0 || r.awaitingVote.Load()) && r.p.IsLeader() {
				moving = append(moving, r)
			}
		}
		if len(moving) == 0 {
			continue
		}
		_, nodes, _ := n.replicas.assignedHere()
		for _, r := range moving {
			n.replicas.stepMembers(r, nodes)
		}
	}
}

// Alive reports whether gossip sees node id alive (mover.Cluster).
func (m *membership) Alive(id string) bool {
	return id == m.cfg.ID || m.state(id) == wire.NodeAlive
}

// reportKind says what a moveReport asks the catalog to record.
type reportKind string

const (
	reportCaughtUp reportKind = "caught-up"
	reportLeft     reportKind = "left"
)

// moveReport asks the catalog to record that a partition's replica caught
// up (CmdReplicaCaughtUp) or left (CmdReplicaLeft). The partition's leader
// gossips it with its signed leader table; the meta leader proposes it.
type moveReport struct {
	Kind    reportKind `json:"kind"`
	Queue   string     `json:"queue"`
	QueueID uint64     `json:"qid"`
	Index   int        `json:"index"`
	Node    string     `json:"node"`
	Inc     uint64     `json:"inc,omitempty"`
	// Epoch is the partition's move epoch the leader acted under (see
	// meta.Partition.MoveEpoch).
	Epoch uint64 `json:"epoch,omitempty"`
}

// group returns the report's raft group id.
func (r moveReport) group() string { return meta.GroupID(r.QueueID, r.Index) }

// reportsMax bounds the reports a node gossips at once; reportTTL is how
// long a report is kept without being made again.
const (
	reportsMax = 256
	reportTTL  = 10 * time.Second
)

// moveReports holds this node's pending reports.
type moveReports struct {
	mu   sync.Mutex
	held map[moveReport]time.Time // report -> when last made
}

// newMoveReports returns an empty set of reports.
func newMoveReports() *moveReports { return &moveReports{held: map[moveReport]time.Time{}} }

// add makes a report (again); past reportsMax it is dropped, and made
// again by a later step.
func (mr *moveReports) add(r moveReport) {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if _, ok := mr.held[r]; ok || len(mr.held) < reportsMax {
		mr.held[r] = time.Now()
	}
}

// current returns the reports made within reportTTL, sorted, forgetting
// older ones.
func (mr *moveReports) current() []moveReport {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	maps.DeleteFunc(mr.held, func(_ moveReport, at time.Time) bool { return time.Since(at) > reportTTL })
	out := slices.Collect(maps.Keys(mr.held))
	slices.SortFunc(out, func(a, b moveReport) int {
		return cmpString(string(a.Kind)+"/"+a.group()+"/"+a.Node, string(b.Kind)+"/"+b.group()+"/"+b.Node)
	})
	return out
}
