package cluster

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// TestCluster_WipedVoterCannotElectAStaleLeader is the amnesia case the
// chaos suite found: a node acknowledges entries that a second node lacks,
// loses its disk, and comes back while the only node with those entries is
// down. Were it a voter again at once, its vote would elect the stale node
// and the acknowledged messages would be gone. Its replicas abstain
// instead: the partition waits, leaderless, for the node that holds the
// data; when it is back every message is there, and the wiped node
// rejoins as a learner and votes again only once caught up. (With three
// nodes the wiped node's meta replica abstains too, so the catalog waits as
// well; node's TestShape_WipedVoterAbstainsWhileTheCatalogMoves covers a
// partition whose catalog keeps a quorum.)
func TestCluster_WipedVoterCannotElectAStaleLeader(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("amnesia")
	c.createQueue(cl, "amnesia")
	q := cl.Queue("amnesia")
	sendMany(t, q, "early", 5, 1)
	leader := c.waitLeaders("amnesia", 1)[0]
	c.waitConverged("amnesia", 0)
	stale, wiped := followerOf(leader), followerOf(followerOf(leader))

	// The stale node misses the next messages: only leader and wiped hold them.
	c.stop(stale)
	sent := sendMany(t, q, "late", 30, 2)
	c.waitApplied(wiped, "amnesia", 0, c.leaderIndex("amnesia", 0, leader))
	c.stop(wiped)
	c.wipe(wiped)
	c.stop(leader)

	// The stale node and the wiped one: no partition leader may appear.
	c.start(stale)
	c.start(wiped)
	deadline := time.Now().Add(3 * time.Second) // thirty election timeouts
	for time.Now().Before(deadline) {
		for _, i := range []int{stale, wiped} {
			rs, err := c.replicas(i, "amnesia")
			if err != nil {
				continue
			}
			if rs[0].Role == "leader" {
				t.Fatalf("%s leads the partition without the acknowledged messages", c.members[i].cfg.ID)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}

	c.start(leader)
	steps := watchReplica(t, c, wiped, "amnesia", 0)
	c.waitConverged("amnesia", 0)
	steps()
	got := drain(t, c, cl, "amnesia", 0)
	for _, id := range sent {
		if _, ok := got[id]; !ok {
			t.Errorf("acknowledged message %s lost", id)
		}
	}
	if len(got) != len(sent)+5 {
		t.Errorf("drained %d messages, want %d", len(got), len(sent)+5)
	}
	// Rejoined: it votes, so the cluster survives losing the old leader.
	c.stop(leader)
	c.waitLeaders("amnesia", 1)
	mustSend(t, q, client.Message{ID: "after"})
}

// watchReplica records, every 50 ms, the changes in node i's replica of a
// partition (role, suffrage, abstaining, applied index in steps of a
// thousand) with the time since the call; the returned func stops it and
// logs the steps, so a slow rejoin says which step took the time. The
// steps are also logged if the test fails before the func is called.
func watchReplica(t *testing.T, c *testCluster, i int, queue string, partition int) func() {
	t.Helper()
	start := time.Now()
	stop := make(chan struct{})
	var mu sync.Mutex
	var steps []string
	last := ""
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			state := "no replica"
			if rs, err := c.replicas(i, queue); err != nil {
				state = "unreachable"
			} else if r, ok := rs[partition]; ok {
				state = fmt.Sprintf("%s %s abstaining=%v applied~%dk", r.Role, r.Suffrage, r.Abstaining, r.AppliedIndex/1000)
			}
			if state != last {
				last = state
				mu.Lock()
				steps = append(steps, fmt.Sprintf("+%.2fs %s", time.Since(start).Seconds(), state))
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	report := func() {
		once.Do(func() {
			close(stop)
			mu.Lock()
			defer mu.Unlock()
			t.Logf("%s's replica of %s/%d: %s", c.members[i].cfg.ID, queue, partition, strings.Join(steps, "; "))
		})
	}
	t.Cleanup(report)
	return report
}
