package meta

import "testing"

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
