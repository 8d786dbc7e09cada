package meta

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ferrymq/ferry/fsm"
)

func TestMeta_RegisterNodeAddsAndUpdatesAddresses(t *testing.T) {
	h := newHarness(t)
	r := h.apply(registerCmd(node("b")))
	if r.Err != nil || r.Node.ID != "b" || r.Node.RegisteredAt != h.now {
		t.Fatalf("register: %+v", r)
	}
	first := h.now
	h.register("a")
	moved := Node{ID: "b", RaftAddr: "10.0.0.2:7000", ClientAddr: "10.0.0.2:7001", RegisteredAt: 42}
	r = h.apply(registerCmd(moved))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := moved
	want.RegisteredAt = first
	if got, ok := h.f.Node("b"); !ok || got != want || r.Node != want {
		t.Fatalf("node b = %+v, result %+v; want %+v", got, r.Node, want)
	}
	d := h.f.Digest()
	h.apply(registerCmd(moved)) // idempotent, apart from the clock
	if got, _ := h.f.Node("b"); got != want {
		t.Fatalf("re-register changed the node: %+v", got)
	}
	ids := []string{}
	for _, n := range h.f.Nodes() {
		ids = append(ids, n.ID)
	}
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("nodes %v", ids)
	}
	if _, ok := h.f.Node("c"); ok {
		t.Fatal("unknown node found")
	}
	if h.f.Digest() == d {
		t.Fatal("the clock moved but the digest did not")
	}
}

func TestMeta_RegisterNodeRefusesBadNodes(t *testing.T) {
	h := newHarness(t)
	for _, n := range []Node{
		{ID: "", RaftAddr: "x:1"},
		{ID: "has space", RaftAddr: "x:1"},
		{ID: "tab\t", RaftAddr: "x:1"},
		{ID: strings.Repeat("n", NodeIDBytesMax+1), RaftAddr: "x:1"},
		{ID: "n1"},
		{ID: "n1", RaftAddr: "x:1", ClientAddr: strings.Repeat("a", AddrBytesMax+1)},
		{ID: "n1", RaftAddr: "x:1", HTTPAddr: "bad addr"},
	} {
		wantErr(t, h.apply(registerCmd(n)).Err, ErrInvalidArgument)
	}
	if len(h.f.Nodes()) != 0 {
		t.Fatal("a bad node was registered")
	}
}

func TestMeta_CreateWithDefaultReplicas(t *testing.T) {
	for _, tc := range []struct{ nodes, want int }{{1, 1}, {2, 2}, {3, 3}, {5, 3}} {
		h := newHarness(t)
		h.registerN(tc.nodes)
		q := h.create("orders", shape(4, 0))
		if q.Config.Replicas != tc.want || q.ID != 1 || q.Version != 1 || q.CreatedAt != h.now || q.UpdatedAt != h.now {
			t.Fatalf("%d nodes: queue %+v", tc.nodes, q)
		}
		if len(q.Partitions) != 4 {
			t.Fatalf("%d partitions", len(q.Partitions))
		}
		for i, p := range q.Partitions {
			if p.Index != i || len(p.Replicas) != tc.want {
				t.Fatalf("%d nodes: partition %+v", tc.nodes, p)
			}
		}
		if got, ok := h.f.Queue("orders"); !ok || got.Config != q.Config {
			t.Fatalf("stored %+v", got)
		}
	}
}

func TestMeta_CreateOnOneNode(t *testing.T) {
	h := newHarness(t)
	h.register("solo")
	q := h.create("jobs", shape(3, 1))
	for _, p := range q.Partitions {
		if !slices.Equal(p.Replicas, []string{"solo"}) {
			t.Fatalf("partition %+v", p)
		}
	}
	if got := len(h.f.Assignments("solo")); got != 3 {
		t.Fatalf("%d assignments", got)
	}
}

func TestMeta_CreateRefusesTooManyReplicas(t *testing.T) {
	h := newHarness(t)
	wantErr(t, h.apply(createCmd("q", shape(1, 0))).Err, ErrNotEnoughNodes)
	h.registerN(2)
	wantErr(t, h.apply(createCmd("q", shape(1, 3))).Err, ErrNotEnoughNodes)
	if _, ok := h.f.Queue("q"); ok {
		t.Fatal("queue created anyway")
	}
	h.create("q", shape(1, 2))
	if q, _ := h.f.Queue("q"); q.ID != 1 {
		t.Fatalf("refused creates consumed ids: %d", q.ID)
	}
}

