package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
)

// TestCluster_QueueAdmin checks admission control, queue settings and the
// queue lifecycle operations through the client.
func TestCluster_QueueAdmin(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("admin")
	t.Run("StatsOfEveryPartition", func(t *testing.T) { testStatsAllPartitions(t, c.with(t), cl) })
	t.Run("Backpressure", func(t *testing.T) { testBackpressure(t, c.with(t), cl) })
	t.Run("MessageTooLarge", func(t *testing.T) { testTooLarge(t, c.with(t), cl) })
	t.Run("UpdateQueue", func(t *testing.T) { testUpdateQueue(t, c.with(t), cl) })
	t.Run("PurgeAndDelete", func(t *testing.T) { testPurgeAndDelete(t, c.with(t), cl) })
}

// testStatsAllPartitions: a queue's stats cover every partition, whichever
// node leads it and whichever node the client asks first.
func testStatsAllPartitions(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "wide", client.Partitions(4))
	leaders := c.waitLeaders("wide", 4)
	// A client that knows only a node leading none of the partitions (or
	// as few as possible) sees the partitions led elsewhere.
	far := 0
	for i := range c.members {
		if slices.Index(leaders, i) < 0 {
			far = i
		}
	}
	q := c.dialNodes("far", far).Queue("wide")
	msgs := make([]client.Message, 40)
	for i := range msgs {
		msgs[i] = client.Message{ID: fmt.Sprintf("w%d", i)}
	}
	res, err := q.SendBatch(opContext(t), msgs)
	if err != nil {
		t.Fatal(err)
	}
	perPart := map[int]int64{}
	for _, r := range res {
		perPart[r.Partition]++
	}
	st, err := c.dialNodes("stats", far).QueueStats(opContext(t), "wide")
	if err != nil || len(st.Partitions) != 4 {
		t.Fatalf("stats: %v, %d partitions", err, len(st.Partitions))
	}
	for _, p := range st.Partitions {
		if err := p.Err(); err != nil || p.Ready != perPart[p.Partition] {
			t.Errorf("partition %d: ready %d, want %d (err %v)", p.Partition, p.Ready, perPart[p.Partition], err)
		}
	}
	if st.Total().Ready != 40 {
		t.Errorf("total ready %d, want 40", st.Total().Ready)
	}
}

// testBackpressure: a send over max_depth is refused with ErrQueueFull and
// nothing of it is stored.
func testBackpressure(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "bounded", client.MaxDepth(3))
	q := cl.Queue("bounded")
	for i := range 3 {
		mustSend(t, q, client.Message{ID: fmt.Sprintf("m%d", i)})
	}
	_, err := q.Send(opContext(t), client.Message{ID: "over", Body: []byte("x")})
	if !errors.Is(err, client.ErrQueueFull) || errors.Is(err, client.ErrUnconfirmed) {
		t.Fatalf("send over max_depth: %v, want ErrQueueFull", err)
	}
	if st := stats(t, cl, "bounded"); st.Ready != 3 || st.Counters.Sent != 3 {
		t.Fatalf("stats after the refusal: ready %d sent %d", st.Ready, st.Counters.Sent)
	}
	d := receiveOne(t, q, client.ReceiveOptions{})
	if err := d.Ack(opContext(t)); err != nil {
		t.Fatal(err)
	}
	// The refused id was not remembered: it is accepted now, not a duplicate.
	if res := mustSend(t, q, client.Message{ID: "over"}); res.Duplicate {
		t.Fatalf("the refused message had been stored: %+v", res)
	}
	if _, err := q.Send(opContext(t), client.Message{ID: "over2"}); !errors.Is(err, client.ErrQueueFull) {
		t.Fatalf("send over max_depth again: %v", err)
	}
}

// testTooLarge: body plus headers over max_message_bytes is refused.
func testTooLarge(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "small", client.MaxMessageBytes(1024))
	q := cl.Queue("small")
	big := make([]byte, 1025)
	if _, err := q.Send(opContext(t), client.Message{ID: "big", Body: big}); !errors.Is(err, client.ErrMessageTooLarge) {
		t.Fatalf("send of 1025 bytes: %v, want ErrMessageTooLarge", err)
	}
	headers := map[string]string{"h": strings.Repeat("v", 600)}
	if _, err := q.Send(opContext(t), client.Message{ID: "heavy", Headers: headers, Body: big[:600]}); !errors.Is(err, client.ErrMessageTooLarge) {
		t.Fatalf("send of 600 bytes with 601 bytes of headers: %v, want ErrMessageTooLarge", err)
	}
	mustSend(t, q, client.Message{ID: "fits", Body: big[:1000]})
	if st := stats(t, cl, "small"); st.Ready != 1 || st.Counters.Sent != 1 {
		t.Fatalf("stats: ready %d sent %d, want 1 and 1", st.Ready, st.Counters.Sent)
	}
}

