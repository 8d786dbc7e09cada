package meta

import (
	"slices"
	"strings"
)

// PlanInput is what PlanMoves needs besides the catalog: facts about nodes
// that only the cluster's liveness knows, and the planner's limits.
type PlanInput struct {
	// Evacuate lists nodes whose replicas must move away although the
	// nodes are still registered: nodes dead for longer than the
	// dead-node timeout.
	Evacuate map[string]bool
	// Unavailable lists nodes that must receive no replica now (not
	// alive, or evacuated).
	Unavailable map[string]bool
	// InFlightMax bounds the partitions moving at once, in progress ones
	// included; PlanMoves returns at most InFlightMax minus those.
	InFlightMax int
	// Balance lets the plan move replicas from the most to the least
	// loaded node until their counts differ by at most one.
	Balance bool
}

// PlanMoves returns the moves to start now, at most one per partition and
// none of a partition already moving: first every replica on an
// evacuated or draining node, then, with Balance, moves that even out
// replica counts. Each move goes to the placeable node (registered, not
// draining, not unavailable) with the fewest replicas, ties by id, that
// does not hold the partition. The plan is deterministic for a catalog
// and input. A replica with nowhere to go is left in place (see
// UnderReplicated).
func (f *FSM) PlanMoves(in PlanInput) []MoveReplicaCmd {
	budget := in.InFlightMax - f.movingPartitions()
	if budget <= 0 {
		return nil
	}
	loads := f.scratchLoads(in.Unavailable)
	var plan []MoveReplicaCmd
	planned := map[string]bool{} // group ids with a planned move
	for _, q := range f.sortedQueues() {
		for _, p := range q.Partitions {
			if len(plan) == budget {
				return plan
			}
			if p.Moving() {
				continue
			}
			for _, id := range p.Replicas {
				if !in.Evacuate[id] && !f.nodes[id].Draining {
					continue
				}
				to := leastLoaded(loads, p.Replicas)
				if to == nil {
					continue
				}
				plan = append(plan, moveCmd(q, p.Index, id, to, loads))
				planned[q.GroupID(p.Index)] = true
				break
			}
		}
	}
	if in.Balance {
		plan = f.planBalance(plan, budget, loads, planned)
	}
	return plan
}

// planBalance appends moves from the most to the least loaded placeable
// node while their replica counts differ by more than one.
func (f *FSM) planBalance(plan []MoveReplicaCmd, budget int, loads []*load, planned map[string]bool) []MoveReplicaCmd {
	for len(plan) < budget && len(loads) > 1 {
		slices.SortFunc(loads, byReplicasThenID)
		least, most := loads[0], loads[len(loads)-1]
		if most.replicas-least.replicas <= 1 {
			return plan
		}
		q, index := f.movableFrom(most.id, least.id, planned)
		if q == nil {
			return plan
		}
		plan = append(plan, moveCmd(q, index, most.id, least, loads))
		planned[q.GroupID(index)] = true
	}
	return plan
}

// movableFrom returns a partition with a replica on from and none on to,
// not moving and not planned; the first in queue-name then index order,
// preferring one where from is not the preferred leader.
func (f *FSM) movableFrom(from, to string, planned map[string]bool) (*Queue, int) {
	var fallback *Queue
	fallbackIndex := 0
	for _, q := range f.sortedQueues() {
		for _, p := range q.Partitions {
			slot := slices.Index(p.Replicas, from)
			if slot < 0 || p.Moving() || planned[q.GroupID(p.Index)] || slices.Contains(p.Replicas, to) {
				continue
			}
			if slot > 0 {
				return q, p.Index
			}
			if fallback == nil {
				fallback, fallbackIndex = q, p.Index
			}
		}
	}
	return fallback, fallbackIndex
}

// moveCmd builds a move and counts it in the scratch loads.
func moveCmd(q *Queue, index int, from string, to *load, loads []*load) MoveReplicaCmd {
	to.replicas++
	for _, l := range loads {
		if l.id == from {
			l.replicas--
		}
	}
	return MoveReplicaCmd{Queue: q.Name, QueueID: q.ID, Index: index, From: from, To: to.id}
}

// scratchLoads copies the loads of placeable nodes, for planning.
func (f *FSM) scratchLoads(unavailable map[string]bool) []*load {
	out := make([]*load, 0, len(f.loads))
	for _, n := range f.sortedNodes() {
		if n.Draining || unavailable[n.ID] {
			continue
		}
		l := *f.loads[n.ID]
		out = append(out, &l)
	}
	return out
}

