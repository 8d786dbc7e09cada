package node

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// A partition leader whose two peers are gone must not answer "not
// leader, the leader is me": the client would be sent back to it in a
// loop and the user told something false. It answers unavailable.
func TestNode_LeaderWithoutQuorumAnswersUnavailable(t *testing.T) {
	nodes := testNodes(t, 3)
	deadline := time.Now().Add(20 * time.Second)
	var leader *Node
	var c *rawClient
	for leader == nil {
		if time.Now().After(deadline) {
			t.Fatal("no partition leader in time")
		}
		time.Sleep(50 * time.Millisecond)
		for _, nd := range nodes {
			if nd.meta.isLeader() {
				c = dialRaw(t, nd.ClientAddr())
				var created wire.CreateQueueResponse
				err := c.call(wire.OpCreateQueue, &wire.CreateQueueRequest{Name: "orders"}, &created)
				if err != nil && !errors.Is(err, wire.ErrQueueExists) {
					continue
				}
			}
		}
		for _, nd := range nodes {
			if p := nd.replicas.get(nd.queueGroup(t, "orders")); p != nil && p.IsLeader() {
				leader = nd
			}
		}
	}
	for _, nd := range nodes {
		if nd != leader {
			nd.Close()
		}
	}
	lc := dialRaw(t, leader.ClientAddr())
	var last error
	for time.Now().Before(deadline.Add(10 * time.Second)) {
		var sent wire.SendResponse
		last = lc.call(wire.OpSend, &wire.SendRequest{Queue: "orders", Messages: []wire.Message{{ID: "m1", Body: []byte("x")}}}, &sent)
		var we *wire.Error
		if errors.As(last, &we) && we.Code == wire.CodeUnavailable && strings.Contains(we.Message, "no leader") {
			return
		}
		if errors.As(last, &we) && we.Code == wire.CodeNotLeader && (we.Leader == leader.ClientAddr() || we.Leader == "") &&
			strings.Contains(we.Message, leader.ID()) {
			t.Fatalf("leader without quorum names itself: %v", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("send to %s at %s without quorum: last answer %v, want unavailable: no leader", leader.ID(), leader.ClientAddr(), last)
}

// queueGroup returns the raft group id of partition 0 of a queue as this
// node's catalog has it.
func (n *Node) queueGroup(t *testing.T, name string) string {
	t.Helper()
	q, ok := n.meta.queue(t.Context(), name)
	if !ok {
		return ""
	}
	return q.GroupID(0)
}
