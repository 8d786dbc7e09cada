package node

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wire"
	"github.com/hashicorp/raft"
)

// reportsPerDutyMax bounds the move reports the meta leader records per
// duty round; the rest wait for the next.
const reportsPerDutyMax = 64

// runShapeDuties is the meta leader's share of changing the cluster's
// shape, run from its duty loop: record what partition leaders report
// (caught-up and left replicas), then start the moves the planner asks
// for (draining and long-dead nodes first, then balancing).
func (n *Node) runShapeDuties() {
	if !n.meta.isLeader() || !n.meta.caughtUp() {
		return
	}
	n.recordReports()
	n.handOverMetaIfDraining()
	stamp := shapePlanStamp{applied: n.meta.raft.AppliedIndex(), changes: n.members.changes.Load(), at: time.Now()}
	last := n.shapePlanned
	soon := n.replanSoon.Swap(false)
	if since := stamp.at.Sub(last.at); !soon && (since < shapeReplanMin ||
		(stamp.applied == last.applied && stamp.changes == last.changes && since < shapeReplanMax)) {
		return
	}
	n.shapePlanned = stamp
	n.startPlannedMoves()
}

// handOverMetaIfDraining hands the meta group's leadership to an alive
// voter that is not draining when this node, its leader, is draining: a
// drained node leads nothing. It tries at most every shapeReplanMin; with
// no such voter the node keeps leading (node ls shows it leading).
func (n *Node) handOverMetaIfDraining() {
	var self meta.Node
	var nodes map[string]meta.Node
	n.meta.view(func(f *meta.FSM) {
		self, _ = f.Node(n.cfg.ID)
		nodes = map[string]meta.Node{}
		for _, nd := range f.Nodes() {
			nodes[nd.ID] = nd
		}
	})
	if !self.Draining || time.Since(n.metaHandOverAt) < shapeReplanMin {
		return
	}
	n.metaHandOverAt = time.Now()
	servers, err := n.meta.servers()
	if err != nil {
		return
	}
	for _, s := range servers {
		id := string(s.ID)
		nd, ok := nodes[id]
		if id == n.cfg.ID || s.Suffrage != raft.Voter || !ok || nd.Draining || n.members.state(id) != wire.NodeAlive {
			continue
		}
		if err := n.meta.raft.LeadershipTransferToServer(s.ID, s.Address).Error(); err != nil {
			n.logger.Warn("handing the draining node's meta leadership over failed", "to", id, "err", err)
			return
		}
		n.logger.Info("meta leadership handed over: this node is draining", "to", id)
		return
	}
}

// shapePlanStamp is what the last plan saw: the catalog's applied index,
// gossip's change count, and when.
type shapePlanStamp struct {
	applied, changes uint64
	at               time.Time
}

// A plan reads the whole catalog: the meta leader plans again at most
// every shapeReplanMin, and when neither the catalog nor gossip changed
// only every shapeReplanMax (dead-node timeouts run out with no change).
const (
	shapeReplanMin = time.Second
	shapeReplanMax = 10 * time.Second
)

// recordReports proposes the gossiped move reports the catalog still
// waits for.
func (n *Node) recordReports() {
	done := 0
	for _, mr := range n.members.reports() {
		if done == reportsPerDutyMax {
			return
		}
		cmd, wanted := n.reportCommand(mr.Report)
		if !wanted {
			continue
		}
		done++
		if err := n.proposeShape(cmd); err != nil {
			n.logger.Warn("recording a replica move failed", "kind", mr.Report.Kind, "group", mr.Report.group(), "replica", mr.Report.Node, "err", err)
			continue
		}
		n.logger.Info("replica move recorded", "kind", mr.Report.Kind, "queue", mr.Report.Queue, "partition", mr.Report.Index,
			"replica", mr.Report.Node, "reported_by", mr.From)
	}
}

// reportCommand returns the catalog command a report asks for, and false
// when the catalog no longer waits for it (already recorded, or stale).
func (n *Node) reportCommand(r moveReport) (meta.Command, bool) {
	var cmd meta.Command
	wanted := false
	n.meta.view(func(f *meta.FSM) {
		q, ok := f.Queue(r.Queue)
		if !ok || q.ID != r.QueueID || r.Index < 0 || r.Index >= len(q.Partitions) {
			return
		}
		p := q.Partitions[r.Index]
		if r.Epoch != p.MoveEpoch {
			return // made in an earlier move of the partition
		}
		rc := &meta.ReplicaCmd{Queue: r.Queue, QueueID: r.QueueID, Index: r.Index, Node: r.Node, Incarnation: r.Inc, MoveEpoch: r.Epoch}
		switch r.Kind {
		case reportCaughtUp:
			nd, _ := f.Node(r.Node)
			wanted = slices.Contains(p.Joining, r.Node) && nd.Incarnation == r.Inc
			cmd = meta.Command{Type: meta.CmdReplicaCaughtUp, ReplicaCaughtUp: rc}
		case reportLeft:
			wanted = slices.Contains(p.Leaving, r.Node)
			cmd = meta.Command{Type: meta.CmdReplicaLeft, ReplicaLeft: rc}
		}
	})
	return cmd, wanted
}