// leastLoaded returns the load with the fewest replicas, ties by id, among
// those not in held; nil if none.
func leastLoaded(loads []*load, held []string) *load {
	var best *load
	for _, l := range loads {
		if slices.Contains(held, l.id) {
			continue
		}
		if best == nil || byReplicasThenID(l, best) < 0 {
			best = l
		}
	}
	return best
}

// MovingPartitions counts the partitions with a move in progress.
func (f *FSM) MovingPartitions() int { return f.movingPartitions() }

// Unmovable counts the partitions with a replica on node id that no other
// placeable node (registered, not draining, not unavailable) could take:
// each such node holds a replica of it already.
func (f *FSM) Unmovable(id string, unavailable map[string]bool) int {
	loads := f.scratchLoads(unavailable)
	n := 0
	for _, q := range f.queues {
		for _, p := range q.Partitions {
			if slices.Contains(p.Replicas, id) && leastLoaded(loads, slices.Concat(p.Replicas, p.Leaving)) == nil {
				n++
			}
		}
	}
	return n
}

// Moving is a partition with a move in progress: the replicas catching
// up to join it and those on their way out.
type Moving struct {
	Queue   string
	Index   int
	Joining []string
	Leaving []string
}

// MovingList returns at most max partitions with a move in progress, in
// queue name and partition order.
func (f *FSM) MovingList(max int) []Moving {
	var out []Moving
	for _, q := range f.sortedQueues() {
		for _, p := range q.Partitions {
			if len(out) >= max {
				return out
			}
			if p.Moving() {
				out = append(out, Moving{Queue: q.Name, Index: p.Index,
					Joining: slices.Clone(p.Joining), Leaving: slices.Clone(p.Leaving)})
			}
		}
	}
	return out
}

// movingPartitions counts the partitions with a move in progress.
func (f *FSM) movingPartitions() int {
	n := 0
	for _, q := range f.queues {
		for _, p := range q.Partitions {
			if p.Moving() {
				n++
			}
		}
	}
	return n
}

// UnderReplicated is a partition with fewer caught-up replicas than its
// queue's replica count, and why.
type UnderReplicated struct {
	Queue   string
	Index   int
	GroupID string
	// CaughtUp counts the replicas that are caught-up voters; Want is the
	// queue's replica count.
	CaughtUp, Want int
	// Reason says why, for operators.
	Reason string
}

// UnderReplicatedPartitions returns every partition with fewer caught-up
// replicas than configured, sorted by queue name then index. A replica on
// a node of in.Unavailable (down, as the cluster's liveness says) is not
// counted as caught up: a partition one node short is one failure from
// unavailability whether or not the catalog has moved yet.
func (f *FSM) UnderReplicatedPartitions(in PlanInput) []UnderReplicated {
	var out []UnderReplicated
	var loads []*load // computed once, when a reason needs it
	for _, q := range f.sortedQueues() {
		for _, p := range q.Partitions {
			var down []string
			for _, id := range p.Replicas {
				if in.Unavailable[id] && !slices.Contains(p.Joining, id) {
					down = append(down, id)
				}
			}
			caughtUp := len(p.Replicas) - len(p.Joining) - len(down)
			if caughtUp >= q.Config.Replicas {
				continue
			}
			u := UnderReplicated{Queue: q.Name, Index: p.Index, GroupID: q.GroupID(p.Index), CaughtUp: caughtUp, Want: q.Config.Replicas}
			if loads == nil {
				loads = f.scratchLoads(in.Unavailable)
			}
			u.Reason = underReason(p, down, in, leastLoaded(loads, p.Replicas) != nil)
			out = append(out, u)
		}
	}
	return out
}

// underReason says why partition p is under-replicated: down lists its
// replicas on nodes that are down; placeable reports whether an available
// node without a replica of p could take one.
func underReason(p Partition, down []string, in PlanInput, placeable bool) string {
	const nowhere = "no node to place a replica on: every available node that is not draining holds one"
	var reasons []string
	if len(p.Joining) > 0 {
		reasons = append(reasons, "catching up on "+strings.Join(p.Joining, ", "))
	}
	for _, id := range down {
		switch {
		case !in.Evacuate[id]:
			reasons = append(reasons, id+" is down (its replica is rebuilt elsewhere if it stays dead past the dead-node timeout)")
		case placeable:
			reasons = append(reasons, id+" is dead past the dead-node timeout: its replica is being rebuilt elsewhere")
		default:
			reasons = append(reasons, id+" is dead past the dead-node timeout and there is "+nowhere)
		}
	}
	if len(reasons) == 0 && !placeable {
		reasons = append(reasons, nowhere)
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "a replica waits to be placed")
	}
	return strings.Join(reasons, "; ")
}

