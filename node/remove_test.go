package node

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wire"
)

// partitionLeader returns the node whose replica of group leads it, or nil.
func partitionLeader(nodes []*Node, group string) *Node {
	for _, nd := range nodes {
		if p := nd.replicas.get(group); p != nil && p.IsLeader() {
			return nd
		}
	}
	return nil
}

// sendTo sends count messages to one partition through its leader.
func sendTo(t *testing.T, nodes []*Node, q meta.Queue, index, count int) {
	t.Helper()
	var msgs []wire.Message
	for i := range count {
		msgs = append(msgs, wire.Message{ID: fmt.Sprintf("p%d-m%d", index, i), Body: []byte("hello")})
	}
	testwait.Until(t, 15*time.Second, fmt.Sprintf("a send to partition %d", index), func() bool {
		leader := partitionLeader(nodes, q.GroupID(index))
		if leader == nil {
			return false
		}
		req := &wire.SendRequest{Queue: q.Name, Partition: index, Messages: msgs}
		return dialRaw(t, leader.ClientAddr()).call(wire.OpSend, req, &wire.SendResponse{}) == nil
	})
}

func nodeByID(nodes []*Node, id string) *Node {
	for _, nd := range nodes {
		if nd.ID() == id {
			return nd
		}
	}
	return nil
}

// `node remove` takes a node out of the catalog, the meta group and every
// partition group; each of its replicas moves to another node, which
// receives the partition's data; the removed node, still running, drops
// its replicas and is never registered again.
func TestRemoveNode_LeavesMetaAndPartitionsAndReplicasMove(t *testing.T) {
	nodes := testNodes(t, 4)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "orders", 4)
	var q meta.Queue
	leader.meta.view(func(f *meta.FSM) { q, _ = f.Queue("orders") })
	const perPartition = 3
	for i := range q.Partitions {
		sendTo(t, nodes, q, i, perPartition)
	}
	var victim *Node
	for _, nd := range nodes {
		if nd != leader {
			victim = nd
			break
		}
	}
	held := len(victim.replicas.all())
	if held == 0 {
		t.Fatalf("%s hosts no replica", victim.ID())
	}
	c := dialRaw(t, leader.ClientAddr())
	var resp wire.RemoveNodeResponse
	if err := c.call(wire.OpRemoveNode, &wire.RemoveNodeRequest{ID: victim.ID()}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Moved != held {
		t.Fatalf("moved %d replicas, %s held %d", resp.Moved, victim.ID(), held)
	}
	if slices.Contains(catalogNodes(leader), victim.ID()) || slices.Contains(metaServers(t, leader), victim.ID()) {
		t.Fatalf("%s still registered or in the meta group", victim.ID())
	}
	testwait.Until(t, 15*time.Second, "the removed node dropping its replicas and their data", func() bool {
		entries, err := os.ReadDir(victim.replicas.dir(""))
		return len(victim.replicas.all()) == 0 && (err != nil || len(entries) == 0)
	})
	leader.meta.view(func(f *meta.FSM) { q, _ = f.Queue("orders") })
	live := slices.DeleteFunc(slices.Clone(nodes), func(nd *Node) bool { return nd == victim })
	for _, p := range q.Partitions {
		group := q.GroupID(p.Index)
		if len(p.Replicas) != 3 || slices.Contains(p.Replicas, victim.ID()) {
			t.Fatalf("partition %d placed on %v", p.Index, p.Replicas)
		}
		testwait.Until(t, 20*time.Second, fmt.Sprintf("partition %d's group matching its placement with the data everywhere", p.Index), func() bool {
			pl := partitionLeader(live, group)
			if pl == nil {
				return false
			}
			voters := slices.Sorted(slices.Values(pl.replicas.get(group).Status().Voters))
			if !slices.Equal(voters, slices.Sorted(slices.Values(p.Replicas))) {
				return false
			}
			for _, id := range p.Replicas {
				r := nodeByID(live, id).replicas.get(group)
				if r == nil || r.Stats().Ready != perPartition {
					return false
				}
			}
			return true
		})
	}
	// The removed node still gossips, yet stays out, and queues can still
	// be created (it does not count as an unregistered member).
	createQueueOn(t, leader, "after", 2)
	if slices.Contains(catalogNodes(leader), victim.ID()) || slices.Contains(metaServers(t, leader), victim.ID()) {
		t.Fatalf("%s registered again", victim.ID())
	}
	err := c.call(wire.OpRemoveNode, &wire.RemoveNodeRequest{ID: victim.ID()}, &resp)
	if !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatalf("removing it again: %v, want invalid argument", err)
	}
}

