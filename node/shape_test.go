package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

// catalogQueue returns the catalog's copy of a queue as nd sees it.
func catalogQueue(nd *Node, name string) meta.Queue {
	var q meta.Queue
	nd.meta.view(func(f *meta.FSM) { q, _ = f.Queue(name) })
	return q
}

// waitPlacedAndCaughtUp waits until every partition of q is settled: no
// move in progress, every placed replica on a node of live, a voter of its
// group's leader and holding want ready messages.
func waitPlacedAndCaughtUp(t *testing.T, live []*Node, name string, want int) meta.Queue {
	t.Helper()
	var q meta.Queue
	testwait.Until(t, 60*time.Second, "every partition of "+name+" settled on live nodes with its data", func() bool {
		q = catalogQueue(live[0], name)
		for _, p := range q.Partitions {
			if p.Moving() || len(p.Replicas) != q.Config.Replicas {
				return false
			}
			group := q.GroupID(p.Index)
			pl := partitionLeader(live, group)
			if pl == nil {
				return false
			}
			voters := slices.Sorted(slices.Values(pl.replicas.get(group).Status().Voters))
			if !slices.Equal(voters, slices.Sorted(slices.Values(p.Replicas))) {
				return false
			}
			for _, id := range p.Replicas {
				nd := nodeByID(live, id)
				if nd == nil {
					return false
				}
				r := nd.replicas.get(group)
				if r == nil || r.Abstaining() || r.Stats().Ready != int64(want) {
					return false
				}
			}
		}
		return true
	})
	return q
}

// settledQueue starts count nodes under root, creates the one-partition
// queue name, sends it sent messages and waits until every replica holds
// them; it returns the nodes, the queue and its partition's group.
func settledQueue(t *testing.T, root string, count int, name string, sent int) ([]*Node, meta.Queue, string) {
	t.Helper()
	nodes := testNodesIn(t, root, count, nil)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, name, 1)
	q := catalogQueue(leader, name)
	sendTo(t, nodes, q, 0, sent)
	waitPlacedAndCaughtUp(t, nodes, name, sent)
	return nodes, q, q.GroupID(0)
}

// A node dead for longer than the dead-node timeout has its replicas
// rebuilt on the live nodes, learner first, with their data; the dead node
// stays registered, and a node that joins then gets its share.
func TestShape_DeadNodeReplicasAreRebuilt(t *testing.T) {
	root := t.TempDir()
	nodes := testNodesIn(t, root, 4, func(c *Config) { c.Placement.DeadNodeTimeout = 2 * time.Second })
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "orders", 4)
	q := catalogQueue(leader, "orders")
	for i := range q.Partitions {
		sendTo(t, nodes, q, i, 3)
	}
	var dead *Node
	for _, nd := range nodes {
		if nd != leader && len(nd.replicas.all()) > 0 {
			dead = nd
			break
		}
	}
	dead.Close()
	live := slices.DeleteFunc(slices.Clone(nodes), func(nd *Node) bool { return nd == dead })
	start := time.Now()
	q = waitPlacedAndCaughtUp(t, live, "orders", 3)
	t.Logf("replicas of %s rebuilt %v after it died", dead.ID(), time.Since(start).Round(100*time.Millisecond))
	for _, p := range q.Partitions {
		if slices.Contains(p.Replicas, dead.ID()) {
			t.Fatalf("partition %d still placed on the dead node: %v", p.Index, p.Replicas)
		}
	}
	if !slices.Contains(catalogNodes(metaLeader(t, live)), dead.ID()) {
		t.Fatal("the dead node was unregistered")
	}
	l := metaLeader(t, live).listNodes()
	if l.UnderReplicatedTotal != 0 || l.MovesInFlight != 0 {
		t.Fatalf("node ls after the rebuild: %+v", l)
	}
	// A node joining gets its share although the dead one is still
	// registered: a node past the dead-node timeout does not hold
	// balancing back.
	live = append(live, startTestNode(t, root, "n9", 0, []string{live[0].GossipAddr()}, nil))
	var seen string
	waitForSaying(t, 60*time.Second, "the live nodes' replica counts within one of each other", &seen, func() bool {
		l := metaLeader(t, live).listNodes()
		lo, hi := 1<<30, 0
		seen = ""
		for _, s := range l.Nodes {
			seen += fmt.Sprintf("%s:%d ", s.ID, s.Replicas)
			if s.ID != dead.ID() {
				lo, hi = min(lo, s.Replicas), max(hi, s.Replicas)
			}
		}
		return len(l.Nodes) == 5 && l.MovesInFlight == 0 && l.UnderReplicatedTotal == 0 && hi-lo <= 1
	})
	waitPlacedAndCaughtUp(t, live, "orders", 3)
}