// PlanLeaders returns at most max preferred-leader changes that even out
// preferred-leader counts across placeable nodes (see PlanInput) until
// they differ by at most one. Each step finds, for a node with the
// fewest, the nearest node with at least two more along a chain of hand-
// overs (each passes a partition's role from its preferred leader to a
// caught-up replica on the next node of the chain): the ends change by
// one, the nodes between keep their counts. A partition moving is left
// alone, and no partition is handed over twice in one plan.
func (f *FSM) PlanLeaders(in PlanInput, max int) []ReplicaCmd {
	loads := f.scratchLoads(in.Unavailable)
	var plan []ReplicaCmd
	planned := map[string]bool{}
	var edges leaderEdges // built when first needed
	for len(plan) < max && len(loads) > 1 {
		slices.SortFunc(loads, byLeadersThenID)
		if loads[len(loads)-1].leaders-loads[0].leaders <= 1 {
			break
		}
		if edges == nil {
			edges = f.leaderEdges()
		}
		var chain []ReplicaCmd
		for _, to := range loads {
			if chain = edges.chainTo(to, loads, planned); chain != nil {
				break
			}
		}
		if chain == nil || len(plan)+len(chain) > max {
			break
		}
		for _, c := range chain {
			planned[GroupID(c.QueueID, c.Index)] = true
		}
		plan = append(plan, chain...)
	}
	return plan
}

// leaderEdges indexes the partitions whose preferred role may pass from
// one node to another: [from][to] lists, in queue-name and index order,
// the partitions not moving whose preferred leader is from and which have
// a caught-up replica on to.
type leaderEdges map[string]map[string][]handOver

// leaderEdges builds the index of the catalog's partitions.
func (f *FSM) leaderEdges() leaderEdges {
	out := leaderEdges{}
	for _, q := range f.sortedQueues() {
		for _, p := range q.Partitions {
			if p.Moving() {
				continue
			}
			from := p.Replicas[0]
			if out[from] == nil {
				out[from] = map[string][]handOver{}
			}
			for _, to := range p.Replicas[1:] {
				out[from][to] = append(out[from][to], handOver{q: q, index: p.Index})
			}
		}
	}
	return out
}

// first returns the first partition of [from][to] not planned.
func (e leaderEdges) first(from, to string, planned map[string]bool) (handOver, bool) {
	for _, h := range e[from][to] {
		if !planned[h.q.GroupID(h.index)] {
			return h, true
		}
	}
	return handOver{}, false
}

// chainTo returns the shortest chain of preferred-leader changes
// that ends at to and starts at a node with at least two preferred
// leaderships more than to (and adjusts both counts), or nil. The search
// runs backwards from to: a node can pass the role to another when it is
// the preferred leader of a partition, not moving and not planned, that
// has a caught-up replica on the other.
func (e leaderEdges) chainTo(to *load, loads []*load, planned map[string]bool) []ReplicaCmd {
	via := map[string]handOver{to.id: {}}
	frontier := []*load{to}
	for len(frontier) > 0 {
		var nextFrontier []*load
		for _, x := range frontier {
			for _, y := range loads {
				if _, seen := via[y.id]; seen {
					continue
				}
				h, ok := e.first(y.id, x.id, planned)
				if !ok {
					continue
				}
				h.next = x
				via[y.id] = h
				if y.leaders >= to.leaders+2 {
					return chainFrom(y, via)
				}
				nextFrontier = append(nextFrontier, y)
			}
		}
		frontier = nextFrontier
	}
	return nil
}

// handOver is one link of a chain of preferred-leader changes: the role
// of partition index of q passes to next.
type handOver struct {
	next  *load
	q     *Queue
	index int
}

// chainFrom follows the links recorded in via from start to the chain's
// end (the node whose link is empty), returning the hand-overs, and moves
// one preferred leadership from start to the end in the scratch loads.
func chainFrom(start *load, via map[string]handOver) []ReplicaCmd {
	var out []ReplicaCmd
	at := start
	for via[at.id].next != nil {
		h := via[at.id]
		out = append(out, ReplicaCmd{Queue: h.q.Name, QueueID: h.q.ID, Index: h.index, Node: h.next.id})
		at = h.next
	}
	start.leaders--
	at.leaders++
	return out
}

// byLeadersThenID orders loads by preferred-leader count, then id.
func byLeadersThenID(a, b *load) int {
	if a.leaders != b.leaders {
		return a.leaders - b.leaders
	}
	return strings.Compare(a.id, b.id)
}
