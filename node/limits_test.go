package node

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

// waitMetaLeader waits until the lone node leads a registered meta group.
func waitMetaLeader(t *testing.T, nd *Node) {
	t.Helper()
	testwait.Until(t, 10*time.Second, "the single node to become a registered meta leader", func() bool {
		return nd.meta.caughtUp() && nd.meta.registered() && nd.meta.isLeader()
	})
}

func createRaw(c *rawClient, name string, partitions int) error {
	req := &wire.CreateQueueRequest{Name: name, Config: wire.QueueConfig{Partitions: partitions}, Set: wire.FieldPartitions}
	return c.call(wire.OpCreateQueue, req, &wire.CreateQueueResponse{})
}

func TestNode_QueueCreationIsCappedPerCluster(t *testing.T) {
	nd := startLoneNode(t, 1, func(c *Config) { c.MaxQueues, c.MaxPartitions = 3, 5 })
	waitMetaLeader(t, nd)
	c := dialRaw(t, nd.ClientAddr())
	for i, parts := range []int{1, 2} {
		if err := createRaw(c, fmt.Sprintf("q%d", i), parts); err != nil {
			t.Fatalf("create q%d: %v", i, err)
		}
	}
	// 3 partitions exist: 3 more would pass 5.
	if err := createRaw(c, "wide", 3); !errors.Is(err, wire.ErrLimitExceeded) {
		t.Fatalf("create past the partition limit: %v, want limit exceeded", err)
	}
	if err := createRaw(c, "q2", 2); err != nil {
		t.Fatalf("create up to the partition limit: %v", err)
	}
	if err := createRaw(c, "q3", 1); !errors.Is(err, wire.ErrLimitExceeded) {
		t.Fatalf("create past the queue limit: %v, want limit exceeded", err)
	}
	var md wire.MetadataResponse
	if err := c.call(wire.OpMetadata, &wire.MetadataRequest{}, &md); err != nil || len(md.Queues) != 3 {
		t.Fatalf("metadata: %d queues, %v; want 3", len(md.Queues), err)
	}
}

func TestNode_QueueCreationIsRateLimited(t *testing.T) {
	nd := startLoneNode(t, 1, func(c *Config) { c.QueueCreateRate, c.QueueCreateBurst = 0.001, 2 })
	waitMetaLeader(t, nd)
	c := dialRaw(t, nd.ClientAddr())
	for i := range 2 {
		if err := createRaw(c, fmt.Sprintf("q%d", i), 1); err != nil {
			t.Fatalf("create q%d within the burst: %v", i, err)
		}
	}
	err := createRaw(c, "q2", 1)
	if !errors.Is(err, wire.ErrLimitExceeded) {
		t.Fatalf("create past the burst: %v, want limit exceeded", err)
	}
	var we *wire.Error
	if !errors.As(err, &we) || we.Retryable() {
		t.Fatalf("rate-limit error %v should be a non-retryable wire error", err)
	}
}

func TestNode_TokenBucketRefills(t *testing.T) {
	now := time.Unix(0, 0)
	b := newTokenBucket(10, 2, func() time.Time { return now })
	taken := func(tries int) int {
		n := 0
		for range tries {
			if b.take() {
				n++
			}
		}
		return n
	}
	if n := taken(3); n != 2 {
		t.Fatalf("a burst of 2 allowed %d of 3", n)
	}
	now = now.Add(50 * time.Millisecond) // half a token
	if n := taken(1); n != 0 {
		t.Fatal("took a token before it refilled")
	}
	now = now.Add(50 * time.Millisecond)
	if n := taken(2); n != 1 {
		t.Fatalf("%d tokens after 100ms at 10/s, want 1", n)
	}
	now = now.Add(time.Hour) // refills only up to the burst
	if n := taken(3); n != 2 {
		t.Fatalf("%d tokens after an hour, want the burst of 2", n)
	}
}

func TestNode_ConfigValidatesLimits(t *testing.T) {
	for _, tweak := range []func(*Config){
		func(c *Config) { c.MaxQueues = -1 },
		func(c *Config) { c.MaxQueues = 10_001 },
		func(c *Config) { c.MaxPartitions = -1 },
		func(c *Config) { c.QueueCreateRate = -1 },
		func(c *Config) { c.QueueCreateBurst = -1 },
	} {
		cfg := DefaultConfig("n1", t.TempDir(), "127.0.0.1", 0)
		cfg.Insecure = true
		tweak(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want invalid config", cfg, err)
		}
	}
}

// PeekMax has two definitions that cannot share one (client may import
// only wire, fsm must not import wire): the bound a request is checked
// against on the wire must be the one the FSM enforces.
func TestLimits_PeekMaxIsTheFSMs(t *testing.T) {
	if wire.PeekMax != fsm.PeekMax {
		t.Fatalf("wire.PeekMax %d, fsm.PeekMax %d: a peek the wire check lets through would be refused by the FSM, or the reverse", wire.PeekMax, fsm.PeekMax)
	}
}

// ReceiveWaitMax likewise: the longest long poll the wire promises is the
// one partition waits for (partition knows nothing of the wire).
func TestLimits_ReceiveWaitMaxIsThePartitions(t *testing.T) {
	if wire.ReceiveWaitMax != partition.ReceiveWaitMax {
		t.Fatalf("wire.ReceiveWaitMax %v, partition.ReceiveWaitMax %v", wire.ReceiveWaitMax, partition.ReceiveWaitMax)
	}
}