// Two nodes joining three loaded ones receive their share of replicas and
// preferred leaders (counts per node differ by at most one), learner
// first, while the data stays whole.
func TestShape_JoinedNodesGetTheirShare(t *testing.T) {
	root := t.TempDir()
	nodes := testNodesIn(t, root, 3, nil)
	leader := metaLeader(t, nodes)
	for i := range 4 {
		createQueueOn(t, leader, fmt.Sprintf("q%d", i), 2)
	}
	for i := range 4 {
		q := catalogQueue(leader, fmt.Sprintf("q%d", i))
		for p := range q.Partitions {
			sendTo(t, nodes, q, p, 2)
		}
	}
	seeds := []string{nodes[0].GossipAddr()}
	start := time.Now()
	for _, id := range []string{"n4", "n5"} {
		nodes = append(nodes, startTestNode(t, root, id, 0, seeds, nil))
	}
	testwait.Until(t, 90*time.Second, "replica and preferred-leader counts within one of each other", func() bool {
		l := metaLeader(t, nodes).listNodes()
		if len(l.Nodes) != 5 || l.MovesInFlight != 0 {
			return false
		}
		lo, hi, llo, lhi := 1<<30, 0, 1<<30, 0
		for _, s := range l.Nodes {
			lo, hi = min(lo, s.Replicas), max(hi, s.Replicas)
			llo, lhi = min(llo, s.Leaders), max(lhi, s.Leaders)
		}
		return hi-lo <= 1 && lhi-llo <= 1
	})
	t.Logf("balanced %v after two nodes joined", time.Since(start).Round(100*time.Millisecond))
	for i := range 4 {
		q := waitPlacedAndCaughtUp(t, nodes, fmt.Sprintf("q%d", i), 2)
		for _, p := range q.Partitions {
			if len(p.Replicas) != 3 {
				t.Fatalf("%s partition %d: %v", q.Name, p.Index, p.Replicas)
			}
		}
	}
	for _, id := range []string{"n4", "n5"} {
		if len(nodeByID(nodes, id).replicas.all()) == 0 {
			t.Fatalf("%s received no replica", id)
		}
	}
}

// A drained node ends with no replica and no leadership while its data
// moves learner first; undrained, it takes replicas again. Draining with
// nowhere to go says why.
func TestShape_DrainEmptiesANode(t *testing.T) {
	root := t.TempDir()
	nodes := testNodesIn(t, root, 4, nil)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "orders", 4)
	q := catalogQueue(leader, "orders")
	for i := range q.Partitions {
		sendTo(t, nodes, q, i, 2)
	}
	victim := nodes[3]
	c := dialRaw(t, leader.ClientAddr())
	var resp wire.DrainNodeResponse
	if err := c.call(wire.OpDrainNode, &wire.DrainNodeRequest{ID: victim.ID()}, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Node.Draining {
		t.Fatalf("drain answered %+v", resp.Node)
	}
	var seen string
	movesSeen := 0
	waitForSaying(t, 60*time.Second, victim.ID()+" hosting and leading nothing", &seen, func() bool {
		l := metaLeader(t, nodes).listNodes()
		if len(l.Moving) != min(l.MovesInFlight, wire.MovingListMax) {
			t.Fatalf("%d moves in flight, %d listed: %+v", l.MovesInFlight, len(l.Moving), l.Moving)
		}
		for _, m := range l.Moving {
			if slices.Contains(m.Leaving, victim.ID()) {
				movesSeen++
			}
		}
		st, ok := metaLeader(t, nodes).nodeStatus(victim.ID())
		var groups []string
		for _, r := range victim.replicas.all() {
			groups = append(groups, r.a.GroupID)
		}
		seen = fmt.Sprintf("status %+v, local replicas %v", st, groups)
		return ok && st.Replicas == 0 && st.Leaving == 0 && st.Leading == 0 && len(groups) == 0
	})
	if movesSeen == 0 {
		t.Errorf("no listing showed a replica leaving %s", victim.ID())
	}
	waitPlacedAndCaughtUp(t, nodes[:3], "orders", 2)
	// Three nodes left for three replicas: draining a second one cannot
	// finish, and node ls says why. (The meta leader may have been a
	// drained node and handed its leadership over: metaCall asks the
	// current one.)
	metaCall(t, nodes, wire.OpDrainNode, &wire.DrainNodeRequest{ID: nodes[2].ID()}, &resp)
	testwait.Until(t, 10*time.Second, "the stuck drain explained", func() bool {
		st, _ := metaLeader(t, nodes).nodeStatus(nodes[2].ID())
		return st.Stuck != ""
	})
	for _, id := range []string{nodes[2].ID(), victim.ID()} {
		metaCall(t, nodes, wire.OpDrainNode, &wire.DrainNodeRequest{ID: id, Undrain: true}, &resp)
	}
	testwait.Until(t, 60*time.Second, victim.ID()+" given replicas again by balancing", func() bool {
		return len(victim.replicas.all()) > 0
	})
}

