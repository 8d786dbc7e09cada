// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

// Tests of Ferry's quiescence change (see FORK.md and quiesce.go).

package raft

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// fakeLiveness is the node-level liveness of a test cluster: which node
// sees which other node as up. Each node gets its own view.
type fakeLiveness struct {
	mu   sync.Mutex
	down map[[2]ServerAddress]bool // (observer, observed)
	lost map[[2]ServerAddress]chan struct{}
	back map[[2]ServerAddress]chan struct{}
}

func newFakeLiveness() *fakeLiveness {
	return &fakeLiveness{down: map[[2]ServerAddress]bool{}, lost: map[[2]ServerAddress]chan struct{}{},
		back: map[[2]ServerAddress]chan struct{}{}}
}

// livenessView is one node's view.
type livenessView struct {
	f    *fakeLiveness
	self ServerAddress
}

func (v livenessView) PeerAlive(_ ServerID, addr ServerAddress) (bool, <-chan struct{}) {
	f, key := v.f, [2]ServerAddress{v.self, addr}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[key] {
		return false, nil
	}
	ch := f.lost[key]
	if ch == nil {
		ch = make(chan struct{})
		f.lost[key] = ch
	}
	return true, ch
}

func (v livenessView) PeerBack(_ ServerID, addr ServerAddress) <-chan struct{} {
	f, key := v.f, [2]ServerAddress{v.self, addr}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down[key] {
		return nil
	}
	ch := f.back[key]
	if ch == nil {
		ch = make(chan struct{})
		f.back[key] = ch
	}
	return ch
}

// set records whether observer sees observed as down.
func (f *fakeLiveness) set(observer, observed ServerAddress, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := [2]ServerAddress{observer, observed}
	f.down[key] = down
	if ch := f.lost[key]; down && ch != nil {
		close(ch)
		delete(f.lost, key)
	}
	if ch := f.back[key]; !down && ch != nil {
		close(ch)
		delete(f.back, key)
	}
}

// setDown makes every node see addr as down (or up again), and addr see
// every other node so.
func (c *quiesceCluster) setDown(addr ServerAddress, down bool) {
	for _, node := range c.nodes {
		if node.addr != addr {
			c.live.set(node.addr, addr, down)
			c.live.set(addr, node.addr, down)
		}
	}
}

// countingTransport counts the AppendEntries RPCs (heartbeats included) a
// node sends; it offers no pipeline, so every one goes through here.
type countingTransport struct {
	*InmemTransport
	appends  atomic.Int64
	inflight atomic.Int64
	// openPipelines and pipelinesOpened count pipelines (cost_test.go).
	openPipelines   atomic.Int64
	pipelinesOpened atomic.Int64
	mu              sync.Mutex
	to              map[ServerAddress]int64 // AppendEntries tried, by target
}

// appendsTo returns the AppendEntries RPCs tried to target so far.
func (c *countingTransport) appendsTo(target ServerAddress) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.to[target]
}

func (c *countingTransport) AppendEntries(id ServerID, target ServerAddress, args *AppendEntriesRequest, resp *AppendEntriesResponse) error {
	c.appends.Add(1)
	c.mu.Lock()
	if c.to == nil {
		c.to = map[ServerAddress]int64{}
	}
	c.to[target]++
	c.mu.Unlock()
	c.inflight.Add(1)
	defer c.inflight.Add(-1)
	return c.InmemTransport.AppendEntries(id, target, args, resp)
}

func (c *countingTransport) AppendEntriesPipeline(ServerID, ServerAddress) (AppendPipeline, error) {
	return nil, ErrPipelineReplicationNotSupported
}

type quiesceNode struct {
	id    ServerID
	addr  ServerAddress
	trans *countingTransport
	logs  *InmemStore
	store *InmemStore
	// stable is store, or what newTestClusterStable wrapped it in.
	stable StableStore
	snaps  *InmemSnapshotStore
	fsm    *MockFSM
	raft   *Raft
}

type quiesceCluster struct {
	t     *testing.T
	live  *fakeLiveness
	nodes []*quiesceNode
	// edit, when set, changes node i's config before it starts.
	edit func(i int, c *Config)
	// transport, when set, wraps a node's countingTransport.
	transport func(*countingTransport) Transport
}

// transportOf returns the transport node runs on.
func (c *quiesceCluster) transportOf(node *quiesceNode) Transport {
	if c.transport != nil {
		return c.transport(node.trans)
	}
	return node.trans
}

func quiesceConfig(id ServerID, live Liveness) *Config {
	c := DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.QuiesceAfter = 50 * time.Millisecond
	c.Liveness = live
	c.Logger = hclog.NewNullLogger()
	return c
}

