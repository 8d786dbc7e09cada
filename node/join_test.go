package node

import (
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

// A node whose seeds answer only with itself (n2 lists just its own
// address, as a DNS name does before the other pods' records appear)
// must not stop joining: n1, started first with n2's address still dead,
// keeps trying its seeds until it sees bootstrap-expect members, and the
// two form a cluster.
func TestJoin_KeepsJoiningUntilBootstrapExpectMembers(t *testing.T) {
	root := t.TempDir()
	addr1, addr2 := freePort(t), freePort(t)
	at := func(addr string) func(*Config) { return func(c *Config) { c.GossipAddr = addr } }
	n1 := startTestNode(t, root, "n1", 2, []string{addr1, addr2}, at(addr1))
	if n1.joinedEnough() {
		t.Fatal("n1 alone thinks it has joined")
	}
	n2 := startTestNode(t, root, "n2", 2, []string{addr2}, at(addr2))
	testwait.Until(t, 20*time.Second, "a meta leader both nodes agree on", func() bool {
		l := n1.meta.leaderID()
		return l != "" && l == n2.meta.leaderID()
	})
	if !n1.joinedEnough() || !n2.joinedEnough() {
		t.Fatal("a formed cluster's nodes still want to join")
	}
}
