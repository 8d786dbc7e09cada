package node

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// leaderCaller calls partition 0's leader of a queue on a 3-node
// cluster, finding it again after a leadership change: a loaded machine
// may move leadership between calls.
type leaderCaller struct {
	t     *testing.T
	nodes []*Node
	queue string
	c     *rawClient
}

func newLeaderCaller(t *testing.T, queue string) *leaderCaller {
	pl := &leaderCaller{t: t, nodes: testNodes(t, 3), queue: queue}
	var created wire.CreateQueueResponse
	pl.callAny(wire.OpCreateQueue, &wire.CreateQueueRequest{Name: queue}, &created)
	// Until the preferred replica (the first) leads, a node hands it the
	// leadership, and a request committing across the hand-over ends with
	// its outcome unknown: start once it leads.
	testwait.UntilNil(t, 60*time.Second, "the preferred replica leading", func() error {
		var md wire.MetadataResponse
		pl.callAny(wire.OpMetadata, &wire.MetadataRequest{Queue: queue}, &md)
		p := md.Queues[0].Partitions[0]
		if len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
			return fmt.Errorf("leader %q, replicas %v", p.Leader, p.Replicas)
		}
		return nil
	})
	return pl
}

// callAny calls each node in turn until one answers without a retryable
// error.
func (pl *leaderCaller) callAny(op wire.Op, body, out any) {
	pl.t.Helper()
	testwait.UntilNil(pl.t, 30*time.Second, op.String()+" answered by a node", func() error {
		var err error
		for _, nd := range pl.nodes {
			err = dialRaw(pl.t, nd.ClientAddr()).call(op, body, out)
			if err == nil || wire.CodeOf(err) == wire.CodeQueueExists {
				return nil
			}
			if !wire.CodeOf(err).Retryable() && wire.CodeOf(err) != wire.CodeNotLeader {
				pl.t.Fatalf("%s: %v", op, err)
			}
		}
		return err
	})
}

// call sends a request to the partition leader, retrying (at the new
// leader) requests refused before they were proposed.
func (pl *leaderCaller) call(op wire.Op, body, out any) error {
	pl.t.Helper()
	var err error
	testwait.UntilNil(pl.t, 30*time.Second, op.String()+" taken by the partition leader", func() error {
		if pl.c == nil {
			var md wire.MetadataResponse
			pl.callAny(wire.OpMetadata, &wire.MetadataRequest{Queue: pl.queue}, &md)
			if addr := md.Queues[0].Partitions[0].LeaderAddr; addr != "" {
				pl.c = dialRaw(pl.t, addr)
			}
		}
		if pl.c == nil {
			return errors.New("no partition leader known")
		}
		err = pl.c.call(op, body, out)
		if code := wire.CodeOf(err); code == wire.CodeNotLeader || code == wire.CodeUnavailable {
			pl.c = nil
			return err
		}
		return nil
	})
	return err
}

func wantCodes(t *testing.T, got []wire.ItemResult, want ...wire.Code) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("ack results %+v, want codes %v", got, want)
	}
	for i := range want {
		if got[i].Code != want[i] {
			t.Fatalf("ack %d: %+v, want code %v", i, got[i], want[i])
		}
	}
}

func TestNode_ReceiveCarriesAcksAppliedOnceAndFenced(t *testing.T) {
	c := newLeaderCaller(t, "ra")
	var sent wire.SendResponse
	if err := c.call(wire.OpSend, &wire.SendRequest{Queue: "ra", Messages: []wire.Message{{ID: "m1", Body: []byte("1")},
		{ID: "m2", Body: []byte("2")}, {ID: "m3", Body: []byte("3")}, {ID: "m4", Body: []byte("4")}}}, &sent); err != nil {
		t.Fatal(err)
	}
	var first wire.ReceiveResponse
	if err := c.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "ra", Max: 2, Visibility: time.Minute}, &first); err != nil || len(first.Messages) != 2 {
		t.Fatalf("receive: %v %+v", err, first)
	}
	if first.AckResults != nil {
		t.Fatalf("a receive without acks answered ack results %+v", first.AckResults)
	}
	d1, d2 := first.Messages[0].Receipt(), first.Messages[1].Receipt()
	other := wire.Receipt{Partition: 5, Seq: d1.Seq, Attempt: d1.Attempt}
	var second wire.ReceiveResponse
	if err := c.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "ra", Max: 2, Visibility: time.Minute,
		Acks: []wire.Receipt{d1, other, d2}}, &second); err != nil {
		t.Fatal(err)
	}
	wantCodes(t, second.AckResults, wire.CodeOK, wire.CodeInvalidArgument, wire.CodeOK)
	if len(second.Messages) != 2 || second.Messages[0].ID != "m3" || second.Messages[1].ID != "m4" {
		t.Fatalf("second receive leased %+v", second.Messages)
	}
	d3, d4 := second.Messages[0].Receipt(), second.Messages[1].Receipt()

	// A stale attempt is refused and an acked receipt is not acked twice,
	// item by item, while the same receive still leases.
	if err := c.call(wire.OpSend, &wire.SendRequest{Queue: "ra", Messages: []wire.Message{{ID: "m5", Body: []byte("5")}}}, &sent); err != nil {
		t.Fatal(err)
	}
	stale := wire.Receipt{Partition: d3.Partition, Seq: d3.Seq, Attempt: d3.Attempt + 1}
	var third wire.ReceiveResponse
	if err := c.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "ra", Max: 10, Visibility: time.Minute,
		Acks: []wire.Receipt{stale, d1}}, &third); err != nil {
		t.Fatal(err)
	}
	wantCodes(t, third.AckResults, wire.CodeLeaseLost, wire.CodeMessageNotFound)
	if len(third.Messages) != 1 || third.Messages[0].ID != "m5" || third.Messages[0].Attempt != 1 {
		t.Fatalf("third receive leased %+v", third.Messages)
	}

	// The current receipts still ack; afterwards nothing is left, and a
	// receive carrying acks waits for messages like any other.
	var last wire.ReceiveResponse
	start := time.Now()
	if err := c.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "ra", Max: 10, Wait: 300 * time.Millisecond,
		Acks: []wire.Receipt{d3, d4, third.Messages[0].Receipt()}}, &last); err != nil {
		t.Fatal(err)
	}
	wantCodes(t, last.AckResults, wire.CodeOK, wire.CodeOK, wire.CodeOK)
	if len(last.Messages) != 0 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("last receive leased %+v after %v", last.Messages, time.Since(start))
	}
	var bad wire.ReceiveResponse
	err := c.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "ra", Max: 1, Acks: make([]wire.Receipt, 1001)}, &bad)
	if wire.CodeOf(err) != wire.CodeInvalidArgument {
		t.Fatalf("a receive with too many acks: %v", err)
	}
}
