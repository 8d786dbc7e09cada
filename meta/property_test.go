package meta

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// genConfig draws a queue config, now and then an invalid one.
func genConfig(t *rapid.T) QueueConfig {
	c := DefaultQueueConfig()
	c.Partitions = rapid.IntRange(0, 5).Draw(t, "partitions")
	c.Replicas = rapid.IntRange(0, 4).Draw(t, "replicas")
	c.Queue.MaxReceives = rapid.IntRange(-1, 12).Draw(t, "maxReceives")
	c.Queue.VisibilityTimeout = rapid.SampledFrom([]time.Duration{time.Second, time.Minute}).Draw(t, "visibility")
	return c
}

// genCommand draws one command of any type (without its time) over small
// pools of node ids and queue names, so that collisions are frequent.
func genCommand(t *rapid.T) Command {
	name := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "-bad"}).Draw(t, "name")
	switch rapid.IntRange(0, 16).Draw(t, "op") {
	case 0, 1:
		id := rapid.SampledFrom([]string{"n1", "n2", "n3", "n4", "n5", "bad id"}).Draw(t, "node")
		n := node(id)
		n.ClientAddr = rapid.SampledFrom([]string{"c:1", "c:2"}).Draw(t, "addr")
		n.Incarnation = rapid.Uint64Range(0, 2).Draw(t, "incarnation")
		return registerCmd(n)
	case 2, 3, 4, 5:
		return createCmd(name, genConfig(t))
	case 6, 7:
		cfg := genConfig(t)
		if rapid.IntRange(0, 3).Draw(t, "keepShape") > 0 {
			cfg.Partitions, cfg.Replicas = 0, 0
		}
		return updateCmd(name, cfg)
	case 10:
		return removeCmd(rapid.SampledFrom([]string{"n1", "n2", "n3", "n4", "n5", "nobody"}).Draw(t, "removed"))
	case 11, 12, 13, 14, 15:
		return genReplicaCmd(t, name)
	case 16:
		return drainCmd(rapid.SampledFrom([]string{"n1", "n2", "n3", "nobody"}).Draw(t, "drained"), rapid.Bool().Draw(t, "draining"))
	default:
		return deleteCmd(name)
	}
}

// genReplicaCmd draws a move, caught-up, left or prefer-leader command
// over small pools; queue ids 1..4 often match a live queue.
func genReplicaCmd(t *rapid.T, name string) Command {
	ids := []string{"n1", "n2", "n3", "n4", "n5"}
	rc := ReplicaCmd{
		Queue: name, QueueID: rapid.Uint64Range(1, 4).Draw(t, "queueID"), Index: rapid.IntRange(0, 2).Draw(t, "index"),
		Node: rapid.SampledFrom(ids).Draw(t, "replica"), Incarnation: rapid.Uint64Range(0, 2).Draw(t, "incarnation"),
	}
	switch rapid.IntRange(0, 3).Draw(t, "replicaOp") {
	case 0:
		mv := MoveReplicaCmd{Queue: rc.Queue, QueueID: rc.QueueID, Index: rc.Index, From: rc.Node, To: rapid.SampledFrom(ids).Draw(t, "to")}
		return Command{Type: CmdMoveReplica, MoveReplica: &mv}
	case 1:
		return Command{Type: CmdReplicaCaughtUp, ReplicaCaughtUp: &rc}
	case 2:
		return Command{Type: CmdReplicaLeft, ReplicaLeft: &rc}
	default:
		return Command{Type: CmdPreferLeader, PreferLeader: &rc}
	}
}

// TestMeta_PropertyReplicasAgreeAndSnapshotsAreTransparent applies random
// command sequences to two instances through the log path, checking that
// they agree on every result and digest and that the invariants (replicas
// distinct and on registered nodes, ids never reused, loads exact) hold
// after each step. A third instance restores a snapshot of the first taken
// at a random step and must agree from then on.
func TestMeta_PropertyReplicasAgreeAndSnapshotsAreTransparent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := New(), New()
		var c *FSM
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		snapAt := rapid.IntRange(0, steps-1).Draw(t, "snapAt")
		seen := map[uint64]bool{}
		var lastID uint64
		at := t0
		for i := range steps {
			if i == snapAt {
				c = restoredCopy(t, a)
			}
			cmd := genCommand(t)
			at += rapid.Int64Range(-int64(time.Second), int64(time.Minute)).Draw(t, "dt")
			cmd.At = at
			data, err := EncodeCommand(cmd)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			ra, rb := a.Apply(data), b.Apply(data)
			if !sameResult(ra, rb) || (c != nil && !sameResult(ra, c.Apply(data))) {
				t.Fatalf("step %d %s: results differ", i, cmd.Type)
			}
			for _, f := range []*FSM{a, b, c} {
				if f != nil {
					if err := f.check(); err != nil {
						t.Fatalf("step %d %s: %v", i, cmd.Type, err)
					}
				}
			}
			if cmd.Type == CmdCreateQueue && ra.Err == nil {
				if seen[ra.Queue.ID] || ra.Queue.ID <= lastID {
					t.Fatalf("step %d: queue id %d reused or not increasing (last %d)", i, ra.Queue.ID, lastID)
				}
				seen[ra.Queue.ID], lastID = true, ra.Queue.ID
			}
			if a.Digest() != b.Digest() || (c != nil && a.Digest() != c.Digest()) {
				t.Fatalf("step %d %s: digests differ", i, cmd.Type)
			}
		}
		var pa, pc bytes.Buffer
		if err := a.Snapshot().Persist(&pa); err != nil {
			t.Fatal(err)
		}
		if err := c.Snapshot().Persist(&pc); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pa.Bytes(), pc.Bytes()) {
			t.Fatal("snapshots of agreeing instances differ")
		}
	})
}

// restoredCopy persists a snapshot of f and restores it into an instance
// that held unrelated state.
func restoredCopy(t *rapid.T, f *FSM) *FSM {
	var buf bytes.Buffer
	if err := f.Snapshot().Persist(&buf); err != nil {
		t.Fatalf("persist: %v", err)
	}
	g := New()
	g.ApplyCommand(Command{Type: CmdRegisterNode, At: 1, RegisterNode: &RegisterNodeCmd{Node: node("stale")}})
	g.ApplyCommand(Command{Type: CmdCreateQueue, At: 2, CreateQueue: &CreateQueueCmd{Name: "stale", Config: shape(1, 1)}})
	if err := g.Restore(&buf); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if g.Digest() != f.Digest() {
		t.Fatal("restored digest differs")
	}
	return g
}

// sameResult compares results, errors by their text.
func sameResult(x, y Result) bool {
	return x.Type == y.Type && fmt.Sprint(x.Err) == fmt.Sprint(y.Err) &&
		x.Node == y.Node && reflect.DeepEqual(x.Queue, y.Queue)
}