// startPlannedMoves proposes the planner's moves and preferred-leader
// changes.
func (n *Node) startPlannedMoves() {
	in := n.planInput()
	var moves []meta.MoveReplicaCmd
	var leaders []meta.ReplicaCmd
	n.meta.view(func(f *meta.FSM) {
		moves = f.PlanMoves(in)
		if in.Balance && len(moves) == 0 {
			leaders = f.PlanLeaders(in, in.InFlightMax)
		}
	})
	for _, mv := range moves {
		if err := n.proposeShape(meta.Command{Type: meta.CmdMoveReplica, MoveReplica: &mv}); err != nil {
			n.logger.Warn("starting a replica move failed", "queue", mv.Queue, "partition", mv.Index, "from", mv.From, "to", mv.To, "err", err)
			return
		}
		n.logger.Info("replica move started", "queue", mv.Queue, "partition", mv.Index, "from", mv.From, "to", mv.To)
	}
	for _, pl := range leaders {
		if err := n.proposeShape(meta.Command{Type: meta.CmdPreferLeader, PreferLeader: &pl}); err != nil {
			n.logger.Warn("changing a preferred leader failed", "queue", pl.Queue, "partition", pl.Index, "to", pl.Node, "err", err)
			return
		}
		n.logger.Info("preferred leader changed", "queue", pl.Queue, "partition", pl.Index, "to", pl.Node)
	}
}

// planInput gathers what the planner needs from gossip: nodes dead past
// the dead-node timeout are evacuated; nodes not alive get nothing.
// Balancing waits while a registered node is down but not yet evacuated:
// a node restarting is not a reason to move its replicas. A node
// evacuated is treated as gone, so the live nodes balance among themselves
// (with a joined replacement among them) without waiting for `node remove`.
func (n *Node) planInput() meta.PlanInput {
	pc := n.cfg.Placement.withDefaults()
	in := meta.PlanInput{Evacuate: map[string]bool{}, Unavailable: map[string]bool{}, InFlightMax: pc.MovesMax, Balance: !pc.NoBalance}
	var nodes []meta.Node
	n.meta.view(func(f *meta.FSM) { nodes = f.Nodes() })
	for _, nd := range nodes {
		if n.members.Alive(nd.ID) {
			continue
		}
		in.Unavailable[nd.ID] = true
		if n.deadPastTimeout(nd.ID) {
			in.Evacuate[nd.ID] = true
			continue
		}
		in.Balance = false
	}
	return in
}

// deadPastTimeout reports whether gossip has seen node id dead for longer
// than the dead-node timeout (never, when replacement is off: a negative
// timeout).
func (n *Node) deadPastTimeout(id string) bool {
	timeout, on := n.cfg.Placement.replacementAfter()
	return on && n.members.deadFor(id) > timeout
}

// proposeShape proposes one shape command on the meta leader; a command
// the catalog refuses as stale is no error (someone else got there).
func (n *Node) proposeShape(c meta.Command) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := n.meta.propose(ctx, c)
	if err == nil {
		err = res.Err
	}
	if errors.Is(err, meta.ErrStalePlacement) {
		return nil
	}
	return err
}

// nodeShape is one node's part in the cluster's shape, for node ls and
// safe-to-stop answers.
type nodeShape struct {
	Replicas, Leaders, Joining, Leaving int
}

// shapeByNode counts, per registered node, its placed replicas, preferred
// leaderships, and replicas joining or leaving.
func shapeByNode(f *meta.FSM) map[string]*nodeShape {
	out := map[string]*nodeShape{}
	for _, nd := range f.Nodes() {
		out[nd.ID] = &nodeShape{}
	}
	get := func(id string) *nodeShape {
		if s := out[id]; s != nil {
			return s
		}
		s := &nodeShape{}
		out[id] = s
		return s
	}
	for _, q := range f.Queues() {
		for _, p := range q.Partitions {
			for j, id := range p.Replicas {
				s := get(id)
				s.Replicas++
				if j == 0 {
					s.Leaders++
				}
			}
			for _, id := range p.Joining {
				get(id).Joining++
			}
			for _, id := range p.Leaving {
				get(id).Leaving++
			}
		}
	}
	return out
}
