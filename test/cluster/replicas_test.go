package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/internal/testwait"
)

// replica is one entry of a node's GET /v1/replicas answer.
type replica = jsonview.Replica

// replicas returns node i's replicas of queue, by partition.
func (c *testCluster) replicas(i int, queue string) (map[int]replica, error) {
	var all []replica
	if err := c.getJSON(i, "/v1/replicas", &all); err != nil {
		return nil, err
	}
	out := map[int]replica{}
	for _, r := range all {
		if r.Queue == queue {
			out[r.Partition] = r
		}
	}
	return out, nil
}

// waitLeaders waits until each of the queue's partitions has a leader
// among the running nodes and returns the leader's node index per
// partition.
func (c *testCluster) waitLeaders(queue string, partitions int) []int {
	c.t.Helper()
	leaders := make([]int, partitions)
	testwait.UntilNil(c.t, waitLong, "leaders of "+queue, func() error {
		for p := range leaders {
			leaders[p] = -1
		}
		for _, i := range c.running() {
			rs, err := c.replicas(i, queue)
			if err != nil {
				return err
			}
			for p, r := range rs {
				if p < partitions && r.Role == "leader" {
					leaders[p] = i
				}
			}
		}
		for p, l := range leaders {
			if l < 0 {
				return fmt.Errorf("partition %d has no leader", p)
			}
		}
		return nil
	})
	return leaders
}

// waitConverged waits until every running node holds a replica of the
// partition and all of them report the same applied index and digest; it
// returns that replica state (as the leader reports it).
func (c *testCluster) waitConverged(queue string, partition int) replica {
	c.t.Helper()
	var agreed replica
	testwait.UntilNil(c.t, waitLong, fmt.Sprintf("replicas of %s/%d converge", queue, partition), func() error {
		var seen []replica
		leaders := 0
		for _, i := range c.running() {
			rs, err := c.replicas(i, queue)
			if err != nil {
				return err
			}
			r, ok := rs[partition]
			if !ok {
				return fmt.Errorf("%s has no replica", c.members[i].cfg.ID)
			}
			if r.Role == "leader" {
				leaders++
				agreed = r
			}
			seen = append(seen, r)
		}
		if leaders != 1 {
			return fmt.Errorf("%d leaders", leaders)
		}
		for k, r := range seen {
			if r.Suffrage != "voter" || r.Abstaining {
				// A replica rejoining (its node lost its data) or moving in
				// counts once it is a voter that may vote.
				return fmt.Errorf("replica on %s is %s, abstaining %v", c.members[c.running()[k]].cfg.ID, r.Suffrage, r.Abstaining)
			}
			id := c.members[c.running()[k]].cfg.ID
			if !slices.Contains(agreed.Voters, id) {
				return fmt.Errorf("leader lists voters %v, without %s", agreed.Voters, id)
			}
			if r.Role != "leader" && len(r.Voters) > 0 {
				return fmt.Errorf("follower on %s lists voters %v (the leader's alone does)", id, r.Voters)
			}
			if r.AppliedIndex != agreed.AppliedIndex || r.Digest != agreed.Digest {
				return fmt.Errorf("replica on %s at index %d digest %.12s, leader at %d %.12s",
					c.members[c.running()[k]].cfg.ID, r.AppliedIndex, r.Digest, agreed.AppliedIndex, agreed.Digest)
			}
		}
		return nil
	})
	return agreed
}

// leaderIndex returns the applied index of node i's replica of a
// partition.
func (c *testCluster) leaderIndex(queue string, partition, i int) uint64 {
	c.t.Helper()
	rs, err := c.replicas(i, queue)
	if err != nil {
		c.t.Fatal(err)
	}
	return rs[partition].AppliedIndex
}

// waitApplied waits until node i's replica of a partition has applied the
// raft log up to index.
func (c *testCluster) waitApplied(i int, queue string, partition int, index uint64) {
	c.t.Helper()
	testwait.UntilNil(c.t, waitLong, fmt.Sprintf("%s applies %s/%d up to %d", c.members[i].cfg.ID, queue, partition, index), func() error {
		rs, err := c.replicas(i, queue)
		if err != nil {
			return err
		}
		if r := rs[partition]; r.AppliedIndex < index {
			return fmt.Errorf("applied %d", r.AppliedIndex)
		}
		return nil
	})
}