func newQuiesceCluster(t *testing.T, n int) *quiesceCluster {
	t.Helper()
	return newTestCluster(t, n, nil)
}

func newTestCluster(t *testing.T, n int, edit func(i int, c *Config)) *quiesceCluster {
	t.Helper()
	return newTestClusterStable(t, n, edit, nil)
}

// newTestClusterStable is newTestCluster whose nodes keep term and vote in
// wrap(their InmemStore) when wrap is set.
func newTestClusterStable(t *testing.T, n int, edit func(i int, c *Config), wrap func(*InmemStore) StableStore) *quiesceCluster {
	t.Helper()
	return newTestClusterWith(t, n, edit, wrap, nil)
}

// newTestClusterWith is newTestClusterStable whose nodes use
// transport(their countingTransport) when transport is set.
func newTestClusterWith(t *testing.T, n int, edit func(i int, c *Config), wrap func(*InmemStore) StableStore,
	transport func(*countingTransport) Transport) *quiesceCluster {
	t.Helper()
	c := &quiesceCluster{t: t, live: newFakeLiveness(), edit: edit, transport: transport}
	var servers []Server
	for i := range n {
		addr, trans := NewInmemTransport("")
		node := &quiesceNode{
			id: ServerID(fmt.Sprintf("n%d", i)), addr: addr, trans: &countingTransport{InmemTransport: trans},
			logs: NewInmemStore(), store: NewInmemStore(), snaps: NewInmemSnapshotStore(), fsm: &MockFSM{},
		}
		node.stable = node.store
		if wrap != nil {
			node.stable = wrap(node.store)
		}
		c.nodes = append(c.nodes, node)
		servers = append(servers, Server{Suffrage: Voter, ID: node.id, Address: addr})
	}
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			a.trans.Connect(b.addr, b.trans.InmemTransport)
		}
	}
	for _, node := range c.nodes {
		conf := c.config(node)
		if err := BootstrapCluster(conf, node.logs, node.stable, node.snaps, c.transportOf(node), Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		c.start(node)
	}
	t.Cleanup(func() {
		for _, node := range c.nodes {
			if node.raft != nil {
				_ = node.raft.Shutdown().Error()
			}
		}
	})
	return c
}

func (c *quiesceCluster) start(node *quiesceNode) {
	r, err := NewRaft(c.config(node), node.fsm, node.logs, node.stable, node.snaps, c.transportOf(node))
	if err != nil {
		c.t.Fatal(err)
	}
	node.raft = r
}

