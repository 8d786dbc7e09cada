package node

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/partition"
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

// TestConfig_ProposalGatherWait: DefaultConfig gathers, zero turns it off,
// out-of-range values are refused by name, and the value reaches every
// partition's config.
func TestConfig_ProposalGatherWait(t *testing.T) {
	cfg := DefaultConfig("n1", t.TempDir(), "127.0.0.1", 0)
	cfg.Insecure = true
	if cfg.ProposalGatherWait != partition.DefaultGatherWait {
		t.Fatalf("default %v, want %v", cfg.ProposalGatherWait, partition.DefaultGatherWait)
	}
	if got := cfg.partitionConfig(partition.DefaultConfig("g", "n1", t.TempDir())).GatherWait; got != partition.DefaultGatherWait {
		t.Fatalf("partition gets %v", got)
	}
	for _, d := range []time.Duration{-time.Microsecond, partition.GatherWaitMax + time.Microsecond} {
		cfg.ProposalGatherWait = d
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.ProposalGatherWait") {
			t.Errorf("%v: %v, want an invalid config error naming it", d, err)
		}
	}
	cfg.ProposalGatherWait = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("0 (off): %v", err)
	}
	if got := cfg.partitionConfig(partition.DefaultConfig("g", "n1", t.TempDir())).GatherWait; got != 0 {
		t.Fatalf("off, but the partition gets %v", got)
	}
}

// TestConfig_ProposalOverlapItemsMin: DefaultConfig overlaps proposals
// under a deep queue, zero turns it off, out-of-range values are refused
// by name, and the value reaches every partition's config.
func TestConfig_ProposalOverlapItemsMin(t *testing.T) {
	cfg := DefaultConfig("n1", t.TempDir(), "127.0.0.1", 0)
	cfg.Insecure = true
	if cfg.ProposalOverlapItemsMin != partition.DefaultOverlapItemsMin {
		t.Fatalf("default %d, want %d", cfg.ProposalOverlapItemsMin, partition.DefaultOverlapItemsMin)
	}
	for _, n := range []int{-1, fsm.BatchMax + 1} {
		cfg.ProposalOverlapItemsMin = n
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.ProposalOverlapItemsMin") {
			t.Errorf("%d: %v, want an invalid config error naming it", n, err)
		}
	}
	for _, n := range []int{0, 200} {
		cfg.ProposalOverlapItemsMin = n
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		if got := cfg.partitionConfig(partition.DefaultConfig("g", "n1", t.TempDir())).OverlapItemsMin; got != n {
			t.Fatalf("%d set, but the partition gets %d", n, got)
		}
	}
}