// snapshots returns the raft snapshots node i keeps of a partition group.
func (c *testCluster) snapshots(i int, group string) []string {
	entries, _ := os.ReadDir(filepath.Join(c.members[i].cfg.DataDir, "partitions", group, "snapshots"))
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "" && e.Name()[0] != '.' {
			out = append(out, e.Name())
		}
	}
	return out
}

// opContext returns a context for one client call or a short sequence of
// them, cancelled when the test ends.
func opContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// createQueue creates a queue and waits until its partitions have leaders.
func (c *testCluster) createQueue(cl *client.Client, name string, settings ...client.QueueSetting) {
	c.t.Helper()
	if err := cl.CreateQueue(opContext(c.t), name, settings...); err != nil {
		c.t.Fatalf("create queue %s: %v", name, err)
	}
	qs, err := cl.ListQueues(opContext(c.t), name)
	if err != nil || len(qs) == 0 || qs[0].Name != name {
		c.t.Fatalf("list queue %s after creating it: %v %+v", name, err, qs)
	}
	c.waitLeaders(name, qs[0].Config.Partitions)
}

// mustSend sends one message and fails the test if it is not confirmed.
func mustSend(t *testing.T, q *client.Queue, m client.Message) client.SendResult {
	t.Helper()
	res, err := q.Send(opContext(t), m)
	if err != nil {
		t.Fatalf("send %q to %s: %v", m.ID, q.Name(), err)
	}
	return res
}

// receiveOne receives exactly one message within wait, failing otherwise.
func receiveOne(t *testing.T, q *client.Queue, opts client.ReceiveOptions) *client.Delivery {
	t.Helper()
	ds, err := q.Receive(opContext(t), opts)
	if err != nil {
		t.Fatalf("receive from %s: %v", q.Name(), err)
	}
	if len(ds) != 1 {
		t.Fatalf("receive from %s: got %d messages, want 1", q.Name(), len(ds))
	}
	return ds[0]
}

// receiveNone checks that nothing is delivered within wait.
func receiveNone(t *testing.T, q *client.Queue, wait time.Duration) {
	t.Helper()
	ds, err := q.Receive(opContext(t), client.ReceiveOptions{Max: 10, Wait: wait})
	if err != nil {
		t.Fatalf("receive from %s: %v", q.Name(), err)
	}
	for _, d := range ds {
		t.Errorf("unexpected delivery from %s: id %s seq %d attempt %d", q.Name(), d.ID, d.Seq, d.Attempt)
	}
}

// stats returns the queue's totals, failing the test if any partition
// could not report.
func stats(t *testing.T, cl *client.Client, queue string) client.PartitionStats {
	t.Helper()
	return completeStats(t, opContext(t), cl, queue).Total()
}

// completeStats asks for a queue's stats until every partition's figures
// are in (a partition between leaders answers with an error code for a
// moment), and fails the test when ctx ends first.
func completeStats(t *testing.T, ctx context.Context, cl *client.Client, queue string) client.Stats {
	t.Helper()
	var st client.Stats
	untilNil(t, ctx, "the stats of every partition of "+queue, func() error {
		var err error
		if st, err = cl.QueueStats(ctx, queue); err == nil {
			err = st.Err()
		}
		return err
	})
	return st
}

// GET /v1/replicas/summary counts a node's replicas by role: with a
// queue of 3 partitions on 3 nodes, each node holds 3 replicas, the
// nodes' leaders add up to 3 and every replica knows its leader; once a
// node is stopped, the survivors' counts still add up to 3 leaders.
func TestCluster_ReplicaSummaryCountsRoles(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("summary")
	c.createQueue(cl, "sum", client.Partitions(3))
	c.waitLeaders("sum", 3)
	type summary struct {
		Replicas, Leaders, Followers, Candidates int
		WithoutLeader                            int `json:"without_leader"`
	}
	settled := func(nodes []int) error {
		leaders := 0
		for _, i := range nodes {
			var s summary
			if err := c.getJSON(i, "/v1/replicas/summary", &s); err != nil {
				return err
			}
			if s.Replicas != 3 || s.Leaders+s.Followers+s.Candidates != 3 || s.WithoutLeader != 0 {
				return fmt.Errorf("node %d: %+v", i, s)
			}
			leaders += s.Leaders
		}
		if leaders != 3 {
			return fmt.Errorf("%d leaders in all, want 3", leaders)
		}
		return nil
	}
	testwait.UntilNil(c.t, waitLong, "summaries of 3 settled partitions", func() error { return settled(c.running()) })
	c.stop(0)
	testwait.UntilNil(c.t, waitLong, "summaries after a node stopped", func() error { return settled(c.running()) })
}