func (c *quiesceCluster) config(node *quiesceNode) *Config {
	conf := quiesceConfig(node.id, livenessView{c.live, node.addr})
	if c.edit != nil {
		for i, n := range c.nodes {
			if n == node {
				c.edit(i, conf)
			}
		}
	}
	return conf
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leader waits for exactly one leader among the running nodes.
func (c *quiesceCluster) leader(within time.Duration) *quiesceNode {
	c.t.Helper()
	var leader *quiesceNode
	waitFor(c.t, within, "no single leader", func() bool {
		leader = nil
		for _, node := range c.nodes {
			if node.raft != nil && node.raft.State() == Leader {
				if leader != nil {
					return false
				}
				leader = node
			}
		}
		return leader != nil
	})
	return leader
}

// appendsOver returns the AppendEntries RPCs every node sent during d.
func (c *quiesceCluster) appendsOver(d time.Duration) int64 {
	before := c.totalAppends()
	time.Sleep(d) // an observation window, not a wait for a condition
	return c.totalAppends() - before
}

func (c *quiesceCluster) totalAppends() int64 {
	var n int64
	for _, node := range c.nodes {
		n += node.trans.appends.Load()
	}
	return n
}

// quiesced waits until the cluster sends no RPC for a 200 ms window.
func (c *quiesceCluster) quiesced(within time.Duration) {
	c.t.Helper()
	waitFor(c.t, within, "the group never went quiet", func() bool { return c.appendsOver(200*time.Millisecond) == 0 })
}

func (c *quiesceCluster) apply(leader *quiesceNode, data string) {
	c.t.Helper()
	if err := leader.raft.Apply([]byte(data), time.Second).Error(); err != nil {
		c.t.Fatalf("apply %q: %v", data, err)
	}
}

// applied waits until every running node's FSM holds n entries.
func (c *quiesceCluster) applied(n int, within time.Duration) {
	c.t.Helper()
	waitFor(c.t, within, fmt.Sprintf("not every FSM holds %d entries", n), func() bool {
		for _, node := range c.nodes {
			if node.raft == nil {
				continue
			}
			node.fsm.Lock()
			got := len(node.fsm.logs)
			node.fsm.Unlock()
			if got < n {
				return false
			}
		}
		return true
	})
}

// An idle group sends nothing at all once quiesced, keeps its leader and
// term far past the election timeout, and a new entry wakes it: the entry
// commits on every node, and the group goes quiet again.
func TestQuiesce_IdleGroupSendsNothingAndWakesOnApply(t *testing.T) {
	c := newQuiesceCluster(t, 3)
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.quiesced(5 * time.Second)
	term := leader.raft.getCurrentTerm()

	if n := c.appendsOver(time.Second); n != 0 {
		t.Fatalf("a quiesced group sent %d AppendEntries in 1 s (20 election timeouts)", n)
	}
	if leader.raft.State() != Leader || leader.raft.getCurrentTerm() != term {
		t.Fatalf("the quiesced leader is %v at term %d (was leader at %d)", leader.raft.State(), leader.raft.getCurrentTerm(), term)
	}
	for _, node := range c.nodes {
		if node != leader && node.raft.State() != Follower {
			t.Fatalf("%s is %v while the group is quiesced", node.id, node.raft.State())
		}
	}

	c.apply(leader, "b")
	c.applied(2, 2*time.Second)
	c.quiesced(5 * time.Second)
	if leader.raft.getCurrentTerm() != term {
		t.Fatalf("term moved from %d to %d across a wake", term, leader.raft.getCurrentTerm())
	}
}

// Without quiescence the same cluster keeps heartbeating: the measure the
// other tests rely on does see traffic.
func TestQuiesce_OffKeepsHeartbeating(t *testing.T) {
	c := newQuiesceCluster(t, 3)
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	// Quiescence needs a live peer: with every node reported down, no
	// follower is quiesced and heartbeats go on.
	for _, node := range c.nodes {
		c.setDown(node.addr, true)
	}
	if n := c.appendsOver(300 * time.Millisecond); n < 20 {
		t.Fatalf("only %d AppendEntries in 300 ms without quiescence", n)
	}
}

// A verify on a quiesced leader is answered by real heartbeats: with the
// followers cut off (their nodes still reported up), it fails.
func TestQuiesce_VerifyLeaderNeedsRealAnswers(t *testing.T) {
	c := newQuiesceCluster(t, 3)
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.quiesced(5 * time.Second)
	if err := leader.raft.VerifyLeader().Error(); err != nil {
		t.Fatalf("verify on a quiesced leader with its followers reachable: %v", err)
	}
	// The slower follower's answer to that verify must not count for the
	// next one.
	waitFor(t, 2*time.Second, "heartbeats still in flight", func() bool { return leader.trans.inflight.Load() == 0 })
	leader.trans.DisconnectAll()
	done := make(chan error, 1)
	go func() { done <- leader.raft.VerifyLeader().Error() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("verify succeeded with every follower unreachable")
		}
	case <-time.After(300 * time.Millisecond):
		// Still waiting for answers that cannot come: not verified.
	}
}

// When the quiesced leader's node is lost, the followers elect a new
// leader promptly.
func TestQuiesce_LostLeaderNodeElectsANewLeader(t *testing.T) {
	c := newQuiesceCluster(t, 3)
	old := c.leader(5 * time.Second)
	c.apply(old, "a")
	c.quiesced(5 * time.Second)
	term := old.raft.getCurrentTerm()

	old.trans.DisconnectAll()
	for _, node := range c.nodes {
		node.trans.Disconnect(old.addr)
	}
	c.setDown(old.addr, true)
	start := time.Now()
	var next *quiesceNode
	waitFor(t, 3*time.Second, "no new leader after the leader's node was lost", func() bool {
		for _, node := range c.nodes {
			if node != old && node.raft.State() == Leader {
				next = node
				return true
			}
		}
		return false
	})
	t.Logf("new leader %s after %v", next.id, time.Since(start))
	if next.raft.getCurrentTerm() <= term {
		t.Fatalf("new leader at term %d, old term %d", next.raft.getCurrentTerm(), term)
	}
	c.apply(next, "b")
	// The old leader, cut off from both followers, steps down by its lease.
	waitFor(t, 2*time.Second, "the cut-off leader never stepped down", func() bool { return old.raft.State() != Leader })
}

// A quiesced leader whose followers' nodes are both lost steps down by
// its lease; while one is still up it keeps leading.
func TestQuiesce_LeaseCountsOnlyLiveFollowers(t *testing.T) {
	c := newQuiesceCluster(t, 3)
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.quiesced(5 * time.Second)
	var followers []*quiesceNode
	for _, node := range c.nodes {
		if node != leader {
			followers = append(followers, node)
		}
	}
	leader.trans.Disconnect(followers[0].addr)
	c.setDown(followers[0].addr, true)
	if n := c.appendsOver(500 * time.Millisecond); leader.raft.State() != Leader {
		t.Fatalf("leader stepped down with one follower lost and one up (%d appends)", n)
	}
	leader.trans.Disconnect(followers[1].addr)
	c.setDown(followers[1].addr, true)
	waitFor(t, 2*time.Second, "leader kept leading with both followers lost", func() bool { return leader.raft.State() != Leader })
}

