package meta

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// t0 is an arbitrary start time for tests, Unix nanoseconds.
const t0 = int64(1_700_000_000_000_000_000)

// harness drives an FSM through the log path (encode, Apply) with a clock
// that moves one second per command, checking invariants after each.
type harness struct {
	t   testing.TB
	f   *FSM
	now int64
}

func newHarness(t testing.TB) *harness {
	return &harness{t: t, f: New(), now: t0}
}

func (h *harness) apply(c Command) Result {
	h.t.Helper()
	h.now += int64(time.Second)
	c.At = h.now
	data, err := EncodeCommand(c)
	if err != nil {
		h.t.Fatalf("encode %s: %v", c.Type, err)
	}
	r := h.f.Apply(data)
	if err := h.f.check(); err != nil {
		h.t.Fatalf("after %s: invariant: %v", c.Type, err)
	}
	return r
}

func node(id string) Node {
	return Node{ID: id, RaftAddr: id + ":7000", ClientAddr: id + ":7001", HTTPAddr: id + ":7002"}
}

func (h *harness) register(ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		if r := h.apply(registerCmd(node(id))); r.Err != nil {
			h.t.Fatalf("register %s: %v", id, r.Err)
		}
	}
}

// registerN registers nodes n1..nN.
func (h *harness) registerN(n int) {
	h.t.Helper()
	for i := 1; i <= n; i++ {
		h.register(fmt.Sprintf("n%d", i))
	}
}

func registerCmd(n Node) Command {
	return Command{Type: CmdRegisterNode, RegisterNode: &RegisterNodeCmd{Node: n}}
}

func createCmd(name string, cfg QueueConfig) Command {
	return Command{Type: CmdCreateQueue, CreateQueue: &CreateQueueCmd{Name: name, Config: cfg}}
}

func updateCmd(name string, cfg QueueConfig) Command {
	return Command{Type: CmdUpdateQueue, UpdateQueue: &UpdateQueueCmd{Name: name, Config: cfg}}
}

func deleteCmd(name string) Command {
	return Command{Type: CmdDeleteQueue, DeleteQueue: &DeleteQueueCmd{Name: name}}
}

// shape returns the default config with the given partitions and replicas.
func shape(partitions, replicas int) QueueConfig {
	c := DefaultQueueConfig()
	c.Partitions, c.Replicas = partitions, replicas
	return c
}

func (h *harness) create(name string, cfg QueueConfig) Queue {
	h.t.Helper()
	r := h.apply(createCmd(name, cfg))
	if r.Err != nil {
		h.t.Fatalf("create %s: %v", name, r.Err)
	}
	return r.Queue
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

// partitionConfig returns a valid per-partition config that differs from
// the default.
func partitionConfig() fsm.QueueConfig {
	c := fsm.DefaultQueueConfig()
	c.MaxReceives = 3
	c.VisibilityTimeout = time.Minute
	return c
}