// Three nodes with three replicas, one removed: every partition is
// reported under-replicated with its reason, then placed again when a new
// node joins.
func TestShape_UnderReplicatedUntilANodeJoins(t *testing.T) {
	root := t.TempDir()
	nodes := testNodesIn(t, root, 3, nil)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "orders", 2)
	var victim *Node
	for _, nd := range nodes {
		if nd != leader {
			victim = nd
			break
		}
	}
	c := dialRaw(t, leader.ClientAddr())
	if err := c.call(wire.OpRemoveNode, &wire.RemoveNodeRequest{ID: victim.ID()}, &wire.RemoveNodeResponse{}); err != nil {
		t.Fatal(err)
	}
	var list wire.ListNodesResponse
	if err := c.call(wire.OpListNodes, &wire.ListNodesRequest{}, &list); err != nil {
		t.Fatal(err)
	}
	if list.UnderReplicatedTotal != 2 || len(list.UnderReplicated) != 2 || list.UnderReplicated[0].CaughtUp != 2 ||
		list.UnderReplicated[0].Reason == "" {
		t.Fatalf("node ls after removing %s: %+v", victim.ID(), list)
	}
	live := slices.DeleteFunc(slices.Clone(nodes), func(nd *Node) bool { return nd == victim })
	live = append(live, startTestNode(t, root, "n9", 0, []string{leader.GossipAddr()}, nil))
	waitPlacedAndCaughtUp(t, live, "orders", 0)
	if err := c.call(wire.OpListNodes, &wire.ListNodesRequest{}, &list); err != nil {
		t.Fatal(err)
	}
	if list.UnderReplicatedTotal != 0 {
		t.Fatalf("still under-replicated after n9 joined: %+v", list.UnderReplicated)
	}
}

// restartTestNode starts node id again on its data directory and its
// previous addresses.
func restartTestNode(t *testing.T, root string, old *Node, seeds []string) *Node {
	t.Helper()
	return startTestNode(t, root, old.ID(), 0, seeds, func(c *Config) {
		c.RaftAddr, c.ClientAddr, c.HTTPAddr, c.GossipAddr = old.RaftAddr(), old.ClientAddr(), old.HTTPAddr(), old.GossipAddr()
	})
}

