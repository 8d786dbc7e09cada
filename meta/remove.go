package meta

import (
	"fmt"
	"slices"
)

// RemovedMax bounds the removed-node tombstones the catalog keeps; past it
// the oldest tombstone is forgotten (that id may then register again).
const RemovedMax = NodesMax

// RemoveNodeCmd removes node ID from the catalog for good: it is
// unregistered, its id may not register again (a tombstone), and each
// partition replica placed on it moves to another registered node (see
// removeNode).
type RemoveNodeCmd struct {
	ID string `msgpack:"id"`
}

// removeNode unregisters id and re-places its replicas. For each partition
// holding id, in queue-name then index order, the replica's slot goes to
// the registered node with the fewest replicas (ties by id) that does not
// hold the partition yet, and that node is listed in the partition's
// Joining set (it starts empty and is added by the partition's leader).
// When no such node exists the replica is dropped and the partition runs
// with fewer replicas than configured until a node registers. A partition
// whose only replica is on id makes the whole command fail: removing it
// would lose the partition.
func (f *FSM) removeNode(id string) (int, error) {
	if _, ok := f.nodes[id]; !ok {
		return 0, fmt.Errorf("%w: %q", ErrNodeNotFound, id)
	}
	queues := f.sortedQueues()
	for _, q := range queues {
		for _, p := range q.Partitions {
			if len(p.Replicas) == 1 && p.Replicas[0] == id {
				return 0, fmt.Errorf("%w: node %s holds the only replica of queue %q partition %d; delete the queue first",
					ErrInvalidArgument, id, q.Name, p.Index)
			}
		}
	}
	moved := 0
	for _, q := range queues {
		for i := range q.Partitions {
			p := &q.Partitions[i]
			if slices.Contains(p.Leaving, id) {
				p.Leaving = deleteID(p.Leaving, id)
				f.touch(q)
			}
			slot := slices.Index(p.Replicas, id)
			if slot < 0 {
				continue
			}
			p.Replicas = slices.Delete(p.Replicas, slot, slot+1)
			p.Joining = slices.DeleteFunc(p.Joining, func(j string) bool { return j == id })
			if to := f.leastLoadedOutside(slices.Concat(p.Replicas, p.Leaving), id); to != nil {
				p.Replicas = slices.Insert(p.Replicas, slot, to.id)
				p.Joining = append(p.Joining, to.id)
				p.newMoveEpoch()
				to.replicas++
				moved++
			}
			// An emptied list is nil, as a restored snapshot holds it
			// (omitempty): replicas must agree on results to the byte.
			if len(p.Joining) == 0 {
				p.Joining = nil
			}
			if len(p.Replicas) == 0 {
				p.Replicas = nil
			}
			if slot == 0 && len(p.Replicas) > 0 {
				// The preferred-leader role goes to whoever holds slot 0 now.
				f.loads[p.Replicas[0]].leaders++
			}
			q.Version++
			q.UpdatedAt = f.clock
		}
	}
	delete(f.nodes, id)
	delete(f.loads, id)
	f.tombstone(id)
	return moved, nil
}

// leastLoadedOutside returns the registered node, other than skip, with
// the fewest replicas (ties by id) among those not in held and not
// draining; nil if none.
func (f *FSM) leastLoadedOutside(held []string, skip string) *load {
	var best *load
	for id, l := range f.loads {
		if id == skip || slices.Contains(held, id) || f.nodes[id].Draining {
			continue
		}
		if best == nil || byReplicasThenID(l, best) < 0 {
			best = l
		}
	}
	return best
}

// tombstone records that id was removed, forgetting the oldest tombstone
// past RemovedMax.
func (f *FSM) tombstone(id string) {
	if len(f.removed) >= RemovedMax {
		oldest := ""
		for rid, at := range f.removed {
			if oldest == "" || at < f.removed[oldest] || (at == f.removed[oldest] && rid < oldest) {
				oldest = rid
			}
		}
		delete(f.removed, oldest)
	}
	f.removed[id] = f.clock
}

// fillUnderReplicated places a replica on the newly registered node id in
// every partition that has fewer replicas than its queue's config (after a
// node removal found no node to move them to). It joins as a Joining
// replica.
func (f *FSM) fillUnderReplicated(id string) {
	l := f.loads[id]
	if f.nodes[id].Draining {
		return
	}
	for _, q := range f.sortedQueues() {
		changed := false
		for i := range q.Partitions {
			p := &q.Partitions[i]
			if len(p.Replicas) >= q.Config.Replicas || slices.Contains(p.Replicas, id) || slices.Contains(p.Leaving, id) {
				continue
			}
			p.Replicas = append(p.Replicas, id)
			p.Joining = append(p.Joining, id)
			p.newMoveEpoch()
			l.replicas++
			changed = true
		}
		if changed {
			q.Version++
			q.UpdatedAt = f.clock
		}
	}
}

// Removed reports whether node id was removed (and not forgotten since).
func (f *FSM) Removed(id string) bool {
	_, ok := f.removed[id]
	return ok
}

// RemovedNodes returns the ids of removed nodes, sorted.
func (f *FSM) RemovedNodes() []string {
	out := make([]string, 0, len(f.removed))
	for id := range f.removed {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
