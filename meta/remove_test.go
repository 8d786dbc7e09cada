package meta

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
)

func removeCmd(id string) Command {
	return Command{Type: CmdRemoveNode, RemoveNode: &RemoveNodeCmd{ID: id}}
}

// Removing a node moves each of its replicas to the least loaded node
// that does not hold the partition yet, marks the newcomer as joining,
// keeps the preferred-leader slot, and bars the id from registering again.
func TestMeta_RemoveNodeReplacesItsReplicas(t *testing.T) {
	h := newHarness(t)
	h.registerN(4)
	q := h.create("orders", shape(4, 3))
	var held int
	for _, p := range q.Partitions {
		if slices.Contains(p.Replicas, "n1") {
			held++
		}
	}
	r := h.apply(removeCmd("n1"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Moved != held {
		t.Fatalf("moved %d replicas, n1 held %d", r.Moved, held)
	}
	got, _ := h.f.Queue("orders")
	if got.Version != q.Version+uint64(held) {
		t.Fatalf("version %d after moving %d replicas (was %d)", got.Version, held, q.Version)
	}
	for i, p := range got.Partitions {
		before := q.Partitions[i]
		if slices.Contains(p.Replicas, "n1") || len(p.Replicas) != 3 {
			t.Fatalf("partition %d replicas %v", i, p.Replicas)
		}
		slot := slices.Index(before.Replicas, "n1")
		if slot < 0 {
			if len(p.Joining) != 0 || !slices.Equal(p.Replicas, before.Replicas) {
				t.Fatalf("partition %d changed without holding n1: %v -> %+v", i, before.Replicas, p)
			}
			continue
		}
		if len(p.Joining) != 1 || p.Replicas[slot] != p.Joining[0] || slices.Contains(before.Replicas, p.Joining[0]) {
			t.Fatalf("partition %d: %v -> %+v: want the newcomer in slot %d, joining", i, before.Replicas, p, slot)
		}
	}
	if len(h.f.Assignments("n1")) != 0 {
		t.Fatal("n1 still has assignments")
	}
	for _, a := range h.f.Assignments("n2") {
		if a.Join != slices.Contains(got.Partitions[a.Index].Joining, "n2") {
			t.Fatalf("assignment %+v: Join does not match the partition", a)
		}
	}
	if _, ok := h.f.Node("n1"); ok || !h.f.Removed("n1") {
		t.Fatal("n1 still registered or not marked removed")
	}
	wantErr(t, h.apply(registerCmd(node("n1"))).Err, ErrNodeRemoved)
	wantErr(t, h.apply(removeCmd("n1")).Err, ErrNodeNotFound)
	wantErr(t, h.apply(removeCmd("nobody")).Err, ErrNodeNotFound)
}

// With no node left to move to, a removal leaves partitions short of
// replicas; the next node to register fills them, as a joining replica.
func TestMeta_RemoveNodeWithoutSpareNodeShrinksThenRefills(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	h.create("orders", shape(2, 3))
	r := h.apply(removeCmd("n3"))
	if r.Err != nil || r.Moved != 0 {
		t.Fatalf("remove: moved %d, %v", r.Moved, r.Err)
	}
	q, _ := h.f.Queue("orders")
	for _, p := range q.Partitions {
		if len(p.Replicas) != 2 || slices.Contains(p.Replicas, "n3") {
			t.Fatalf("partition %d replicas %v", p.Index, p.Replicas)
		}
	}
	h.register("n4")
	q, _ = h.f.Queue("orders")
	for _, p := range q.Partitions {
		if len(p.Replicas) != 3 || !slices.Contains(p.Replicas, "n4") || !slices.Equal(p.Joining, []string{"n4"}) {
			t.Fatalf("partition %d after n4 registered: %+v", p.Index, p)
		}
	}
}

// A node holding a partition's only replica cannot be removed: nothing
// changes.
func TestMeta_RemoveNodeRefusesToLoseAPartition(t *testing.T) {
	h := newHarness(t)
	h.registerN(2)
	h.create("solo", shape(2, 1))
	queues, nodes := h.f.Queues(), h.f.Nodes()
	victim := queues[0].Partitions[0].Replicas[0]
	wantErr(t, h.apply(removeCmd(victim)).Err, ErrInvalidArgument)
	if !reflect.DeepEqual(queues, h.f.Queues()) || !reflect.DeepEqual(nodes, h.f.Nodes()) || h.f.Removed(victim) {
		t.Fatal("a refused removal changed the catalog")
	}
}

// Tombstones and joining replicas survive a snapshot.
func TestMeta_SnapshotKeepsRemovedNodes(t *testing.T) {
	h := newHarness(t)
	h.registerN(4)
	h.create("orders", shape(3, 3))
	if r := h.apply(removeCmd("n2")); r.Err != nil {
		t.Fatal(r.Err)
	}
	var buf bytes.Buffer
	if err := h.f.Snapshot().Persist(&buf); err != nil {
		t.Fatal(err)
	}
	g := New()
	if err := g.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if !g.Removed("n2") || g.check() != nil {
		t.Fatal("restored catalog lost the tombstone or is inconsistent")
	}
	want, _ := h.f.Queue("orders")
	got, _ := g.Queue("orders")
	for i := range want.Partitions {
		if !slices.Equal(want.Partitions[i].Joining, got.Partitions[i].Joining) {
			t.Fatalf("partition %d joining %v, restored %v", i, want.Partitions[i].Joining, got.Partitions[i].Joining)
		}
	}
	var again bytes.Buffer
	g.Snapshot().Persist(&again)
	if !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Fatal("snapshot of the restored catalog differs")
	}
}