// The amnesia case with a catalog that keeps its quorum: a partition's
// replica acknowledges entries another replica lacks, loses its disk and
// comes back while the only other holder is down. Its node registers again
// with a new incarnation, its replica starts empty and abstains, and the
// stale replica cannot be elected; when the holder is back, every message
// is there and the wiped replica rejoins as a learner and votes again.
func TestShape_WipedVoterAbstainsWhileTheCatalogMoves(t *testing.T) {
	root := t.TempDir()
	nodes, q, group := settledQueue(t, root, 5, "amnesia", 2)
	holder := partitionLeader(nodes, group)
	var stale, wiped *Node
	for _, id := range q.Partitions[0].Replicas {
		if nd := nodeByID(nodes, id); nd != holder && stale == nil {
			stale = nd
		} else if nd != holder {
			wiped = nd
		}
	}
	seeds := []string{}
	for _, nd := range nodes {
		if nd != holder && nd != stale && nd != wiped {
			seeds = append(seeds, nd.GossipAddr())
		}
	}
	stale.Close()
	late := dialRaw(t, holder.ClientAddr())
	var msgs []wire.Message
	for i := range 10 {
		msgs = append(msgs, wire.Message{ID: fmt.Sprintf("late-%d", i), Body: []byte("x")})
	}
	if err := late.call(wire.OpSend, &wire.SendRequest{Queue: "amnesia", Messages: msgs}, &wire.SendResponse{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "the late messages on the replica to be wiped", func() bool {
		return wiped.replicas.get(group).Stats().Ready == 12
	})
	wiped.Close()
	if err := os.RemoveAll(filepath.Join(root, wiped.ID())); err != nil {
		t.Fatal(err)
	}
	holder.Close()
	stale = restartTestNode(t, root, stale, seeds)
	wiped = restartTestNode(t, root, wiped, seeds)
	testwait.Until(t, 30*time.Second, "the wiped node's replica started, abstaining", func() bool {
		r := wiped.replicas.get(group)
		return r != nil && r.Abstaining()
	})
	deadline := time.Now().Add(3 * time.Second) // many election timeouts
	for time.Now().Before(deadline) {
		for _, nd := range []*Node{stale, wiped} {
			if r := nd.replicas.get(group); r != nil && r.IsLeader() {
				t.Fatalf("%s leads the partition without the acknowledged messages", nd.ID())
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	holder = restartTestNode(t, root, holder, seeds)
	live := []*Node{holder, stale, wiped}
	for _, nd := range nodes {
		if nd.ID() != holder.ID() && nd.ID() != stale.ID() && nd.ID() != wiped.ID() {
			live = append(live, nd)
		}
	}
	waitPlacedAndCaughtUp(t, live, "amnesia", 12)
}

// waitForSaying is testwait.Until that, on timing out, also reports what
// the condition last saw (*seen, which cond keeps up to date).
func waitForSaying(t *testing.T, within time.Duration, what string, seen *string, cond func() bool) {
	t.Helper()
	testwait.UntilNil(t, within, what, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("last saw %s", *seen)
	})
}

// metaCall makes a catalog call on the meta leader, asking again for up
// to 10 s when leadership moved meanwhile (a draining meta leader hands
// it over).
func metaCall(t *testing.T, nodes []*Node, op wire.Op, body, out any) {
	t.Helper()
	testwait.UntilNil(t, 10*time.Second, op.String()+" answered by the meta leader", func() error {
		err := dialRaw(t, metaLeader(t, nodes).ClientAddr()).call(op, body, out)
		if err != nil && !errors.Is(err, wire.ErrNotLeader) {
			t.Fatalf("%v: %v", op, err)
		}
		return err
	})
}

// A draining meta leader hands the catalog's leadership to a voter that
// is not draining: a drained node leads nothing, the meta group included.
func TestShape_DrainingMetaLeaderHandsOver(t *testing.T) {
	nodes := testNodes(t, 3)
	testwait.Until(t, 15*time.Second, "every node registered", func() bool {
		return len(metaLeader(t, nodes).listNodes().Nodes) == len(nodes)
	})
	leader := metaLeader(t, nodes)
	var resp wire.DrainNodeResponse
	metaCall(t, nodes, wire.OpDrainNode, &wire.DrainNodeRequest{ID: leader.ID()}, &resp)
	testwait.Until(t, 20*time.Second, "the meta leadership to leave "+leader.ID(), func() bool {
		l := metaLeader(t, nodes)
		return l != leader && !leader.meta.isLeader()
	})
	metaCall(t, nodes, wire.OpDrainNode, &wire.DrainNodeRequest{ID: leader.ID(), Undrain: true}, &resp)
}

// A learner recorded caught up keeps abstaining, and so is not promoted,
// while its state machine still has many committed entries to apply (as
// after a snapshot): its log matches the leader's, but as a voter it could
// not serve until it had applied them. Once its apply catches up it votes
// and the move finishes.
func TestShape_LearnerVotesOnlyOnceItsApplyCaughtUp(t *testing.T) {
	nodes, q, group := settledQueue(t, t.TempDir(), 4, "applying", 3)
	var spare *Node
	for _, nd := range nodes {
		if !slices.Contains(q.Partitions[0].Replicas, nd.ID()) {
			spare = nd
		}
	}
	var holding atomic.Bool
	holding.Store(true)
	lagged := func(p *partition.Partition) uint64 {
		if holding.Load() {
			return applyLagMax + 1
		}
		return p.ApplyLag()
	}
	spare.replicas.applyLagOf.Store(&lagged)
	victim := q.Partitions[0].Replicas[0]
	metaCall(t, nodes, wire.OpDrainNode, &wire.DrainNodeRequest{ID: victim}, &wire.DrainNodeResponse{})
	testwait.Until(t, 60*time.Second, "the catalog to record "+spare.ID()+"'s learner caught up", func() bool {
		p := catalogQueue(spare, "applying").Partitions[0]
		return slices.Contains(p.Replicas, spare.ID()) && !slices.Contains(p.Joining, spare.ID()) && spare.replicas.get(group) != nil
	})
	spare.replicas.reconcile() // a pass after the record
	if !spare.replicas.get(group).Abstaining() {
		t.Fatal("the learner stopped abstaining with its apply behind")
	}
	testwait.Until(t, 30*time.Second, "the partition leader to await the learner's vote", func() bool {
		l := partitionLeader(nodes, group)
		if l == nil {
			return false
		}
		l.replicas.mu.Lock()
		r := l.replicas.running[group]
		l.replicas.mu.Unlock()
		return r != nil && r.awaitingVote.Load()
	})
	if l := partitionLeader(nodes, group); l != nil && slices.Contains(l.replicas.get(group).Status().Voters, spare.ID()) {
		t.Fatal("the learner was promoted with its apply behind")
	}
	if !spare.replicas.get(group).Abstaining() {
		t.Fatal("the learner stopped abstaining with its apply behind")
	}
	holding.Store(false)
	live := slices.DeleteFunc(slices.Clone(nodes), func(nd *Node) bool { return nd.ID() == victim })
	waitPlacedAndCaughtUp(t, live, "applying", 3)
	if lag := spare.replicas.get(group).ApplyLag(); lag > applyLagMax {
		t.Errorf("promoted with %d entries left to apply", lag)
	}
}