// A follower that lost its quiescence by itself (a reordered message, say)
// times out and asks for votes; the leader wakes it instead of letting it
// campaign forever, and the term does not move (pre-vote).
func TestQuiesce_VoteRequestWakesTheFollower(t *testing.T) {
	c := newQuiesceCluster(t, 3)
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.quiesced(5 * time.Second)
	term := leader.raft.getCurrentTerm()
	var f *quiesceNode
	for _, node := range c.nodes {
		if node != leader {
			f = node
			break
		}
	}
	sent := leader.trans.appends.Load()
	f.raft.noteLeaderQuiesce(false) // as if an un-quiesce arrived that the leader never sent
	waitFor(t, 3*time.Second, "the leader never woke the follower", func() bool {
		return leader.trans.appends.Load() > sent && leader.raft.State() == Leader &&
			f.raft.State() == Follower && f.raft.Leader() == leader.addr
	})
	if leader.raft.getCurrentTerm() != term {
		t.Fatalf("term moved from %d to %d", term, leader.raft.getCurrentTerm())
	}
	c.quiesced(5 * time.Second)
}

// A follower restarted while the group is quiesced (its node lost and
// back) learns the leader again and gets new entries.
func TestQuiesce_RestartedFollowerRejoins(t *testing.T) {
	c := newQuiesceCluster(t, 3)
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.quiesced(5 * time.Second)
	var f *quiesceNode
	for _, node := range c.nodes {
		if node != leader {
			f = node
			break
		}
	}
	c.setDown(f.addr, true)
	if err := f.raft.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	f.fsm = &MockFSM{}
	c.setDown(f.addr, false)
	c.start(f)
	waitFor(t, 3*time.Second, "the restarted follower never learnt the leader", func() bool { return f.raft.Leader() == leader.addr })
	c.apply(leader, "b")
	c.applied(2, 3*time.Second)
}

// Quiescence is off unless a Liveness is given, and a negative delay is
// refused.
func TestQuiesce_ConfigNeedsLiveness(t *testing.T) {
	conf := quiesceConfig("n0", nil)
	if err := ValidateConfig(conf); err == nil {
		t.Fatal("QuiesceAfter without a Liveness was accepted")
	}
	conf = quiesceConfig("n0", livenessView{newFakeLiveness(), "a"})
	conf.QuiesceAfter = -time.Second
	if err := ValidateConfig(conf); err == nil {
		t.Fatal("a negative QuiesceAfter was accepted")
	}
}

// A follower of a quiesced group that comes back with an empty disk is
// rebuilt without waiting for a new entry: waking it (its node was lost)
// also sets the leader's replication going again, which would otherwise
// wait, timer-less, for the next entry.
func TestQuiesce_WipedFollowerCatchesUpWithoutANewEntry(t *testing.T) {
	c := newQuiesceCluster(t, 3)
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.quiesced(5 * time.Second)
	var f *quiesceNode
	for _, node := range c.nodes {
		if node != leader {
			f = node
			break
		}
	}
	c.setDown(f.addr, true)
	if err := f.raft.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	f.fsm, f.logs, f.store, f.snaps = &MockFSM{}, NewInmemStore(), NewInmemStore(), NewInmemSnapshotStore()
	f.stable = f.store
	c.setDown(f.addr, false)
	c.start(f)
	c.applied(1, 3*time.Second)
}

// A new leader whose log holds nothing after its own no-op tells its
// followers the commit index as soon as the no-op commits (not after
// CommitTimeout) and quiesces them after a tenth of QuiesceAfter; once an
// entry follows, the whole QuiesceAfter applies.
func TestQuiesce_NewLeaderQuiescesSooner(t *testing.T) {
	const after = 2 * time.Second
	c := newTestCluster(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter = after
		conf.CommitTimeout = after // the commit index must not wait for the paced empty append
	})
	leader := c.leader(5 * time.Second)
	elected := time.Now()
	c.quiesced(5 * time.Second)
	if d := time.Since(elected); d >= after/2 {
		t.Fatalf("a leader with only its no-op quiesced %v after its election (QuiesceAfter %v, CommitTimeout %v)", d, after, after)
	}
	c.apply(leader, "a")
	if n := c.appendsOver(after / 2); n == 0 {
		t.Fatalf("the group went quiet within %v of a client entry (QuiesceAfter %v)", after/2, after)
	}
	c.quiesced(5 * time.Second)
}
