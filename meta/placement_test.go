package meta

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// spread counts, per registered node, the replicas it hosts and the
// partitions it is the preferred leader of, and returns max-min of each.
func spread(f *FSM) (replicas, leaders int) {
	hosted := map[string]int{}
	led := map[string]int{}
	for _, q := range f.Queues() {
		for _, p := range q.Partitions {
			led[p.Replicas[0]]++
			for _, id := range p.Replicas {
				hosted[id]++
			}
		}
	}
	span := func(m map[string]int) int {
		var vs []int
		for _, n := range f.Nodes() {
			vs = append(vs, m[n.ID])
		}
		return slices.Max(vs) - slices.Min(vs)
	}
	return span(hosted), span(led)
}

func TestMeta_PlacementSpreadsReplicasAndLeaders(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	for i := range 4 {
		h.create(fmt.Sprintf("q%d", i), shape(3, 3))
	}
	for _, n := range h.f.Nodes() {
		as := h.f.Assignments(n.ID)
		lead := 0
		for _, a := range as {
			if a.Replicas[0] == n.ID {
				lead++
			}
		}
		if len(as) != 12 || lead != 4 {
			t.Fatalf("node %s hosts %d replicas and leads %d; want 12 and 4", n.ID, len(as), lead)
		}
	}
}

func TestMeta_PlacementSpreadsForManyShapes(t *testing.T) {
	for nodes := 1; nodes <= 7; nodes++ {
		for replicas := 1; replicas <= min(nodes, ReplicasMax); replicas++ {
			for _, partitions := range []int{1, 2, 3, 4, 7} {
				h := newHarness(t)
				h.registerN(nodes)
				for i := range 5 {
					h.create(fmt.Sprintf("q%d", i), shape(partitions, replicas))
					r, l := spread(h.f)
					if r > 1 || l > 1 {
						t.Fatalf("%d nodes, %d replicas, %d partitions, after %d queues: replica spread %d, leader spread %d",
							nodes, replicas, partitions, i+1, r, l)
					}
				}
			}
		}
	}
}

func TestMeta_PlacementFollowsTheDocumentedRule(t *testing.T) {
	h := newHarness(t)
	h.register("e", "d", "c", "b", "a") // registration order does not matter
	q := h.create("q", shape(4, 3))
	want := [][]string{
		{"a", "b", "c"}, // all empty: by id
		{"d", "e", "a"}, // d, e carry nothing; d leads (no leaderships yet, first in order)
		{"b", "c", "d"}, // b, c, d, e carry 1, a 2; e ranks after d
		{"e", "a", "b"}, // e carries 1, others 2; a and b already lead once, e not
	}
	for i, p := range q.Partitions {
		if !slices.Equal(p.Replicas, want[i]) {
			t.Fatalf("partition %d on %v, want %v", i, p.Replicas, want[i])
		}
	}
	// A later node takes the next replicas.
	h.register("f")
	q2 := h.create("q2", shape(1, 2))
	if !slices.Equal(q2.Partitions[0].Replicas, []string{"f", "c"}) {
		t.Fatalf("q2 on %v", q2.Partitions[0].Replicas)
	}
}

func TestMeta_PlacementFreesLoadOnDelete(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	h.create("big", shape(6, 1)) // two on each node
	h.create("one", shape(1, 1)) // n1
	h.apply(deleteCmd("big"))
	q := h.create("next", shape(2, 1))
	if q.Partitions[0].Replicas[0] != "n2" || q.Partitions[1].Replicas[0] != "n3" {
		t.Fatalf("placement ignored the freed load: %+v", q.Partitions)
	}
}

func TestMeta_AssignmentsPerNode(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	for i := range 11 { // ids up to 11 so string order differs from numeric
		h.create(fmt.Sprintf("q%02d", i), shape(2, 2))
	}
	total := 0
	for _, n := range h.f.Nodes() {
		as := h.f.Assignments(n.ID)
		total += len(as)
		if !slices.IsSortedFunc(as, func(a, b Assignment) int {
			return strings.Compare(a.GroupID, b.GroupID)
		}) {
			t.Fatalf("assignments of %s not sorted by group id", n.ID)
		}
		for _, a := range as {
			q, _ := h.f.Queue(a.Queue)
			p := q.Partitions[a.Index]
			if a.QueueID != q.ID || a.GroupID != GroupID(q.ID, a.Index) || !slices.Equal(a.Replicas, p.Replicas) ||
				!slices.Contains(a.Replicas, n.ID) || a.Config != q.Config.Queue || a.Version != q.Version {
				t.Fatalf("assignment %+v does not match queue %+v", a, q)
			}
		}
	}
	if total != 11*2*2 {
		t.Fatalf("%d assignments, want %d", total, 11*2*2)
	}
	if as := h.f.Assignments("stranger"); len(as) != 0 {
		t.Fatalf("unknown node has %d assignments", len(as))
	}
}