// testUpdateQueue: a changed visibility timeout reaches the partition and
// governs the leases it grants.
func testUpdateQueue(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "tuned", client.BackoffBase(20*time.Millisecond))
	q := cl.Queue("tuned")
	mustSend(t, q, client.Message{ID: "before"})
	d := receiveOne(t, q, client.ReceiveOptions{})
	if left := time.Until(d.Deadline); left < 20*time.Second {
		t.Fatalf("default lease ends in %v, want about 30s", left)
	}
	if err := d.Ack(opContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := cl.UpdateQueue(opContext(t), "tuned", client.VisibilityTimeout(300*time.Millisecond)); err != nil {
		t.Fatalf("update: %v", err)
	}
	qs, err := cl.ListQueues(opContext(t), "tuned")
	if err != nil || len(qs) != 1 || qs[0].Config.VisibilityTimeout != 300*time.Millisecond || qs[0].Config.BackoffBase != 20*time.Millisecond {
		t.Fatalf("listed after update: %v %+v", err, qs)
	}
	// The partition leader adopts the catalog's config shortly after the
	// change; until it does, receives still get the old lease.
	var short *client.Delivery
	testwait.UntilNil(c.t, waitLong, "new visibility in force", func() error {
		mustSend(t, q, client.Message{})
		d := receiveOne(t, q, client.ReceiveOptions{})
		if time.Until(d.Deadline) < 5*time.Second {
			short = d
			return nil
		}
		return errors.Join(errors.New("lease still long"), d.Ack(opContext(t)))
	})
	back := receiveOne(t, q, client.ReceiveOptions{Wait: 5 * time.Second})
	if back.ID != short.ID || back.Attempt != 2 {
		t.Fatalf("after the short lease got %s attempt %d, want %s attempt 2", back.ID, back.Attempt, short.ID)
	}
}

// testPurgeAndDelete: purge drops ready messages but keeps leased ones and
// dead letters; a deleted queue is gone everywhere.
func testPurgeAndDelete(t *testing.T, c *testCluster, cl *client.Client) {
	c.createQueue(cl, "scratch")
	q := cl.Queue("scratch")
	for i := range 6 {
		mustSend(t, q, client.Message{ID: fmt.Sprintf("s%d", i)})
	}
	ds, err := q.Receive(opContext(t), client.ReceiveOptions{Max: 2})
	if err != nil || len(ds) != 2 {
		t.Fatalf("receive: %v %d", err, len(ds))
	}
	if err := ds[0].Reject(opContext(t), "bad"); err != nil {
		t.Fatal(err)
	}
	n, err := cl.Purge(opContext(t), "scratch")
	if err != nil || n != 4 {
		t.Fatalf("purge: %d, %v; want 4", n, err)
	}
	if st := stats(t, cl, "scratch"); st.Ready != 0 || st.InFlight != 1 || st.Dead != 1 || st.Counters.Purged != 4 {
		t.Fatalf("stats after purge: %+v", st)
	}
	if err := ds[1].Ack(opContext(t)); err != nil {
		t.Fatalf("ack of a lease that survived the purge: %v", err)
	}

	if err := cl.DeleteQueue(opContext(t), "scratch"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	ctx := opContext(t)
	if _, err := q.Send(ctx, client.Message{ID: "late"}); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("send to a deleted queue: %v", err)
	}
	if _, err := q.Receive(ctx, client.ReceiveOptions{}); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("receive from a deleted queue: %v", err)
	}
	if _, err := cl.QueueStats(ctx, "scratch"); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("stats of a deleted queue: %v", err)
	}
	if _, err := cl.DeadLetters(ctx, "scratch", client.DeadFilter{}); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("dead letters of a deleted queue: %v", err)
	}
	if err := cl.DeleteQueue(ctx, "scratch"); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	qs, err := cl.ListQueues(ctx, "")
	if err != nil || slices.ContainsFunc(qs, func(qi client.QueueInfo) bool { return qi.Name == "scratch" }) {
		t.Fatalf("list after delete: %v %+v", err, qs)
	}
	testwait.UntilNil(c.t, waitLong, "replicas removed", func() error {
		for _, i := range c.running() {
			if rs, err := c.replicas(i, "scratch"); err != nil || len(rs) > 0 {
				return fmt.Errorf("%s still runs %d replicas (%v)", c.members[i].cfg.ID, len(rs), err)
			}
		}
		return nil
	})
	// The name can be used again, for a fresh queue.
	c.createQueue(cl, "scratch")
	if st := stats(t, cl, "scratch"); st.Ready != 0 || st.Dead != 0 || st.Counters.Sent != 0 {
		t.Fatalf("re-created queue is not empty: %+v", st)
	}
}
