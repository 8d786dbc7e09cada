package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// TestCluster_HundredPartitionsRestartTogether stops every node of a
// cluster holding 100 partitions and starts them again: each node opens
// its replicas in parallel, and every partition elects a leader and serves
// the messages it held. The time from the start of the first node to the
// last partition's leader is logged.
func TestCluster_HundredPartitionsRestartTogether(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("wide")
	queues := map[string]int{"wide-a": 64, "wide-b": 36}
	for name, parts := range queues {
		c.createQueue(cl, name, client.Partitions(parts))
	}
	sent := map[string]int{}
	for name, parts := range queues {
		q := cl.Queue(name)
		for i := range 2 * parts {
			mustSend(t, q, client.Message{ID: fmt.Sprintf("%s-%d", name, i), Group: fmt.Sprintf("g%d", i), Body: []byte("x")})
		}
		sent[name] = 2 * parts
	}
	for i := range c.members {
		c.stop(i)
	}
	start := time.Now()
	for i := range c.members {
		c.start(i)
	}
	c.waitMetaLeader()
	for name, parts := range queues {
		c.waitLeaders(name, parts)
	}
	t.Logf("100 partitions x 3 replicas: all leaders %v after the first node started", time.Since(start).Round(time.Millisecond))
	// Every group's raft traffic shares each node's connections: a control
	// and a bulk connection to each peer and one from it, whatever the
	// number of partitions (a snapshot being sent adds one for a moment).
	for i, m := range c.members {
		st := m.n.RaftConnections()
		if most := 4*(clusterSize-1) + 2; st.Accepted+st.Dialed > most || st.Groups != 101 {
			t.Errorf("node %d: %d groups, %d accepted and %d dialed raft connections; want 101 groups and at most %d connections",
				i, st.Groups, st.Accepted, st.Dialed, most)
		}
	}
	for name := range queues {
		st := stats(t, cl, name)
		if st.Ready != int64(sent[name]) {
			t.Fatalf("queue %s: %d ready after the restart, want %d", name, st.Ready, sent[name])
		}
	}
}
