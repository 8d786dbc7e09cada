package meta

import (
	"slices"
	"strings"
)

// Nodes returns copies of the registered nodes, sorted by id.
func (f *FSM) Nodes() []Node {
	out := make([]Node, 0, len(f.nodes))
	for _, n := range f.sortedNodes() {
		out = append(out, *n)
	}
	return out
}

// Node returns a copy of the node with the given id.
func (f *FSM) Node(id string) (Node, bool) {
	n, ok := f.nodes[id]
	if !ok {
		return Node{}, false
	}
	return *n, true
}

// Queues returns deep copies of the queues, sorted by name.
func (f *FSM) Queues() []Queue {
	out := make([]Queue, 0, len(f.queues))
	for _, q := range f.sortedQueues() {
		out = append(out, q.clone())
	}
	return out
}

// Queue returns a deep copy of the named queue.
func (f *FSM) Queue(name string) (Queue, bool) {
	q, ok := f.queues[name]
	if !ok {
		return Queue{}, false
	}
	return q.clone(), true
}

// Assignments returns every partition replica placed on node nodeID, or
// leaving it (see Partition.Leaving), sorted
// by GroupID (as strings). It is empty for a node hosting nothing or not
// registered. The slices returned are the caller's.
func (f *FSM) Assignments(nodeID string) []Assignment {
	var out []Assignment
	for _, q := range f.queues {
		out = q.appendAssignments(out, nodeID)
	}
	// Group ids are unique, so the order is total whatever the map's order.
	slices.SortFunc(out, func(a, b Assignment) int { return strings.Compare(a.GroupID, b.GroupID) })
	return out
}

// QueueAssignments returns the partition replicas of queue name placed on
// node nodeID, by partition index: what a node must open when that queue
// is created, found without a pass over every queue.
func (f *FSM) QueueAssignments(name, nodeID string) []Assignment {
	q, ok := f.queues[name]
	if !ok {
		return nil
	}
	return q.appendAssignments(nil, nodeID)
}

// appendAssignments appends q's partition replicas placed on nodeID.
func (q *Queue) appendAssignments(out []Assignment, nodeID string) []Assignment {
	for _, p := range q.Partitions {
		leave := slices.Contains(p.Leaving, nodeID)
		if !leave && !slices.Contains(p.Replicas, nodeID) {
			continue
		}
		out = append(out, Assignment{
			Queue: q.Name, QueueID: q.ID, Index: p.Index, GroupID: q.GroupID(p.Index),
			Replicas: slices.Clone(p.Replicas), Config: q.Config.Queue.PartitionShare(p.Index, len(q.Partitions)), Version: q.Version,
			Join: slices.Contains(p.Joining, nodeID), Leave: leave,
			Joining: slices.Clone(p.Joining), Leaving: slices.Clone(p.Leaving), MoveEpoch: p.MoveEpoch,
		})
	}
	return out
}

// sortedQueues returns the queues (not copies) sorted by name.
func (f *FSM) sortedQueues() []*Queue {
	out := make([]*Queue, 0, len(f.queues))
	for _, q := range f.queues {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b *Queue) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// sortedNodes returns the nodes (not copies) sorted by id.
func (f *FSM) sortedNodes() []*Node {
	out := make([]*Node, 0, len(f.nodes))
	for _, n := range f.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *Node) int { return strings.Compare(a.ID, b.ID) })
	return out
}
