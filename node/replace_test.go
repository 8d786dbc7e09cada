package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
	"github.com/hashicorp/raft"
)

// createReplicated creates queue name with partitions partitions of
// replicas replicas through nd, retrying while the catalog settles.
func createReplicated(t *testing.T, nd *Node, name string, partitions, replicas int) {
	t.Helper()
	c := dialRaw(t, nd.ClientAddr())
	req := &wire.CreateQueueRequest{Name: name, Config: wire.QueueConfig{Partitions: partitions, Replicas: replicas},
		Set: wire.FieldPartitions | wire.FieldReplicas}
	testwait.Until(t, 15*time.Second, "queue "+name+" created", func() bool {
		return c.call(wire.OpCreateQueue, req, &wire.CreateQueueResponse{}) == nil
	})
}

// metaVoters returns the voters of the meta group's configuration as nd
// sees it.
func metaVoters(nd *Node) []string {
	servers, err := nd.meta.servers()
	if err != nil {
		return nil
	}
	var ids []string
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, string(s.ID))
		}
	}
	slices.Sort(ids)
	return ids
}

// A node of three dies for good: past the dead-node timeout its
// partitions of three replicas are reported under-replicated with a
// reason (there is nowhere to put them) and it stops counting in the
// catalog's quorum. A node that joins then takes its place: the
// partitions are placed on it, it becomes a voter of the catalog, and the
// catalog keeps its quorum when one more node is lost (with the dead
// voter still counted, two of four would not be a quorum).
func TestShape_DeadNodeIsReplacedByAJoinedNode(t *testing.T) {
	root := t.TempDir()
	nodes := testNodesIn(t, root, 3, func(c *Config) { c.Placement.DeadNodeTimeout = 2 * time.Second })
	leader := metaLeader(t, nodes)
	createReplicated(t, leader, "orders", 2, 3)
	q := catalogQueue(leader, "orders")
	for i := range q.Partitions {
		sendTo(t, nodes, q, i, 2)
	}
	var dead *Node
	for _, nd := range nodes {
		if nd != leader {
			dead = nd
			break
		}
	}
	dead.Close()
	live := slices.DeleteFunc(slices.Clone(nodes), func(nd *Node) bool { return nd == dead })
	var seen string
	waitForSaying(t, 30*time.Second, "orders reported under-replicated and the dead node demoted", &seen, func() bool {
		ml := metaLeader(t, live)
		l := ml.listNodes()
		seen = fmt.Sprintf("under-replicated %d %+v, meta voters %v", l.UnderReplicatedTotal, l.UnderReplicated, metaVoters(ml))
		return l.UnderReplicatedTotal == 2 && l.UnderReplicated[0].CaughtUp == 2 &&
			strings.Contains(l.UnderReplicated[0].Reason, dead.ID()+" is dead past the dead-node timeout and there is no node") &&
			!slices.Contains(metaVoters(ml), dead.ID())
	})

	joined := startTestNode(t, root, "n9", 0, []string{leader.GossipAddr()}, nil)
	live = append(live, joined)
	start := time.Now()
	waitPlacedAndCaughtUp(t, live, "orders", 2)
	testwait.Until(t, 30*time.Second, "nothing under-replicated", func() bool {
		return metaLeader(t, live).listNodes().UnderReplicatedTotal == 0
	})
	t.Logf("placed again %v after %s joined", time.Since(start).Round(100*time.Millisecond), joined.ID())
	want := slices.Sorted(slices.Values([]string{live[0].ID(), live[1].ID(), joined.ID()}))
	waitForSaying(t, 15*time.Second, "three live meta voters", &seen, func() bool {
		v := metaVoters(metaLeader(t, live))
		seen = fmt.Sprint(v)
		return slices.Equal(v, want)
	})

	ml := metaLeader(t, live)
	var second *Node
	for _, nd := range live {
		if nd != ml {
			second = nd
			break
		}
	}
	second.Close()
	live = slices.DeleteFunc(live, func(nd *Node) bool { return nd == second })
	createReplicated(t, metaLeader(t, live), "after-"+second.ID(), 1, 2)
}
