package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ferrymq/ferry/internal/raftutil"
	"github.com/ferrymq/ferry/internal/testwait"
)

// countFSM counts applied commands.
type countFSM struct {
	mu sync.Mutex
	n  uint64
}

func (f *countFSM) Apply(*raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.n
}

func (f *countFSM) count() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return countSnapshot(f.count()), nil }

func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	f.n = binary.BigEndian.Uint64(b[:])
	f.mu.Unlock()
	return nil
}

type countSnapshot uint64

func (s countSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, uint64(s))); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (countSnapshot) Release() {}

// replica is one node's member of one raft group. Its stores survive a
// stop, so it can be restarted with the same state.
type replica struct {
	r     *raft.Raft
	trans *BoundedTransport
	fsm   *countFSM
	logs  *raft.InmemStore
	snaps *raft.InmemSnapshotStore
}

// testNode is one cluster member: a Mux hosting several groups, each on
// a transport of its own (shared nil) or all on one Shared transport.
type testNode struct {
	id       raft.ServerID
	mux      *Mux
	shared   *Shared
	replicas map[string]*replica
}

// cluster is a set of nodes running the same raft groups.
type cluster struct {
	t           *testing.T
	rpcBytesMax int    // 0: the default
	shared      bool   // groups share each node's Shared transport
	trailing    uint64 // raft's TrailingLogs; 0: raft's default
	nodes       []*testNode
	groups      []string
}

// startCluster starts one Mux per IP and, on each, one raft replica per
// group, all bootstrapped with the same voter list.
func startCluster(t *testing.T, ips []string, groups ...string) *cluster {
	t.Helper()
	return startClusterWith(t, ips, 0, groups...)
}

// startClusterWith is startCluster with transports bounded at rpcBytesMax
// bytes of entry data per RPC (0: the default).
func startClusterWith(t *testing.T, ips []string, rpcBytesMax int, groups ...string) *cluster {
	t.Helper()
	return startClusterMux(t, ips, rpcBytesMax, nil, groups...)
}

// startClusterMux is startClusterWith with node i's Mux configured by
// edit(i, cfg) when edit is not nil.
func startClusterMux(t *testing.T, ips []string, rpcBytesMax int, edit func(int, *MuxConfig), groups ...string) *cluster {
	t.Helper()
	return startClusterOf(t, &cluster{t: t, groups: groups, rpcBytesMax: rpcBytesMax}, ips, edit)
}

// startSharedCluster is startCluster with every node's groups on one
// Shared transport.
func startSharedCluster(t *testing.T, ips []string, groups ...string) *cluster {
	t.Helper()
	return startClusterOf(t, &cluster{t: t, groups: groups, shared: true}, ips, nil)
}