func TestMeta_CreateRefusesBadNames(t *testing.T) {
	h := newHarness(t)
	h.registerN(1)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true}, {"a", true}, {"0day", true}, {"A.b_c-D9", true},
		{strings.Repeat("x", NameBytesMax), true},
		{"", false}, {strings.Repeat("x", NameBytesMax+1), false},
		{".hidden", false}, {"-flag", false}, {"_x", false},
		{"has space", false}, {"slash/name", false}, {"colon:x", false},
		{"ünï", false}, {"nul\x00", false}, {"star*", false},
	} {
		err := h.apply(createCmd(tc.name, shape(1, 1))).Err
		if tc.ok && err != nil {
			t.Errorf("%q: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidName) {
			t.Errorf("%q: error %v, want ErrInvalidName", tc.name, err)
		}
		if got := ValidateName(tc.name) == nil; got != tc.ok {
			t.Errorf("ValidateName(%q) ok = %v", tc.name, got)
		}
	}
}

func TestMeta_CreateRefusesBadConfigsNamingTheField(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	for _, tc := range []struct {
		edit  func(*QueueConfig)
		field string
	}{
		{func(c *QueueConfig) { c.Partitions = 0 }, "QueueConfig.Partitions = 0: must be between 1 and 64"},
		{func(c *QueueConfig) { c.Partitions = 65 }, "QueueConfig.Partitions = 65"},
		{func(c *QueueConfig) { c.Replicas = -1 }, "QueueConfig.Replicas = -1"},
		{func(c *QueueConfig) { c.Replicas = 6 }, "QueueConfig.Replicas = 6"},
		{func(c *QueueConfig) { c.Queue.MaxReceives = -1 }, "MaxReceives"},
		{func(c *QueueConfig) { c.Queue = fsm.QueueConfig{} }, "MaxMessageBytes"},
	} {
		cfg := shape(2, 3)
		tc.edit(&cfg)
		err := h.apply(createCmd("q", cfg)).Err
		if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, fsm.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %v, want ErrInvalidConfig naming %q", err, tc.field)
		}
	}
	if len(h.f.Queues()) != 0 {
		t.Fatal("a bad config created a queue")
	}
}

func TestMeta_ExistsAndNotFound(t *testing.T) {
	h := newHarness(t)
	h.registerN(1)
	h.create("q", shape(1, 1))
	wantErr(t, h.apply(createCmd("q", shape(2, 1))).Err, ErrQueueExists)
	wantErr(t, h.apply(updateCmd("nope", DefaultQueueConfig())).Err, ErrQueueNotFound)
	wantErr(t, h.apply(deleteCmd("nope")).Err, ErrQueueNotFound)
	if q, _ := h.f.Queue("q"); q.Config.Partitions != 1 {
		t.Fatal("the refused create changed the queue")
	}
}

func TestMeta_UpdateKeepsPlacementAndBumpsVersion(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	before := h.create("q", shape(3, 2))
	cfg := QueueConfig{Queue: partitionConfig()} // 0, 0: unchanged
	r := h.apply(updateCmd("q", cfg))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	after := r.Queue
	if after.Version != 2 || after.UpdatedAt != h.now || after.CreatedAt != before.CreatedAt || after.ID != before.ID {
		t.Fatalf("after update: %+v", after)
	}
	if after.Config != (QueueConfig{Partitions: 3, Replicas: 2, Queue: partitionConfig()}) {
		t.Fatalf("config %+v", after.Config)
	}
	if !slices.EqualFunc(before.Partitions, after.Partitions, func(a, b Partition) bool {
		return a.Index == b.Index && slices.Equal(a.Replicas, b.Replicas)
	}) {
		t.Fatalf("placement moved: %+v -> %+v", before.Partitions, after.Partitions)
	}
	same := shape(3, 2) // explicit equal shape is accepted too
	if r := h.apply(updateCmd("q", same)); r.Err != nil || r.Queue.Version != 3 || r.Queue.Config != same {
		t.Fatalf("update with the same shape: %+v", r)
	}
	for _, a := range h.f.Assignments(before.Partitions[0].Replicas[0]) {
		if a.Version != 3 || a.Config != same.Queue {
			t.Fatalf("assignment not updated: %+v", a)
		}
	}
}

