package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
)

// TestCluster_RestartCatchUp stops a node, changes the queue while it is
// down (sends, leases, acks), restarts it on its data directory and checks
// that its replicas reach the leaders' applied index and digest; then the
// cluster loses another node and still serves every message.
func TestCluster_RestartCatchUp(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("catchup")
	c.createQueue(cl, "cu", client.Partitions(2))
	q := cl.Queue("cu")
	sent := sendMany(t, q, "before", 40, 4)
	for p := range 2 {
		c.waitConverged("cu", p)
	}
	leaders := c.waitLeaders("cu", 2)
	down := followerOf(leaders[0])
	t.Logf("stopping %s; partition leaders %v", c.members[down].cfg.ID, leaders)
	c.stop(down)

	sent = append(sent, sendMany(t, q, "during", 200, 4)...)
	acked := receiveAndAck(t, q, 30)
	c.restart(down)
	for p := range 2 {
		r := c.waitConverged("cu", p)
		t.Logf("partition %d converged at index %d", p, r.AppliedIndex)
	}
	rs, err := c.replicas(down, "cu")
	if err != nil {
		t.Fatal(err)
	}
	if got := rs[0].Ready + rs[1].Ready; got != int64(len(sent)-len(acked)) {
		t.Fatalf("restarted replicas hold %d ready messages, want %d", got, len(sent)-len(acked))
	}

	// With the restarted node as one of the two left, everything is there.
	c.stop(followerOf(down))
	c.waitLeaders("cu", 2)
	checkDrained(t, drain(t, c, cl, "cu", 0), sent, acked)
}

// TestCluster_WipedNodeRebuiltBySnapshot wipes a node's disk while its
// partition's leader compacts the raft log past what the node had; the node
// comes back with the same id and ports and is rebuilt by a snapshot
// install.
func TestCluster_WipedNodeRebuiltBySnapshot(t *testing.T) {
	c := startCluster(t, options{snapshotThreshold: 64, trailingLogs: 16, snapshotInterval: 100 * time.Millisecond})
	cl := c.dial("wipe")
	c.createQueue(cl, "snap")
	q := cl.Queue("snap")
	leader := c.waitLeaders("snap", 1)[0]
	group := c.waitConverged("snap", 0).Group
	victim := followerOf(leader)
	c.stop(victim)
	c.wipe(victim)

	// Well over SnapshotThreshold + TrailingLogs raft entries: one sender
	// and one acker, so that no two requests share an entry.
	sent := sendMany(t, q, "m", 150, 1)
	acked := receiveAndAck(t, q, 40)
	testwait.UntilNil(c.t, waitLong, "leader snapshot", func() error {
		if len(c.snapshots(leader, group)) == 0 {
			return fmt.Errorf("%s has no snapshot of %s yet", c.members[leader].cfg.ID, group)
		}
		return nil
	})

	c.start(victim)
	c.waitConverged("snap", 0)
	if len(c.snapshots(victim, group)) == 0 {
		t.Fatalf("%s caught up without a snapshot install", c.members[victim].cfg.ID)
	}
	rs, err := c.replicas(victim, "snap")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(sent) - len(acked)); rs[0].Ready != want {
		t.Fatalf("rebuilt replica holds %d ready messages, want %d", rs[0].Ready, want)
	}
	// It keeps following after the install.
	sent = append(sent, sendMany(t, q, "after", 20, 2)...)
	c.waitConverged("snap", 0)

	// The old leader goes: every commit now needs the rebuilt node.
	c.stop(leader)
	c.waitLeaders("snap", 1)
	checkDrained(t, drain(t, c, cl, "snap", 0), sent, acked)
}