// A dead node that is removed no longer counts in any quorum: its
// replicas move to the live nodes, and after that the meta group and
// every partition survive the loss of one more node.
func TestRemoveNode_DeadNodeRestoresFaultTolerance(t *testing.T) {
	nodes := testNodes(t, 4)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "orders", 4)
	var q meta.Queue
	leader.meta.view(func(f *meta.FSM) { q, _ = f.Queue("orders") })
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
	c := dialRaw(t, leader.ClientAddr())
	var resp wire.RemoveNodeResponse
	testwait.Until(t, 15*time.Second, "the removal of the dead node", func() bool {
		return c.call(wire.OpRemoveNode, &wire.RemoveNodeRequest{ID: dead.ID()}, &resp) == nil
	})
	live := slices.DeleteFunc(slices.Clone(nodes), func(nd *Node) bool { return nd == dead })
	leader.meta.view(func(f *meta.FSM) { q, _ = f.Queue("orders") })
	for _, p := range q.Partitions {
		group := q.GroupID(p.Index)
		testwait.Until(t, 20*time.Second, fmt.Sprintf("partition %d on %v with its data", p.Index, p.Replicas), func() bool {
			pl := partitionLeader(live, group)
			if pl == nil || !slices.Equal(slices.Sorted(slices.Values(pl.replicas.get(group).Status().Voters)), slices.Sorted(slices.Values(p.Replicas))) {
				return false
			}
			for _, id := range p.Replicas {
				r := nodeByID(live, id).replicas.get(group)
				if r == nil || r.Stats().Ready != 2 {
					return false
				}
			}
			return true
		})
	}
	if got := metaServers(t, leader); len(got) != 3 || slices.Contains(got, dead.ID()) {
		t.Fatalf("meta group %v", got)
	}
	// Lose one more node (not the meta leader): 2 of 3 remain everywhere.
	var second *Node
	for _, nd := range live {
		if nd != leader {
			second = nd
			break
		}
	}
	second.Close()
	rest := slices.DeleteFunc(slices.Clone(live), func(nd *Node) bool { return nd == second })
	createQueueOn(t, metaLeader(t, rest), "still-works", 1)
	for i := range q.Partitions {
		sendTo(t, rest, q, i, 1)
	}
}

// In a cluster with no spare node, a removal leaves partitions one replica
// short; the next node to join gets those replicas and the partitions'
// data.
func TestRemoveNode_ShortPartitionsRefilledByTheNextNode(t *testing.T) {
	nodes := testNodes(t, 3)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "orders", 2)
	var q meta.Queue
	leader.meta.view(func(f *meta.FSM) { q, _ = f.Queue("orders") })
	for i := range q.Partitions {
		sendTo(t, nodes, q, i, 2)
	}
	var victim *Node
	for _, nd := range nodes {
		if nd != leader {
			victim = nd
			break
		}
	}
	c := dialRaw(t, leader.ClientAddr())
	var resp wire.RemoveNodeResponse
	if err := c.call(wire.OpRemoveNode, &wire.RemoveNodeRequest{ID: victim.ID()}, &resp); err != nil || resp.Moved != 0 {
		t.Fatalf("remove: moved %d, %v", resp.Moved, err)
	}
	victim.Close()
	live := slices.DeleteFunc(slices.Clone(nodes), func(nd *Node) bool { return nd == victim })
	seeds := []string{live[0].GossipAddr(), live[1].GossipAddr()}
	n4 := startTestNode(t, t.TempDir(), "n4", 0, seeds, nil)
	live = append(live, n4)
	testwait.Until(t, 15*time.Second, "n4 placed in every partition", func() bool {
		leader.meta.view(func(f *meta.FSM) { q, _ = f.Queue("orders") })
		for _, p := range q.Partitions {
			if len(p.Replicas) != 3 || !slices.Contains(p.Replicas, "n4") {
				return false
			}
		}
		return true
	})
	for _, p := range q.Partitions {
		group := q.GroupID(p.Index)
		testwait.Until(t, 20*time.Second, fmt.Sprintf("partition %d's data on n4", p.Index), func() bool {
			pl := partitionLeader(live, group)
			r := n4.replicas.get(group)
			return pl != nil && slices.Contains(pl.replicas.get(group).Status().Voters, "n4") && r != nil && r.Stats().Ready == 2
		})
	}
}
