package node

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// safeToStopSays returns n's answer to safe-to-stop for id.
func safeToStopSays(t *testing.T, n *Node, id string) *wire.SafeToStopResponse {
	t.Helper()
	ans, err := n.safeToStop(&wire.SafeToStopRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

// Safe-to-stop waits for the other replicas' nodes to have opened their
// replicas and for every replica to have caught up with its leader, as
// the leader tables announce: a node restarted a moment ago is alive in
// gossip well before its replicas can vote, and stopping the next one
// then would leave its partitions without a quorum.
func TestSafeToStop_WaitsForReplicasOpenedAndCaughtUp(t *testing.T) {
	root := t.TempDir()
	nodes := testNodesIn(t, root, 3, nil)
	leader := metaLeader(t, nodes)
	createReplicated(t, leader, "orders", 1, 3)
	var seen string
	waitForSaying(t, 15*time.Second, "n3 safe to stop", &seen, func() bool {
		ans := safeToStopSays(t, leader, "n3")
		seen = strings.Join(ans.Reasons, "; ")
		return ans.Safe
	})

	// Tables that no real announcement can replace (the newest start).
	inject := func(id string, lt leaderTable) {
		lt.Node, lt.Start = id, math.MaxInt64
		leader.members.mu.Lock()
		leader.members.decoded[id] = lt
		leader.members.mu.Unlock()
	}
	other := "n2"
	if leader.ID() == "n2" {
		other = "n1"
	}
	inject(other, leaderTable{Opening: true})
	ans := safeToStopSays(t, leader, "n3")
	if ans.Safe || !slices.ContainsFunc(ans.Reasons, func(r string) bool { return strings.Contains(r, other+" has not opened") }) {
		t.Fatalf("with %s still opening: %+v", other, ans)
	}
	inject(other, leaderTable{Behind: []string{other}})
	ans = safeToStopSays(t, leader, "n3")
	if ans.Safe || !slices.ContainsFunc(ans.Reasons, func(r string) bool { return strings.Contains(r, other+" has replicas catching up") }) {
		t.Fatalf("with a replica on %s behind: %+v", other, ans)
	}
}

// A partition leader finds a follower behind once the commit index has
// run more than behindSlack entries past what the follower holds, and
// caught up again once it is back.
func TestSafeToStop_LeaderSeesAFollowerBehind(t *testing.T) {
	root := t.TempDir()
	nodes := testNodesIn(t, root, 3, nil)
	leader := metaLeader(t, nodes)
	createReplicated(t, leader, "orders", 1, 3)
	q := catalogQueue(leader, "orders")
	group := q.GroupID(0)
	sendTo(t, nodes, q, 0, 1)
	pl := partitionLeader(nodes, group)
	testwait.Until(t, 15*time.Second, "every follower caught up", func() bool { return len(replicaBehind(pl.replicas.get(group))) == 0 })
	var follower *Node
	for _, nd := range nodes {
		if nd != pl && nd != leader {
			follower = nd
			break
		}
	}
	if follower == nil { // the meta leader leads the partition: any other
		follower = slices.DeleteFunc(slices.Clone(nodes), func(nd *Node) bool { return nd == pl })[0]
	}
	follower.Close()
	live := slices.DeleteFunc(slices.Clone(nodes), func(nd *Node) bool { return nd == follower })
	for range behindSlack + 8 {
		sendTo(t, live, q, 0, 1)
	}
	pl = partitionLeader(live, group)
	testwait.Until(t, 15*time.Second, "the stopped follower seen behind", func() bool {
		return slices.Equal(replicaBehind(pl.replicas.get(group)), []string{follower.ID()})
	})
	back := restartTestNode(t, root, follower, []string{live[0].GossipAddr()})
	live = append(live, back)
	testwait.Until(t, 30*time.Second, "the restarted follower caught up", func() bool {
		pl := partitionLeader(live, group)
		return pl != nil && len(replicaBehind(pl.replicas.get(group))) == 0
	})
}