// TestCluster_FullRestart stops every node and starts them all again on
// their data directories (raft restores each partition from its newest
// snapshot and log): messages, leases' attempts, dead letters and the
// dedup window survive, and the same client carries on.
func TestCluster_FullRestart(t *testing.T) {
	c := startCluster(t, options{snapshotThreshold: 64, trailingLogs: 16, snapshotInterval: 100 * time.Millisecond})
	cl := c.dial("restart")
	c.createQueue(cl, "durable", client.Partitions(2), client.BackoffBase(20*time.Millisecond))
	q := cl.Queue("durable")
	sent := sendMany(t, q, "m", 120, 1)
	acked := receiveAndAck(t, q, 20)
	ds, err := q.Receive(opContext(t), client.ReceiveOptions{Max: 2, Wait: time.Second})
	if err != nil || len(ds) != 2 {
		t.Fatalf("receive: %v, %d messages", err, len(ds))
	}
	d, dead := ds[0], ds[1]
	if err := d.Nack(opContext(t), client.NackOptions{Immediate: true, Reason: "once"}); err != nil {
		t.Fatal(err)
	}
	if err := dead.Reject(opContext(t), "poison"); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		c.waitConverged("durable", p)
	}
	before := stats(t, cl, "durable")

	for i := range c.members {
		c.stop(i)
	}
	for i := range c.members {
		c.start(i)
	}
	c.waitMetaLeader()
	c.waitLeaders("durable", 2)
	after := stats(t, cl, "durable")
	if after.Ready+after.Delayed != before.Ready+before.Delayed || after.Dead != 1 || after.Counters.Sent != before.Counters.Sent || after.LastSeq != before.LastSeq {
		t.Fatalf("stats before the restart %+v, after %+v", before, after)
	}
	if res := mustSend(t, q, client.Message{ID: sent[len(sent)-1]}); !res.Duplicate {
		t.Fatalf("resend of %s after the restart was stored again: %+v", sent[len(sent)-1], res)
	}
	if l := onlyDead(t, cl, "durable", client.DeadFilter{}); l.ID != dead.ID || l.ReasonText != "poison" || len(l.History) != 1 {
		t.Fatalf("dead letter after the restart: %+v", l)
	}
	got := drain(t, c, cl, "durable", 0)
	checkDrained(t, got, sent, append(acked, dead.ID))
	if got[d.ID] == 0 {
		t.Fatalf("nacked message %s lost", d.ID)
	}
}

// TestCluster_QueueCreatedWhileDown creates a queue (and deletes another)
// while a node is down; after its restart the node runs the new queue's
// replicas, caught up, and has dropped the deleted queue's.
func TestCluster_QueueCreatedWhileDown(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("late")
	c.createQueue(cl, "doomed")
	c.waitConverged("doomed", 0)
	down := followerOf(c.waitMetaLeader())
	c.stop(down)

	if err := cl.DeleteQueue(opContext(t), "doomed"); err != nil {
		t.Fatal(err)
	}
	c.createQueue(cl, "newcomer", client.Partitions(2))
	sent := sendMany(t, cl.Queue("newcomer"), "n", 30, 2)
	c.start(down)

	testwait.UntilNil(c.t, waitLong, "replicas started on the restarted node", func() error {
		rs, err := c.replicas(down, "newcomer")
		if err != nil || len(rs) != 2 {
			return fmt.Errorf("%d replicas (%v)", len(rs), err)
		}
		return nil
	})
	var ready int64
	for p := range 2 {
		c.waitConverged("newcomer", p)
		rs, err := c.replicas(down, "newcomer")
		if err != nil {
			t.Fatal(err)
		}
		ready += rs[p].Ready
	}
	if ready != int64(len(sent)) {
		t.Fatalf("the restarted node holds %d messages, want %d", ready, len(sent))
	}
	testwait.UntilNil(c.t, waitLong, "deleted queue's replica removed", func() error {
		if rs, err := c.replicas(down, "doomed"); err != nil || len(rs) != 0 {
			return fmt.Errorf("%d replicas (%v)", len(rs), err)
		}
		return nil
	})
}

// followerOf returns a node index other than i.
func followerOf(i int) int { return (i + 1) % clusterSize }

// sendMany sends n messages with ids prefix-0.. from workers goroutines,
// one message per request, and returns their ids; any failure fails the
// test.
func sendMany(t *testing.T, q *client.Queue, prefix string, n, workers int) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				ids[i] = fmt.Sprintf("%s-%d", prefix, i)
				if _, err := q.Send(opContext(t), client.Message{ID: ids[i], Body: []byte(ids[i])}); err != nil {
					t.Errorf("send %s: %v", ids[i], err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return ids
}

// receiveAndAck receives n messages and acks them one by one, returning
// their ids.
func receiveAndAck(t *testing.T, q *client.Queue, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		ds, err := q.Receive(opContext(t), client.ReceiveOptions{Max: n - len(out), Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if err := d.Ack(opContext(t)); err != nil {
				t.Fatalf("ack %s: %v", d.ID, err)
			}
			out = append(out, d.ID)
		}
	}
	return out
}

// checkDrained checks that exactly the sent messages that were not acked
// were drained.
func checkDrained(t *testing.T, got map[string]uint64, sent, acked []string) {
	t.Helper()
	for _, id := range sent {
		_, ok := got[id]
		switch {
		case slices.Contains(acked, id) && ok:
			t.Errorf("acked message %s delivered again", id)
		case !slices.Contains(acked, id) && !ok:
			t.Errorf("message %s is missing", id)
		}
	}
	if want := len(sent) - len(acked); len(got) != want {
		t.Errorf("drained %d messages, want %d", len(got), want)
	}
}