// startClusterOf starts the nodes and groups c describes.
func startClusterOf(t *testing.T, c *cluster, ips []string, edit func(int, *MuxConfig)) *cluster {
	t.Helper()
	groups := c.groups
	for i, ip := range ips {
		var e func(*MuxConfig)
		if edit != nil {
			e = func(cfg *MuxConfig) { edit(i, cfg) }
		}
		n := &testNode{
			id:       raft.ServerID(fmt.Sprintf("n%d", i+1)),
			mux:      newTestMux(t, ip, e),
			replicas: make(map[string]*replica),
		}
		if c.shared {
			n.shared = newTestShared(t, n.mux, func(sc *SharedConfig) { sc.RPCBytesMax = c.rpcBytesMax })
		}
		c.nodes = append(c.nodes, n)
	}
	var servers []raft.Server
	for _, n := range c.nodes {
		servers = append(servers, raft.Server{ID: n.id, Address: raft.ServerAddress(n.mux.Addr().String())})
	}
	for _, g := range groups {
		for _, n := range c.nodes {
			rep := &replica{logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
			c.startReplica(n, g, rep)
			err := rep.r.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
			if err != nil {
				t.Fatalf("bootstrap %s/%s: %v", n.id, g, err)
			}
		}
	}
	t.Cleanup(c.stop)
	return c
}

// startReplica registers group g on n's Mux and starts rep's raft on it
// with a fresh FSM and fast timings.
func (c *cluster) startReplica(n *testNode, g string, rep *replica) {
	c.t.Helper()
	if n.shared != nil {
		trans, err := n.shared.Group(g)
		if err != nil {
			c.t.Fatalf("Shared.Group(%s): %v", g, err)
		}
		rep.trans = trans
	} else {
		layer := mustGroup(c.t, n.mux, g)
		rep.trans = NewTransport(layer, TransportConfig{Timeout: 2 * time.Second, Logger: testLogger(), RPCBytesMax: c.rpcBytesMax})
	}
	rep.fsm = &countFSM{}
	cfg := raft.DefaultConfig()
	cfg.LocalID = n.id
	cfg.HeartbeatTimeout = 200 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	if c.trailing > 0 {
		cfg.TrailingLogs = c.trailing
	}
	cfg.Logger = raftutil.NewHCLogger(testLogger().With("node", string(n.id), "group", g))
	r, err := raft.NewRaft(cfg, rep.fsm, rep.logs, rep.logs, rep.snaps, rep.trans)
	if err != nil {
		c.t.Fatalf("NewRaft %s/%s: %v", n.id, g, err)
	}
	rep.r = r
	n.replicas[g] = rep
}

// stopReplica shuts down raft, then its transport, which frees the group.
func stopReplica(t testing.TB, rep *replica) {
	t.Helper()
	if err := rep.r.Shutdown().Error(); err != nil {
		t.Errorf("raft shutdown: %v", err)
	}
	if err := rep.trans.Close(); err != nil {
		t.Errorf("transport close: %v", err)
	}
}

// stop shuts every node down in the order a node does: rafts, transports,
// then the Mux.
func (c *cluster) stop() {
	for _, n := range c.nodes {
		for g, rep := range n.replicas {
			stopReplica(c.t, rep)
			delete(n.replicas, g)
		}
		_ = n.mux.Close()
	}
}

// leader waits until one running replica of group g is leader.
func (c *cluster) leader(g string) *replica {
	c.t.Helper()
	var lead *replica
	testwait.Until(c.t, waitTimeout, "a leader of "+g, func() bool {
		for _, n := range c.nodes {
			if rep := n.replicas[g]; rep != nil && rep.r.State() == raft.Leader {
				lead = rep
				return true
			}
		}
		return false
	})
	return lead
}

// apply proposes commands to group g until k have been confirmed,
// retrying on leader changes.
func (c *cluster) apply(g string, k int) {
	c.t.Helper()
	c.applyData(g, k, []byte("x"))
}

// applyData is apply with a given command.
func (c *cluster) applyData(g string, k int, data []byte) {
	c.t.Helper()
	for done := 0; done < k; done++ {
		testwait.UntilNil(c.t, waitTimeout, fmt.Sprintf("group %s: apply %d of %d confirmed", g, done+1, k), func() error {
			err := c.leader(g).r.Apply(data, time.Second).Error()
			switch {
			case err == nil, errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
				errors.Is(err, raft.ErrEnqueueTimeout):
				// Retry on the new leader; an ambiguous apply only adds a count.
			default:
				c.t.Fatalf("group %s: apply: %v", g, err)
			}
			return err
		})
	}
}

// converge waits until every running replica of g has applied the same
// number of commands, at least min.
func (c *cluster) converge(g string, min uint64) {
	c.t.Helper()
	testwait.Until(c.t, waitTimeout, fmt.Sprintf("all replicas of %s to apply >= %d commands", g, min), func() bool {
		var want uint64
		for _, n := range c.nodes {
			rep := n.replicas[g]
			if rep == nil {
				continue
			}
			got := rep.fsm.count()
			if got < min || (want != 0 && got != want) {
				return false
			}
			want = got
		}
		return true
	})
}

func TestTransport_RaftGroupsShareOnePort(t *testing.T) {
	forEachKind(t, testRaftGroupsShareOnePort)
}

func testRaftGroupsShareOnePort(t *testing.T, start startFunc) {
	ips, _ := nodeIPs(t)
	c := start(t, ips, "meta", "p1")
	for _, g := range c.groups {
		c.apply(g, 20)
	}
	for _, g := range c.groups {
		c.converge(g, 20)
	}
	// Every node talks raft, but a node that never campaigned or led has
	// dialed nothing: only the cluster-wide totals must show both sides.
	var accepted, dialed int
	for _, n := range c.nodes {
		s := n.mux.Stats()
		if s.Groups != 2 || s.Accepted+s.Dialed == 0 {
			t.Errorf("node %s: Stats = %+v, want 2 groups and open connections", n.id, s)
		}
		accepted += s.Accepted
		dialed += s.Dialed
		t.Logf("node %s: %+v", n.id, s)
	}
	if accepted == 0 || dialed == 0 {
		t.Errorf("cluster: %d accepted and %d dialed connections, want both > 0", accepted, dialed)
	}
}

func TestTransport_RaftGroupRestartLeavesOthersAlone(t *testing.T) {
	forEachKind(t, testRaftGroupRestartLeavesOthersAlone)
}

func testRaftGroupRestartLeavesOthersAlone(t *testing.T, start startFunc) {
	ips, _ := nodeIPs(t)
	c := start(t, ips, "meta", "p1")
	c.apply("meta", 10)
	c.apply("p1", 10)
	c.converge("p1", 10)

	// Stop p1 on the last node; its meta replica keeps running on the
	// same Mux.
	n := c.nodes[len(c.nodes)-1]
	old := n.replicas["p1"]
	stopReplica(t, old)
	delete(n.replicas, "p1")
	if s := n.mux.Stats(); s.Groups != 1 {
		t.Fatalf("Stats after stopping p1 = %+v, want 1 group", s)
	}

	c.apply("meta", 10)
	c.converge("meta", 20)
	c.apply("p1", 10) // two of three p1 replicas are a majority

	// Restart p1 on the same node and Mux, with its stores: it catches up.
	c.startReplica(n, "p1", &replica{logs: old.logs, snaps: old.snaps})
	c.apply("p1", 5)
	c.converge("p1", 25)
	c.converge("meta", 20)
}

func TestTransport_RaftShutdownLeavesNoGoroutines(t *testing.T) {
	forEachKind(t, testRaftShutdownLeavesNoGoroutines)
}

func testRaftShutdownLeavesNoGoroutines(t *testing.T, start startFunc) {
	base := runtime.NumGoroutine()
	ips, _ := nodeIPs(t)
	c := start(t, ips, "meta", "p1")
	c.apply("meta", 5)
	c.apply("p1", 5)
	c.converge("p1", 5)

	// Stop one node's rafts and transports while its peers keep their
	// connections to it open: its connections must be closed from here.
	n := c.nodes[0]
	for g, rep := range n.replicas {
		stopReplica(t, rep)
		delete(n.replicas, g)
	}
	if s := n.mux.Stats(); s.Groups != 0 || (n.shared == nil && (s.Accepted != 0 || s.Dialed != 0)) {
		// A Shared transport's connections are the node's, not a group's:
		// they stay open until the Shared (or the Mux) closes.
		t.Fatalf("Stats after stopping every group = %+v, want nothing open", s)
	}
	c.stop()
	for _, n := range c.nodes {
		if s := n.mux.Stats(); s != (Stats{Rejected: s.Rejected}) {
			t.Errorf("node %s: Stats after Close = %+v, want nothing open", n.id, s)
		}
	}
	testwait.Until(t, waitTimeout, fmt.Sprintf("goroutines back to baseline %d", base), func() bool {
		return runtime.NumGoroutine() <= base+2
	})
}

// startFunc starts a cluster running the groups on every node.
type startFunc func(t *testing.T, ips []string, groups ...string) *cluster

// forEachKind runs a raft test over per-group transports and over the
// Shared transport.
func forEachKind(t *testing.T, test func(*testing.T, startFunc)) {
	t.Run("per-group", func(t *testing.T) { test(t, startCluster) })
	t.Run("shared", func(t *testing.T) { test(t, startSharedCluster) })
}