func TestMeta_UpdateRefusesShapeChangesAndBadConfigs(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	h.create("q", shape(3, 2))
	for _, tc := range []struct {
		cfg   QueueConfig
		field string
	}{
		{shape(4, 2), "QueueConfig.Partitions = 4: fixed at creation"},
		{shape(3, 3), "QueueConfig.Replicas = 3: fixed at creation"},
		{QueueConfig{Queue: fsm.QueueConfig{MaxMessageBytes: 1, BackoffMax: -1}}, "BackoffMax"},
	} {
		err := h.apply(updateCmd("q", tc.cfg)).Err
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %v, want ErrInvalidConfig naming %q", err, tc.field)
		}
	}
	q, _ := h.f.Queue("q")
	if q.Version != 1 || q.Config != shape(3, 2) {
		t.Fatalf("refused updates changed the queue: %+v", q)
	}
}

func TestMeta_DeleteThenRecreateGetsFreshIDs(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	old := h.create("q", shape(2, 3))
	h.create("other", shape(1, 1))
	r := h.apply(deleteCmd("q"))
	if r.Err != nil || r.Queue.ID != old.ID || len(r.Queue.Partitions) != 2 {
		t.Fatalf("delete: %+v", r)
	}
	if _, ok := h.f.Queue("q"); ok {
		t.Fatal("deleted queue still there")
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		for _, a := range h.f.Assignments(id) {
			if a.Queue == "q" {
				t.Fatalf("assignment of a deleted queue: %+v", a)
			}
		}
	}
	again := h.create("q", shape(2, 3))
	if again.ID != 3 || again.Version != 1 {
		t.Fatalf("re-created queue: id %d version %d", again.ID, again.Version)
	}
	for i := range 2 {
		if again.GroupID(i) == old.GroupID(i) {
			t.Fatalf("group id %s reused", again.GroupID(i))
		}
	}
}

func TestMeta_ApplyRejectsMalformedCommands(t *testing.T) {
	f := New()
	for _, c := range []Command{
		{Type: 0}, {Type: cmdTypeEnd}, {Type: CmdCreateQueue}, {Type: CmdRegisterNode, DeleteQueue: &DeleteQueueCmd{}},
	} {
		wantErr(t, f.ApplyCommand(c).Err, ErrInvalidArgument)
		if _, err := EncodeCommand(c); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("encode %+v: %v", c, err)
		}
	}
}

func TestMeta_ClockNeverRunsBackwards(t *testing.T) {
	f := New()
	c := registerCmd(node("a"))
	c.At = 100
	f.ApplyCommand(c)
	q := createCmd("q", shape(1, 1))
	q.At = 50 // a new leader whose clock is behind
	r := f.ApplyCommand(q)
	if r.Err != nil || r.Queue.CreatedAt != 100 || f.Clock() != 100 {
		t.Fatalf("created at %d, clock %d", r.Queue.CreatedAt, f.Clock())
	}
}

func TestMeta_ViewsReturnCopies(t *testing.T) {
	h := newHarness(t)
	h.registerN(3)
	h.create("q", shape(2, 3))
	d := h.f.Digest()
	q, _ := h.f.Queue("q")
	q.Partitions[0].Replicas[0] = "evil"
	q.Partitions = q.Partitions[:1]
	qs := h.f.Queues()
	qs[0].Partitions[1].Replicas[1] = "evil"
	qs[0].Config.Replicas = 9
	as := h.f.Assignments("n1")
	as[0].Replicas[0] = "evil"
	ns := h.f.Nodes()
	ns[0].RaftAddr = "evil"
	if h.f.Digest() != d {
		t.Fatal("a view aliased the state")
	}
	if err := h.f.check(); err != nil {
		t.Fatal(err)
	}
}

func TestMeta_GroupIDs(t *testing.T) {
	if got := GroupID(7, 0); got != "q7-0" {
		t.Fatalf("GroupID(7, 0) = %q", got)
	}
	long := GroupID(^uint64(0), PartitionsMax-1)
	if len(long) > 64 || !printable(long) {
		t.Fatalf("longest group id %q", long)
	}
	for _, tc := range []struct {
		id    uint64
		index int
	}{{1, 0}, {7, 63}, {^uint64(0), 5}} {
		id, index, ok := ParseGroupID(GroupID(tc.id, tc.index))
		if !ok || id != tc.id || index != tc.index {
			t.Fatalf("parse(%s) = %d %d %v", GroupID(tc.id, tc.index), id, index, ok)
		}
	}
	for _, s := range []string{MetaGroupID, "", "q", "q1", "q-1", "q1-", "q01-0", "q1-01", "q1-64", "q1--1", "q1-0x", "x1-0", "q+1-0"} {
		if _, _, ok := ParseGroupID(s); ok {
			t.Errorf("ParseGroupID(%q) accepted", s)
		}
	}
}
