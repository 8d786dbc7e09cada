package node

import (
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// A request names the settings it sets; 0 is a value like any other (no
// limit, off) and never stands for "the default".
func TestNode_CreateAndUpdateTakeZeroAsAValue(t *testing.T) {
	nd := startLoneNode(t, 1)
	waitMetaLeader(t, nd)
	c := dialRaw(t, nd.ClientAddr())

	err := c.call(wire.OpCreateQueue, &wire.CreateQueueRequest{Name: "zero-replicas", Set: wire.FieldReplicas},
		&wire.CreateQueueResponse{})
	if !errors.Is(err, wire.ErrInvalidConfig) {
		t.Fatalf("create naming replicas 0: %v, want invalid config", err)
	}

	var created wire.CreateQueueResponse
	req := &wire.CreateQueueRequest{Name: "orders", Config: wire.QueueConfig{MaxBytes: 1 << 20},
		Set: wire.FieldMaxReceives | wire.FieldDedupWindow | wire.FieldMaxDepth | wire.FieldMaxBytes}
	if err := c.call(wire.OpCreateQueue, req, &created); err != nil {
		t.Fatalf("create: %v", err)
	}
	want := wire.QueueConfig{Partitions: 1, Replicas: 1, VisibilityTimeout: 30 * time.Second, MaxReceives: 0,
		BackoffBase: time.Second, BackoffMax: 5 * time.Minute, DedupWindow: 0, MaxMessageBytes: 1 << 20,
		MaxDepth: 0, MaxBytes: 1 << 20, MaxDead: 10_000, MaxDeadBytes: 1 << 30, DedupMaxIDs: 1_000_000}
	if created.Queue.Config != want {
		t.Fatalf("created config %+v, want %+v", created.Queue.Config, want)
	}

	var updated wire.UpdateQueueResponse
	upd := &wire.UpdateQueueRequest{Name: "orders", Config: wire.QueueConfig{MaxReceives: 4}, Set: wire.FieldMaxReceives | wire.FieldMaxBytes}
	if err := c.call(wire.OpUpdateQueue, upd, &updated); err != nil {
		t.Fatalf("update: %v", err)
	}
	want.MaxReceives, want.MaxBytes = 4, 0
	if updated.Queue.Config != want {
		t.Fatalf("updated config %+v, want %+v", updated.Queue.Config, want)
	}
}
