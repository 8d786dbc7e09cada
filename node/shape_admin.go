package node

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wire"
	"github.com/hashicorp/raft"
)

// handleListNodes answers ListNodes (see listNodes).
func (n *Node) handleListNodes(context.Context, *wire.ListNodesRequest) (*wire.ListNodesResponse, error) {
	return n.listNodes(), nil
}

// handleRebalance answers Rebalance (see rebalance).
func (n *Node) handleRebalance(_ context.Context, r *wire.RebalanceRequest) (*wire.RebalanceResponse, error) {
	return n.rebalance(r)
}

// handleSafeToStop answers SafeToStop (see safeToStop).
func (n *Node) handleSafeToStop(_ context.Context, r *wire.SafeToStopRequest) (*wire.SafeToStopResponse, error) {
	return n.safeToStop(r)
}

// listNodes describes every registered node (then the nodes removed for
// good that the catalog remembers), the moves in flight and the
// under-replicated partitions. Gossip is read outside the catalog's lock.
func (n *Node) listNodes() *wire.ListNodesResponse {
	out := &wire.ListNodesResponse{}
	in := n.planInput()
	unavailable := in.Unavailable
	var nodes []meta.Node
	var shape map[string]*nodeShape
	stuck := map[string]int{}
	var removed []string
	n.meta.view(func(f *meta.FSM) {
		nodes, shape, removed = f.Nodes(), shapeByNode(f), f.RemovedNodes()
		for _, nd := range nodes {
			if nd.Draining && shape[nd.ID].Replicas > 0 {
				stuck[nd.ID] = f.Unmovable(nd.ID, unavailable)
			}
		}
		out.MovesInFlight = f.MovingPartitions()
		for _, m := range f.MovingList(wire.MovingListMax) {
			out.Moving = append(out.Moving, wire.MovingInfo{Queue: m.Queue, Partition: m.Index, Joining: m.Joining, Leaving: m.Leaving})
		}
		under := f.UnderReplicatedPartitions(in)
		out.UnderReplicatedTotal = len(under)
		for _, u := range under[:min(len(under), wire.UnderReplicatedListMax)] {
			out.UnderReplicated = append(out.UnderReplicated, wire.UnderReplicatedInfo{Queue: u.Queue, Partition: u.Index,
				CaughtUp: u.CaughtUp, Want: u.Want, Reason: u.Reason})
		}
	})
	for _, nd := range nodes {
		s := shape[nd.ID]
		st := wire.NodeStatus{ID: nd.ID, State: n.nodeState(nd.ID), Draining: nd.Draining,
			Replicas: s.Replicas, Leaders: s.Leaders, Joining: s.Joining, Leaving: s.Leaving,
			DeadForMillis: n.members.deadFor(nd.ID).Milliseconds(), Leading: n.members.leads(nd.ID)}
		if k := stuck[nd.ID]; k > 0 {
			st.Stuck = fmt.Sprintf("%d of its partitions have a replica on every other available node: add a node or undrain", k)
		}
		out.Nodes = append(out.Nodes, st)
	}
	for _, id := range removed {
		out.Nodes = append(out.Nodes, wire.NodeStatus{ID: id, State: n.nodeState(id), Removed: true})
	}
	return out
}

// nodeStatus returns one node's line of listNodes.
func (n *Node) nodeStatus(id string) (wire.NodeStatus, bool) {
	for _, st := range n.listNodes().Nodes {
		if st.ID == id {
			return st, true
		}
	}
	return wire.NodeStatus{}, false
}

// drainNode marks a node draining (or not) in the catalog; the meta
// leader's duties then move its leaderships and replicas away.
func (n *Node) drainNode(ctx context.Context, r *wire.DrainNodeRequest) (*wire.DrainNodeResponse, error) {
	if err := n.metaLeaderHere(); err != nil {
		return nil, err
	}
	if err := (meta.Node{ID: r.ID, RaftAddr: "-"}).Validate(); err != nil {
		return nil, err
	}
	cmd := meta.Command{Type: meta.CmdSetDraining, SetDraining: &meta.SetDrainingCmd{ID: r.ID, Draining: !r.Undrain}}
	if _, err := n.proposeMeta(ctx, cmd); err != nil {
		return nil, err
	}
	n.logger.Info("node drain changed", "target", r.ID, "draining", !r.Undrain)
	n.replanSoon.Store(true) // plan at the next duty round
	st, _ := n.nodeStatus(r.ID)
	return &wire.DrainNodeResponse{Node: st}, nil
}

