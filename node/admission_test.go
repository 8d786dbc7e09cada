package node

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wire"
)

// metaLeader waits for a meta leader among nodes and returns it.
func metaLeader(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	var leader *Node
	testwait.Until(t, 15*time.Second, "a meta leader", func() bool {
		for _, nd := range nodes {
			if nd.meta.isLeader() {
				leader = nd
				return true
			}
		}
		return false
	})
	return leader
}

// catalogNodes returns the ids the node's catalog registers.
func catalogNodes(nd *Node) []string {
	var ids []string
	nd.meta.view(func(f *meta.FSM) {
		for _, n := range f.Nodes() {
			ids = append(ids, n.ID)
		}
	})
	return ids
}

// metaServers returns the ids in the meta group's raft configuration.
func metaServers(t *testing.T, nd *Node) []string {
	servers, err := nd.meta.servers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range servers {
		ids = append(ids, string(s.ID))
	}
	return ids
}

func memberIDs(nd *Node) []string {
	var ids []string
	for _, m := range nd.members.members() {
		ids = append(ids, m.ID)
	}
	return ids
}

// createQueueOn creates a queue through nd (the meta leader), retrying
// while membership settles.
func createQueueOn(t *testing.T, nd *Node, name string, partitions int) {
	t.Helper()
	c := dialRaw(t, nd.ClientAddr())
	testwait.Until(t, 15*time.Second, "queue "+name+" created", func() bool {
		return createRaw(c, name, partitions) == nil
	})
}

// assertOutsider checks that the cluster around leader knows nothing of
// node id: not a gossip member, not registered, not in the meta group, no
// replica placed on it.
func assertOutsider(t *testing.T, leader *Node, outsider *Node) {
	t.Helper()
	id := outsider.ID()
	if slices.Contains(memberIDs(leader), id) {
		t.Errorf("%s is a gossip member of the cluster: %v", id, memberIDs(leader))
	}
	if slices.Contains(catalogNodes(leader), id) {
		t.Errorf("%s was registered: %v", id, catalogNodes(leader))
	}
	if slices.Contains(metaServers(t, leader), id) {
		t.Errorf("%s was added to the meta group: %v", id, metaServers(t, leader))
	}
	var placed []meta.Assignment
	leader.meta.view(func(f *meta.FSM) { placed = f.Assignments(id) })
	if len(placed) > 0 || len(outsider.replicas.all()) > 0 {
		t.Errorf("%s hosts data: %d assignments, %d replicas running", id, len(placed), len(outsider.replicas.all()))
	}
}

// A node without the cluster's gossip key (none, or another one) cannot
// join: its packets are dropped, so it is never seen, registered or given
// replicas, while a node with the key that joins at the same time is.
func TestAdmission_NodeWithoutGossipKeyCannotJoin(t *testing.T) {
	nodes := testNodes(t, 3)
	leader := metaLeader(t, nodes)
	seeds := []string{nodes[0].GossipAddr(), nodes[1].GossipAddr(), nodes[2].GossipAddr()}
	root := t.TempDir()
	keyless := startTestNode(t, root, "keyless", 0, seeds, func(c *Config) { c.GossipKeys, c.Insecure = nil, true })
	otherKey := startTestNode(t, root, "otherkey", 0, seeds, func(c *Config) {
		c.GossipKeys = [][]byte{[]byte("fedcba9876543210")}
	})
	n4 := startTestNode(t, root, "n4", 0, seeds, nil)
	testwait.Until(t, 15*time.Second, "n4 registered and in the meta group", func() bool {
		return slices.Contains(catalogNodes(leader), "n4") && slices.Contains(metaServers(t, leader), "n4")
	})
	createQueueOn(t, leader, "spread", 8)
	testwait.Until(t, 15*time.Second, "n4 hosting replicas", func() bool { return len(n4.replicas.all()) > 0 })
	for _, out := range []*Node{keyless, otherKey} {
		assertOutsider(t, leader, out)
		if got := memberIDs(out); len(got) != 1 {
			t.Errorf("%s sees members %v; want only itself", out.ID(), got)
		}
		if out.meta.leaderID() != "" {
			t.Errorf("%s follows meta leader %s", out.ID(), out.meta.leaderID())
		}
	}
}

// A node that holds the gossip key but advertises a bad admission proof is
// refused by the meta leader: never registered, never a voter, never given
// replicas.
func TestAdmission_BadProofIsRefused(t *testing.T) {
	nodes := testNodes(t, 3)
	leader := metaLeader(t, nodes)
	seeds := []string{nodes[0].GossipAddr(), nodes[1].GossipAddr(), nodes[2].GossipAddr()}
	root := t.TempDir()
	forger := startTestNode(t, root, "forger", 0, seeds, func(c *Config) {
		c.forgeProof = func(m memberMeta) string {
			// A proof made under another secret.
			return admissionProof(clusterSecret([]byte("not-the-cluster-key-0123")), m)
		}
	})
	n4 := startTestNode(t, root, "n4", 0, seeds, nil)
	testwait.Until(t, 15*time.Second, "n4 registered and in the meta group", func() bool {
		return slices.Contains(catalogNodes(leader), "n4") && slices.Contains(metaServers(t, leader), "n4")
	})
	createQueueOn(t, leader, "spread", 8)
	testwait.Until(t, 15*time.Second, "n4 hosting replicas", func() bool { return len(n4.replicas.all()) > 0 })
	assertOutsider(t, leader, forger)
	if st := leader.members.state("forger"); st == wire.NodeAlive {
		t.Errorf("forger's state is %v", st)
	}
}

