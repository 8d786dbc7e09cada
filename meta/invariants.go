package meta

import (
	"fmt"
	"slices"
)

// check verifies the catalog's invariants: valid nodes keyed by id; valid
// queues keyed by name with resolved configs, ids in 1..lastQueueID and
// unique; one partition per configured partition, in index order, each on
// Replicas distinct registered nodes; and loads that match the placement.
// Restore runs it on every snapshot; tests run it after every command.
func (f *FSM) check() error {
	// Sorted visits make the reported violation deterministic.
	for _, n := range f.sortedNodes() {
		if err := n.Validate(); err != nil {
			return err
		}
		if f.nodes[n.ID] != n {
			return fmt.Errorf("node %q keyed under another id", n.ID)
		}
	}
	ids := make(map[uint64]string, len(f.queues))
	for _, q := range f.sortedQueues() {
		if f.queues[q.Name] != q {
			return fmt.Errorf("queue %q keyed under another name", q.Name)
		}
		if err := f.checkQueue(q); err != nil {
			return err
		}
		if other, dup := ids[q.ID]; dup {
			return fmt.Errorf("queues %q and %q share id %d", q.Name, other, q.ID)
		}
		ids[q.ID] = q.Name
	}
	if len(f.removed) > RemovedMax {
		return fmt.Errorf("%d removed nodes, the most kept is %d", len(f.removed), RemovedMax)
	}
	for id := range f.removed {
		if _, ok := f.nodes[id]; ok {
			return fmt.Errorf("node %q is both registered and removed", id)
		}
	}
	return f.checkLoads()
}

func (f *FSM) checkQueue(q *Queue) error {
	if err := ValidateName(q.Name); err != nil {
		return err
	}
	if err := q.Config.Validate(); err != nil {
		return fmt.Errorf("queue %q: %w", q.Name, err)
	}
	if q.Config.Replicas == 0 {
		return fmt.Errorf("queue %q: unresolved replica count", q.Name)
	}
	if q.ID == 0 || q.ID > f.lastQueueID || q.Version == 0 {
		return fmt.Errorf("queue %q: id %d (last %d), version %d", q.Name, q.ID, f.lastQueueID, q.Version)
	}
	if len(q.Partitions) != q.Config.Partitions {
		return fmt.Errorf("queue %q: %d partitions placed, %d configured", q.Name, len(q.Partitions), q.Config.Partitions)
	}
	for i, p := range q.Partitions {
		if p.Index != i {
			return fmt.Errorf("queue %q: partition %d has index %d", q.Name, i, p.Index)
		}
		if len(p.Replicas) < 1 || len(p.Replicas) > q.Config.Replicas {
			return fmt.Errorf("queue %q partition %d: %d replicas, %d configured", q.Name, i, len(p.Replicas), q.Config.Replicas)
		}
		if err := checkMoves(q, p, f.nodes); err != nil {
			return err
		}
		for j, id := range p.Replicas {
			if _, ok := f.nodes[id]; !ok {
				return fmt.Errorf("queue %q partition %d: replica on unregistered node %q", q.Name, i, id)
			}
			for _, other := range p.Replicas[:j] {
				if other == id {
					return fmt.Errorf("queue %q partition %d: node %q holds two replicas", q.Name, i, id)
				}
			}
		}
	}
	return nil
}

// checkLoads compares the incrementally kept loads with a recount.
func (f *FSM) checkLoads() error {
	kept := f.loads
	f.recount()
	fresh := f.loads
	f.loads = kept
	if len(kept) != len(fresh) {
		return fmt.Errorf("loads kept for %d nodes, %d registered", len(kept), len(fresh))
	}
	for _, n := range f.sortedNodes() {
		id := n.ID
		got, want := kept[id], fresh[id]
		if got == nil || *got != *want {
			return fmt.Errorf("load of node %q is %+v, recount says %+v", id, got, want)
		}
	}
	return nil
}

// checkMoves checks a partition's Joining and Leaving lists: joining
// replicas are distinct replicas; leaving ones are distinct registered
// nodes that hold no replica.
func checkMoves(q *Queue, p Partition, nodes map[string]*Node) error {
	for j, id := range p.Joining {
		if !slices.Contains(p.Replicas, id) || slices.Contains(p.Joining[:j], id) {
			return fmt.Errorf("queue %q partition %d: joining replica %q is not a replica or listed twice", q.Name, p.Index, id)
		}
	}
	for j, id := range p.Leaving {
		if _, ok := nodes[id]; !ok || slices.Contains(p.Replicas, id) || slices.Contains(p.Leaving[:j], id) {
			return fmt.Errorf("queue %q partition %d: leaving node %q is unregistered, still a replica or listed twice", q.Name, p.Index, id)
		}
	}
	return nil
}