// rebalance plans one round of balancing moves and preferred-leader
// changes, and starts them unless it is a dry run.
func (n *Node) rebalance(r *wire.RebalanceRequest) (*wire.RebalanceResponse, error) {
	if err := n.metaLeaderHere(); err != nil {
		return nil, err
	}
	in := n.planInput()
	in.Balance = true
	var moves []meta.MoveReplicaCmd
	var leaders []meta.ReplicaCmd
	n.meta.view(func(f *meta.FSM) {
		moves = f.PlanMoves(in)
		leaders = f.PlanLeaders(in, in.InFlightMax)
	})
	out := &wire.RebalanceResponse{}
	for _, m := range moves {
		out.Moves = append(out.Moves, wire.MoveInfo{Queue: m.Queue, Partition: m.Index, From: m.From, To: m.To})
	}
	for _, l := range leaders {
		out.Leaders = append(out.Leaders, wire.LeaderChangeInfo{Queue: l.Queue, Partition: l.Index, To: l.Node})
	}
	if r.DryRun {
		return out, nil
	}
	for _, m := range moves {
		if err := n.proposeShape(meta.Command{Type: meta.CmdMoveReplica, MoveReplica: &m}); err != nil {
			return out, err
		}
	}
	if len(moves) == 0 {
		for _, l := range leaders {
			if err := n.proposeShape(meta.Command{Type: meta.CmdPreferLeader, PreferLeader: &l}); err != nil {
				return out, err
			}
		}
	}
	out.Started = true
	return out, nil
}

// safeToStop answers whether node id can stop now: every partition it
// hosts keeps, without it, a majority of its placed replicas on alive
// nodes that are caught up (not joining), and so does the meta group. The
// groups it leads (gossip's leader tables) are counted apart: a SIGTERM
// hands them over before the node stops.
func (n *Node) safeToStop(r *wire.SafeToStopRequest) (*wire.SafeToStopResponse, error) {
	out := &wire.SafeToStopResponse{Leads: n.members.leads(r.ID)}
	alive := map[string]bool{}
	var nodes []meta.Node
	n.meta.view(func(f *meta.FSM) { nodes = f.Nodes() })
	for _, nd := range nodes {
		alive[nd.ID] = n.members.Alive(nd.ID)
	}
	reason := func(format string, args ...any) {
		if len(out.Reasons) < wire.SafeToStopReasonsMax {
			out.Reasons = append(out.Reasons, fmt.Sprintf(format, args...))
		}
	}
	registered := false
	behind, opened := n.members.catchUpState()
	opening := map[string]bool{}  // alive nodes sharing a partition that still open replicas
	catching := map[string]bool{} // alive nodes sharing a partition with replicas behind
	n.meta.view(func(f *meta.FSM) {
		_, registered = f.Node(r.ID)
		for _, q := range f.Queues() {
			for _, p := range q.Partitions {
				if !slices.Contains(p.Replicas, r.ID) && !slices.Contains(p.Leaving, r.ID) {
					continue
				}
				if up := caughtUpWithout(p, r.ID, alive); up < len(p.Replicas)/2+1 {
					reason("queue %q partition %d: %d caught-up replicas on alive nodes without it, %d needed", q.Name, p.Index, up, len(p.Replicas)/2+1)
				}
				for _, id := range p.Replicas {
					if id != r.ID && alive[id] && !opened[id] {
						opening[id] = true
					}
					if id != r.ID && alive[id] && behind[id] {
						catching[id] = true
					}
				}
			}
		}
	})
	for _, id := range slices.Sorted(maps.Keys(opening)) {
		reason("node %s has not opened all its replicas yet (it is starting)", id)
	}
	for _, id := range slices.Sorted(maps.Keys(catching)) {
		reason("node %s has replicas catching up with their leaders", id)
	}
	if !registered {
		return nil, fmt.Errorf("%w: %q", meta.ErrNodeNotFound, r.ID)
	}
	if servers, err := n.meta.servers(); err == nil {
		voters, up := 0, 0
		for _, s := range servers {
			if s.Suffrage != raft.Voter || string(s.ID) == r.ID {
				continue
			}
			voters++
			if n.members.Alive(string(s.ID)) {
				up++
			}
		}
		isVoter := slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == r.ID && s.Suffrage == raft.Voter })
		if isVoter && up < (voters+1)/2+1 {
			reason("meta group: %d alive voters without it, %d needed", up, (voters+1)/2+1)
		}
	}
	out.Safe = len(out.Reasons) == 0
	return out, nil
}

// caughtUpWithout counts a partition's placed, caught-up replicas on alive
// nodes other than id.
func caughtUpWithout(p meta.Partition, id string, alive map[string]bool) int {
	up := 0
	for _, r := range p.Replicas {
		if r != id && !slices.Contains(p.Joining, r) && alive[r] {
			up++
		}
	}
	return up
}