// The cluster keeps running across a gossip key rotation done in three
// rounds, and a node joining with only the new key is admitted.
func TestAdmission_GossipKeyRotation(t *testing.T) {
	nodes := testNodes(t, 3)
	leader := metaLeader(t, nodes)
	newKey := []byte("a-brand-new-16by")
	for _, round := range [][][]byte{{testGossipKey, newKey}, {newKey, testGossipKey}, {newKey}} {
		for _, nd := range nodes {
			if err := nd.SetGossipKeys(round); err != nil {
				t.Fatal(err)
			}
		}
	}
	seeds := []string{nodes[0].GossipAddr(), nodes[1].GossipAddr(), nodes[2].GossipAddr()}
	n4 := startTestNode(t, t.TempDir(), "n4", 0, seeds, func(c *Config) { c.GossipKeys = [][]byte{newKey} })
	testwait.Until(t, 15*time.Second, "n4 registered after the rotation", func() bool {
		return slices.Contains(catalogNodes(leader), "n4")
	})
	old := startTestNode(t, t.TempDir(), "oldkey", 0, seeds, nil)
	createQueueOn(t, leader, "after-rotation", 4)
	testwait.Until(t, 15*time.Second, "n4 hosting replicas", func() bool { return len(n4.replicas.all()) > 0 })
	assertOutsider(t, leader, old)
	for _, nd := range nodes {
		if got := memberIDs(nd); len(got) != 4 {
			t.Errorf("%s sees members %v after the rotation", nd.ID(), got)
		}
	}
}

// A leader table is accepted only from the node it describes (signed with
// that node's key), with a start time not in the future, and is dropped
// when its node leaves.
func TestAdmission_ForgedLeaderTablesIgnored(t *testing.T) {
	nodes := testNodes(t, 3)
	metaLeader(t, nodes)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	testwait.Until(t, 15*time.Second, "every node seeing the others", func() bool {
		return len(memberIDs(n1)) == 3 && len(memberIDs(n3)) == 3
	})
	now := time.Now().UnixNano()
	const forgedGroup, futureGroup, honestGroup = "q900-0", "q901-0", "q902-0"
	// n3 gossips a table that claims n2 leads forgedGroup at a huge term,
	// signed with its own key; one for itself that starts far in the
	// future; and an honest one for itself.
	forged := n3.members.sign(leaderTable{Node: "n2", Start: now, Seq: 1 << 40, Groups: map[string]uint64{forgedGroup: 1 << 60}})
	future := n3.members.sign(leaderTable{Node: "n3", Start: 1<<63 - 1, Seq: 1, Groups: map[string]uint64{futureGroup: 1 << 60}})
	honest := n3.members.sign(leaderTable{Node: "n3", Start: n3.members.start, Seq: 1 << 40, Groups: map[string]uint64{honestGroup: 5}})
	for _, st := range []signedTable{forged, future, honest} {
		msg, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		n3.members.queue.QueueBroadcast(broadcast(msg))
	}
	testwait.Until(t, 15*time.Second, "n1 learning the honest table", func() bool {
		id, ok := n1.members.leaderOf(honestGroup)
		return ok && id == "n3"
	})
	for _, g := range []string{forgedGroup, futureGroup} {
		if id, ok := n1.members.leaderOf(g); ok {
			t.Errorf("n1 believes %s leads %s", id, g)
		}
	}
	if err := n1.members.mergeTable(forged); err == nil {
		t.Error("a table for n2 signed by n3 merged")
	}
	if err := n1.members.mergeTable(future); err == nil {
		t.Error("a table starting in the far future merged")
	}
	// A signature made over other bytes fails as well.
	tampered := signedTable{Body: []byte(`{"node":"n2","start":1,"seq":1,"groups":{"meta":99}}`), Sig: n2.members.sign(leaderTable{Node: "n2"}).Sig}
	if err := n1.members.mergeTable(tampered); err == nil {
		t.Error("a table with a signature of other bytes merged")
	}
	n3.Close()
	testwait.Until(t, 15*time.Second, "n3's table pruned after it left", func() bool {
		n1.members.mu.Lock()
		defer n1.members.mu.Unlock()
		_, held := n1.members.tables["n3"]
		return !held
	})
	if _, ok := n1.members.leaderOf(honestGroup); ok {
		t.Error("a departed node still leads a group")
	}
}

// Gossip keys are checked when the config is validated.
func TestAdmission_GossipKeyValidation(t *testing.T) {
	cfg := DefaultConfig("n1", filepath.Join(t.TempDir(), "n1"), "127.0.0.1", 0)
	for _, keys := range [][][]byte{{[]byte("short")}, {testGossipKey, testGossipKey}} {
		cfg.GossipKeys = keys
		if err := cfg.Validate(); err == nil {
			t.Errorf("keys %q validated", keys)
		}
	}
	if _, err := ParseGossipKey(base64.StdEncoding.EncodeToString(testGossipKey)); err != nil {
		t.Error(err)
	}
	if _, err := ParseGossipKey("bm90LWEta2V5"); err == nil {
		t.Error("a 9-byte key parsed")
	}
	keys, err := ParseGossipKeyring("# rotation\n" + base64.StdEncoding.EncodeToString(testGossipKey) + "\n\n" +
		base64.StdEncoding.EncodeToString([]byte("0123456789abcdef")) + "\n")
	if err != nil || len(keys) != 2 || string(keys[0]) != string(testGossipKey) {
		t.Errorf("keyring parsed to %q, %v", keys, err)
	}
}
