package meta

import (
	"cmp"
	"slices"
	"strings"
)

// load is how much of the catalog a registered node carries. It is derived
// from the queues (recount rebuilds it) and kept up to date incrementally.
type load struct {
	id       string
	replicas int // partition replicas placed on the node, all queues
	leaders  int // of those, partitions where it is the preferred leader
}

// byReplicasThenID orders nodes by their replica count, then by id: a total
// order, since ids are unique.
func byReplicasThenID(a, b *load) int {
	if c := cmp.Compare(a.replicas, b.replicas); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// place chooses the replicas of a new queue's partitions and counts them in
// the loads. For each partition in index order it sorts the registered nodes
// by (replicas already placed on them, id) and takes the first `replicas`;
// of those, the one with the fewest preferred-leader roles (ties going to
// the earlier in that order) becomes the first replica, the preferred
// leader, and the others follow in that order. Loads are updated after each
// partition, so partitions of one queue spread as well as those of
// different queues. Draining nodes get nothing. The caller has checked
// 1 <= replicas <= f.placeable().
func (f *FSM) place(partitions, replicas int) []Partition {
	nodes := make([]*load, 0, len(f.loads))
	for id, l := range f.loads {
		if !f.nodes[id].Draining {
			nodes = append(nodes, l)
		}
	}
	out := make([]Partition, partitions)
	for i := range out {
		// The sort is total, so the map's order above never shows through.
		slices.SortFunc(nodes, byReplicasThenID)
		chosen := nodes[:replicas]
		lead := 0
		for j, l := range chosen {
			if l.leaders < chosen[lead].leaders {
				lead = j
			}
		}
		ids := make([]string, 0, replicas)
		ids = append(ids, chosen[lead].id)
		for j, l := range chosen {
			if j != lead {
				ids = append(ids, l.id)
			}
			l.replicas++
		}
		chosen[lead].leaders++
		out[i] = Partition{Index: i, Replicas: ids}
	}
	return out
}

// unplace removes a queue's partitions from the loads.
func (f *FSM) unplace(q *Queue) {
	for _, p := range q.Partitions {
		for j, id := range p.Replicas {
			l := f.loads[id]
			l.replicas--
			if j == 0 {
				l.leaders--
			}
		}
	}
}

// recount rebuilds the loads from the nodes and queues. Replicas on nodes
// that are not registered (only possible in a corrupt snapshot, which check
// then refuses) are not counted.
func (f *FSM) recount() {
	f.loads = make(map[string]*load, len(f.nodes))
	for id := range f.nodes {
		f.loads[id] = &load{id: id}
	}
	for _, q := range f.queues {
		for _, p := range q.Partitions {
			for j, id := range p.Replicas {
				l := f.loads[id]
				if l == nil {
					continue
				}
				l.replicas++
				if j == 0 {
					l.leaders++
				}
			}
		}
	}
}

// placeable counts the registered nodes that may receive replicas: those
// not draining.
func (f *FSM) placeable() int {
	n := 0
	for _, nd := range f.nodes {
		if !nd.Draining {
			n++
		}
	}
	return n
}
