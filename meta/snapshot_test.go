package meta

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
)

// busyHarness builds a catalog with several nodes and queues, updated and
// deleted ones included.
func busyHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.registerN(4)
	for i := range 6 {
		h.create(fmt.Sprintf("q%d", i), shape(i%3+1, i%3+1))
	}
	h.apply(updateCmd("q1", QueueConfig{Queue: partitionConfig()}))
	h.apply(deleteCmd("q2"))
	h.register("n5")
	return h
}

func persist(t testing.TB, f *FSM) *bytes.Buffer {
	t.Helper()
	snap := f.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatalf("persist: %v", err)
	}
	return &buf
}

// sameAnswers fails unless a and b answer every view alike.
func sameAnswers(t *testing.T, a, b *FSM) {
	t.Helper()
	if a.Digest() != b.Digest() || a.Clock() != b.Clock() {
		t.Fatal("digests or clocks differ")
	}
	if !reflect.DeepEqual(a.Nodes(), b.Nodes()) || !reflect.DeepEqual(a.Queues(), b.Queues()) {
		t.Fatal("nodes or queues differ")
	}
	for _, n := range a.Nodes() {
		if !reflect.DeepEqual(a.Assignments(n.ID), b.Assignments(n.ID)) {
			t.Fatalf("assignments of %s differ", n.ID)
		}
	}
}

func TestMeta_SnapshotRestoreReproducesStateAndBehaviour(t *testing.T) {
	h := busyHarness(t)
	buf := persist(t, h.f)
	h2 := newHarness(t)
	h2.registerN(2)
	h2.create("replaced", shape(1, 1)) // Restore must discard this
	if err := h2.f.Restore(buf); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := h2.f.check(); err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, h.f, h2.f)
	h2.now = h.now
	for _, c := range []Command{
		createCmd("after", shape(3, 3)), // same id, same placement
		createCmd("q0", shape(1, 1)),
		updateCmd("q3", QueueConfig{Queue: partitionConfig()}),
		deleteCmd("q4"),
		registerCmd(node("n6")),
		createCmd("later", shape(2, 0)),
	} {
		r1, r2 := h.apply(c), h2.apply(c)
		if !reflect.DeepEqual(r1, r2) {
			t.Fatalf("%s: results differ:\n%+v\n%+v", c.Type, r1, r2)
		}
	}
	sameAnswers(t, h.f, h2.f)
}

func TestMeta_SnapshotIsFrozenAndCanonical(t *testing.T) {
	h := busyHarness(t)
	want := h.f.Digest()
	snap := h.f.Snapshot()
	h.apply(deleteCmd("q0"))
	h.apply(updateCmd("q1", shape(2, 2)))
	h.apply(registerCmd(Node{ID: "n1", RaftAddr: "moved:1"}))
	var a, b bytes.Buffer
	if err := snap.Persist(&a); err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(&b); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	snap.Release()
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two persists of one snapshot differ")
	}
	f := New()
	if err := f.Restore(bytes.NewReader(a.Bytes())); err != nil {
		t.Fatal(err)
	}
	if f.Digest() != want {
		t.Fatal("later commands showed through the snapshot")
	}
	// An independently built equal catalog persists to the same bytes.
	if again := persist(t, busyHarness(t).f); !bytes.Equal(again.Bytes(), a.Bytes()) {
		t.Fatal("equal catalogs persist to different bytes")
	}
}

func TestMeta_SnapshotPersistsWhileCommandsApply(t *testing.T) {
	h := busyHarness(t)
	want := h.f.Digest()
	snap := h.f.Snapshot()
	var wg sync.WaitGroup
	var buf bytes.Buffer
	var err error
	wg.Go(func() { err = snap.Persist(&buf) })
	for i := range 20 {
		h.apply(createCmd(fmt.Sprintf("x%d", i), shape(2, 2)))
		h.apply(updateCmd("q0", QueueConfig{Queue: partitionConfig()}))
	}
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	if err := f.Restore(&buf); err != nil || f.Digest() != want {
		t.Fatalf("restore: %v (digest equal: %v)", err, f.Digest() == want)
	}
}

func TestMeta_RestoreRefusesBadSnapshots(t *testing.T) {
	h := busyHarness(t)
	good := persist(t, h.f).Bytes()
	f := busyHarness(t).f
	keep := f.Digest()
	refuse := func(name string, data []byte) {
		t.Helper()
		if err := f.Restore(bytes.NewReader(data)); !errors.Is(err, ErrSnapshotFormat) {
			t.Fatalf("%s: error %v, want ErrSnapshotFormat", name, err)
		}
		if f.Digest() != keep {
			t.Fatalf("%s: a refused restore changed the state", name)
		}
	}
	for n := 0; n < len(good); n++ {
		refuse(fmt.Sprintf("cut at %d", n), good[:n])
	}
	refuse("trailing", append(bytes.Clone(good), 0))
	for name, edit := range map[string]func(s *Snapshot){
		"version":         func(s *Snapshot) { s.header.Version = 2 },
		"unregistered":    func(s *Snapshot) { s.queues[0].Partitions[0].Replicas[0] = "ghost" },
		"twice on a node": func(s *Snapshot) { p := &s.queues[1].Partitions[0]; p.Replicas[1] = p.Replicas[0] },
		"shared id":       func(s *Snapshot) { s.queues[1].ID = s.queues[0].ID },
		"id beyond last":  func(s *Snapshot) { s.header.LastQueueID = 1 },
		"partitions":      func(s *Snapshot) { s.queues[1].Partitions = s.queues[1].Partitions[:1] },
		"replica count":   func(s *Snapshot) { s.queues[0].Config.Replicas = 0 },
		"bad name":        func(s *Snapshot) { s.queues[0].Name = "-x" },
		"bad node":        func(s *Snapshot) { s.nodes[0].RaftAddr = "" },
		"duplicate node":  func(s *Snapshot) { s.nodes[1] = s.nodes[0] },
		"duplicate queue": func(s *Snapshot) { s.queues[1].Name = s.queues[0].Name },
		"bad fsm config":  func(s *Snapshot) { s.queues[0].Config.Queue.MaxMessageBytes = 0 },
		"index":           func(s *Snapshot) { s.queues[1].Partitions[1].Index = 0 },
		"too many queues": func(s *Snapshot) { s.header.Queues = QueuesMax + 1 },
		"negative count":  func(s *Snapshot) { s.header.Nodes = -1 },
		"version zero":    func(s *Snapshot) { s.queues[0].Version = 0 },
	} {
		snap := h.f.Snapshot()
		edit(snap)
		var buf bytes.Buffer
		if err := snap.Persist(&buf); err != nil {
			t.Fatal(err)
		}
		refuse(name, buf.Bytes())
	}
	if err := f.Restore(bytes.NewReader(good)); err != nil || f.Digest() != h.f.Digest() {
		t.Fatalf("good snapshot after refused ones: %v", err)
	}
}
