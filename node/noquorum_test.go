package node

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// A partition leader whose two peers are gone must not answer "not
// leader, the leader is me": the client would be sent back to it in a
// loop and the user told something false. It answers unavailable.
func TestNode_LeaderWithoutQuorumAnswersUnavailable(t *testing.T) {
	nodes := testNodes(t, 3)
	var leader *Node
	testwait.Until(t, 20*time.Second, "a partition leader of orders", func() bool {
		for _, nd := range nodes {
			if nd.meta.isLeader() {
				var created wire.CreateQueueResponse
				_ = dialRaw(t, nd.ClientAddr()).call(wire.OpCreateQueue, &wire.CreateQueueRequest{Name: "orders"}, &created)
			}
		}
		for _, nd := range nodes {
			if p := nd.replicas.get(nd.queueGroup(t, "orders")); p != nil && p.IsLeader() {
				leader = nd
			}
		}
		return leader != nil
	})
	for _, nd := range nodes {
		if nd != leader {
			nd.Close()
		}
	}
	lc := dialRaw(t, leader.ClientAddr())
	testwait.UntilNil(t, 30*time.Second, "unavailable: no leader, from "+leader.ID()+" without quorum", func() error {
		var sent wire.SendResponse
		err := lc.call(wire.OpSend, &wire.SendRequest{Queue: "orders", Messages: []wire.Message{{ID: "m1", Body: []byte("x")}}}, &sent)
		var we *wire.Error
		if errors.As(err, &we) && we.Code == wire.CodeUnavailable && strings.Contains(we.Message, "no leader") {
			return nil
		}
		if errors.As(err, &we) && we.Code == wire.CodeNotLeader && (we.Leader == leader.ClientAddr() || we.Leader == "") &&
			strings.Contains(we.Message, leader.ID()) {
			t.Fatalf("leader without quorum names itself: %v", err)
		}
		return fmt.Errorf("send answered %v", err)
	})
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
