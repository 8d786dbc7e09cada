package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wire"
)

// startLoneNode starts one node on free ports. With bootstrap 0 it never
// forms a meta group: its catalog stays behind, as a restarted node's is
// until the meta leader reaches it.
func startLoneNode(t *testing.T, bootstrap int, tweak ...func(*Config)) *Node {
	t.Helper()
	return startTestNode(t, t.TempDir(), "lone", bootstrap, nil, func(c *Config) {
		for _, fn := range tweak {
			fn(c)
		}
	})
}

// Found by the chaos suite: a restarted node answered "queue not found"
// for existing queues until the meta leader reached it, and clients took
// that as final (sends and acks failed for good). A node whose catalog is
// behind must answer "unavailable", which clients retry.
func TestNode_CatalogBehindAnswersUnavailable(t *testing.T) {
	nd := startLoneNode(t, 0)
	calls := []struct {
		op   wire.Op
		body any
		out  any
	}{
		{wire.OpMetadata, &wire.MetadataRequest{Queue: "orders"}, &wire.MetadataResponse{}},
		{wire.OpSend, &wire.SendRequest{Queue: "orders", Messages: []wire.Message{{ID: "m1", Body: []byte("x")}}}, &wire.SendResponse{}},
		{wire.OpAck, &wire.AckRequest{Queue: "orders", Receipts: []wire.Receipt{{Seq: 1, Attempt: 1}}}, &wire.AckResponse{}},
		{wire.OpQueueStats, &wire.QueueStatsRequest{Queue: "orders"}, &wire.QueueStatsResponse{}},
	}
	var wg sync.WaitGroup
	for _, call := range calls {
		c := dialRaw(t, nd.ClientAddr())
		wg.Add(1)
		go func() { // each waits out the node's catalog-lag grace
			defer wg.Done()
			if err := c.call(call.op, call.body, call.out); !errors.Is(err, wire.ErrUnavailable) {
				t.Errorf("%s on a node without a current catalog: got %v, want unavailable", call.op, err)
			}
		}()
	}
	wg.Wait()
}

// A node whose catalog is current still reports a missing queue as such.
func TestNode_CaughtUpCatalogReportsMissingQueue(t *testing.T) {
	nd := startLoneNode(t, 1)
	testwait.Until(t, 10*time.Second, "the single-node meta group to catch up", nd.meta.caughtUp)
	c := dialRaw(t, nd.ClientAddr())
	err := c.call(wire.OpMetadata, &wire.MetadataRequest{Queue: "nope"}, &wire.MetadataResponse{})
	if !errors.Is(err, wire.ErrQueueNotFound) {
		t.Fatalf("metadata of a missing queue: got %v, want queue not found", err)
	}
}

// Found by the chaos suite: a queue created just after a three-node
// cluster formed took its default replica count, min(3, registered nodes),
// from a node registry that had only caught up with one member: the queue
// got a single replica, and wiping that node lost it. Until every meta
// group member is registered, a creation with the default replica count is
// refused as unavailable (clients retry); an explicit count is not.
func TestNode_CreateQueueWaitsForRegistry(t *testing.T) {
	nd := startLoneNode(t, 1)
	testwait.Until(t, 10*time.Second, "the single node to register itself", func() bool {
		return nd.meta.caughtUp() && nd.meta.registered()
	})
	// A member of the meta group that the registry does not have yet.
	if err := nd.meta.raft.AddNonvoter("ghost", "127.0.0.1:1", 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, nd.ClientAddr())
	create := func(name string, replicas int) error {
		req := &wire.CreateQueueRequest{Name: name}
		if replicas > 0 {
			req.Config.Replicas, req.Set = replicas, wire.FieldReplicas
		}
		return c.call(wire.OpCreateQueue, req, &wire.CreateQueueResponse{})
	}
	if err := create("orders", 0); !errors.Is(err, wire.ErrUnavailable) {
		t.Fatalf("default-replica create with an unregistered member: got %v, want unavailable", err)
	}
	if err := create("single", 1); err != nil {
		t.Fatalf("create with an explicit replica count: %v", err)
	}
	ghost := meta.Node{ID: "ghost", RaftAddr: "127.0.0.1:1", ClientAddr: "127.0.0.1:2", HTTPAddr: "127.0.0.1:3"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := nd.meta.propose(ctx, meta.Command{Type: meta.CmdRegisterNode, RegisterNode: &meta.RegisterNodeCmd{Node: ghost}}); err != nil {
		t.Fatal(err)
	}
	if err := create("orders", 0); err != nil {
		t.Fatalf("default-replica create once every member is registered: %v", err)
	}
}

// Lookups of a queue answer from a cache of catalog entries: a deleted
// queue, and a queue created again under the same name with another
// layout, must be seen as soon as the catalog has applied the change.
func TestNode_QueueLookupsFollowCatalogChanges(t *testing.T) {
	nd := startLoneNode(t, 1)
	c := dialRaw(t, nd.ClientAddr())
	create := func(partitions int) {
		t.Helper()
		req := &wire.CreateQueueRequest{Name: "orders", Config: wire.QueueConfig{Partitions: partitions, Replicas: 1},
			Set: wire.FieldPartitions | wire.FieldReplicas}
		testwait.UntilNil(t, 10*time.Second, "queue orders created", func() error {
			return c.call(wire.OpCreateQueue, req, &wire.CreateQueueResponse{})
		})
	}
	send := func(partition int) error {
		req := &wire.SendRequest{Queue: "orders", Partition: partition, Messages: []wire.Message{{ID: "m", Body: []byte("x")}}}
		var err error
		testwait.Until(t, 10*time.Second, "an answer from the partition's leader", func() bool {
			err = c.call(wire.OpSend, req, &wire.SendResponse{})
			return !errors.Is(err, wire.ErrNotLeader) && !errors.Is(err, wire.ErrUnavailable)
		})
		return err
	}
	create(1)
	if err := send(0); err != nil {
		t.Fatalf("send to a new queue: %v", err)
	}
	if err := send(2); !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatalf("send to partition 2 of a one-partition queue: %v, want invalid argument", err)
	}
	if err := c.call(wire.OpDeleteQueue, &wire.DeleteQueueRequest{Name: "orders"}, &wire.DeleteQueueResponse{}); err != nil {
		t.Fatal(err)
	}
	if err := send(0); !errors.Is(err, wire.ErrQueueNotFound) {
		t.Fatalf("send to a deleted queue: %v, want queue not found", err)
	}
	create(3)
	if err := send(2); err != nil {
		t.Fatalf("send to partition 2 of the queue created again with 3 partitions: %v", err)
	}
}
