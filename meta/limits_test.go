package meta

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferrymq/ferry/fsm"
)

func limitedCreate(name string, partitions, maxQueues, maxPartitions int) Command {
	c := createCmd(name, shape(partitions, 1))
	c.CreateQueue.MaxQueues, c.CreateQueue.MaxPartitions = maxQueues, maxPartitions
	return c
}

func TestMeta_CreateRefusesPastQueueLimit(t *testing.T) {
	h := newHarness(t)
	h.register("a")
	for _, name := range []string{"q1", "q2"} {
		if r := h.apply(limitedCreate(name, 1, 2, 0)); r.Err != nil {
			t.Fatalf("create %s: %v", name, r.Err)
		}
	}
	d := h.f.Digest()
	r := h.apply(limitedCreate("q3", 1, 2, 0))
	wantErr(t, r.Err, ErrLimitExceeded)
	if _, ok := h.f.Queue("q3"); ok {
		t.Fatal("q3 created past the limit")
	}
	// Deleting one makes room again.
	h.apply(deleteCmd("q1"))
	if r := h.apply(limitedCreate("q3", 1, 2, 0)); r.Err != nil {
		t.Fatalf("create after delete: %v", r.Err)
	}
	if h.f.Digest() == d {
		t.Fatal("digest unchanged after delete and create")
	}
}

func TestMeta_CreateRefusesPastPartitionLimit(t *testing.T) {
	h := newHarness(t)
	h.register("a")
	if r := h.apply(limitedCreate("q1", 3, 0, 5)); r.Err != nil {
		t.Fatal(r.Err)
	}
	wantErr(t, h.apply(limitedCreate("q2", 3, 0, 5)).Err, ErrLimitExceeded)
	if r := h.apply(limitedCreate("q2", 2, 0, 5)); r.Err != nil {
		t.Fatalf("create up to the limit: %v", r.Err)
	}
	// An entry without limits (written before they existed) is bound only
	// by QueuesMax.
	if r := h.apply(limitedCreate("q3", 4, 0, 0)); r.Err != nil {
		t.Fatalf("create without limits: %v", r.Err)
	}
	data, err := EncodeCommand(limitedCreate("q4", 1, 7, 9))
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCommand(data)
	if err != nil || back.CreateQueue.MaxQueues != 7 || back.CreateQueue.MaxPartitions != 9 {
		t.Fatalf("round trip: %+v %v", back.CreateQueue, err)
	}
}

// A queue-wide max_in_flight must leave each partition a share of at
// least one, and each partition's assignment carries its share.
func TestMeta_MaxInFlightAtLeastThePartitionCount(t *testing.T) {
	c := QueueConfig{Partitions: 4, Replicas: 3, Queue: fsm.DefaultQueueConfig()}
	c.Queue.MaxInFlight = 3
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxInFlight") {
		t.Fatalf("3 in flight over 4 partitions: %v", err)
	}
	c.Queue.MaxInFlight = 10
	if err := c.Validate(); err != nil {
		t.Fatalf("10 in flight over 4 partitions: %v", err)
	}
	c.Queue.MaxDeliveryRate = 2
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxDeliveryRate") {
		t.Fatalf("2 deliveries a second over 4 partitions: %v", err)
	}
	c.Queue.MaxDeliveryRate = 0
	q := &Queue{Name: "q", Config: c}
	for i := range 4 {
		q.Partitions = append(q.Partitions, Partition{Index: i, Replicas: []string{"n1"}})
	}
	var sum int64
	for _, a := range q.appendAssignments(nil, "n1") {
		sum += a.Config.MaxInFlight
		if a.Config.MaxInFlight != c.Queue.PartitionShare(a.Index, 4).MaxInFlight {
			t.Fatalf("partition %d runs with %d", a.Index, a.Config.MaxInFlight)
		}
	}
	if sum != 10 {
		t.Fatalf("shares add up to %d, want 10", sum)
	}
}
