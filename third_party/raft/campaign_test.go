// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

// Tests of Ferry's campaign bound (see FORK.md and campaign.go).

package raft

import (
	"sync"
	"testing"
	"time"
)

// testLimiter is a CampaignLimiter of a fixed capacity that records the
// most slots ever held at once.
type testLimiter struct {
	mu            sync.Mutex
	capacity      int
	held, maxHeld int
	refused       int
	priorityAsks  int // TryAcquire calls with priority
}

func (l *testLimiter) TryAcquire(priority bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if priority {
		l.priorityAsks++
	}
	if l.held >= l.capacity {
		l.refused++
		return false
	}
	l.held++
	if l.held > l.maxHeld {
		l.maxHeld = l.held
	}
	return true
}

func (l *testLimiter) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == 0 {
		panic("release of a slot never taken")
	}
	l.held--
}

// Wait has no queue: the wake fires at once and the caller tries again.
func (l *testLimiter) Wait(bool) (<-chan struct{}, func(bool)) {
	ch := make(chan struct{}, 1)
	go func() {
		time.Sleep(10 * time.Millisecond)
		ch <- struct{}{}
	}()
	return ch, func(bool) {}
}

func (l *testLimiter) state() (held, maxHeld, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held, l.maxHeld, l.refused
}

// A follower that finds no slot never campaigns: the other follower wins,
// with its vote.
func TestCampaign_NoSlotNoCampaign(t *testing.T) {
	none := &testLimiter{capacity: 0}
	c := newTestCluster(t, 3, func(i int, conf *Config) {
		conf.QuiesceAfter, conf.Liveness = 0, nil
		conf.Campaigns = &testLimiter{capacity: 4}
		if i == 1 {
			conf.Campaigns = none
		}
	})
	// Node 0 leads, so that node 1 is first in order (rank 0) once node 0
	// is cut off: it would campaign first, but has no slot.
	old := c.leader(5 * time.Second)
	if old != c.nodes[0] {
		if err := old.raft.LeadershipTransferToServer(c.nodes[0].id, c.nodes[0].addr).Error(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "leadership moved", func() bool { return c.nodes[0].raft.State() == Leader })
		old = c.nodes[0]
	}
	states := make(chan Observation, 64)
	c.nodes[1].raft.RegisterObserver(NewObserver(states, false, func(o *Observation) bool {
		_, ok := o.Data.(RaftState)
		return ok
	}))
	old.trans.DisconnectAll()
	for _, node := range c.nodes {
		node.trans.Disconnect(old.addr)
	}
	var next *quiesceNode
	waitFor(t, 5*time.Second, "no new leader", func() bool {
		for _, node := range c.nodes {
			if node != old && node.raft.State() == Leader {
				next = node
				return true
			}
		}
		return false
	})
	if next == c.nodes[1] {
		t.Fatal("the follower without a campaign slot won an election")
	}
	for len(states) > 0 {
		if o := <-states; o.Data.(RaftState) == Candidate {
			t.Fatal("the follower without a campaign slot became a candidate")
		}
	}
	if _, _, refused := none.state(); refused == 0 {
		t.Fatal("the follower never asked for a campaign slot")
	}
}

// Many groups on three nodes share one limiter per node; when the node
// leading them is cut off, every group elects a new leader, no node ever
// has more candidates than slots, and every slot is released afterwards.
func TestCampaign_ManyGroupsShareFewSlots(t *testing.T) {
	limiters := []*testLimiter{{capacity: 2}, {capacity: 2}, {capacity: 2}}
	const groups = 12
	var clusters []*quiesceCluster
	for range groups {
		clusters = append(clusters, newTestCluster(t, 3, func(i int, conf *Config) {
			conf.QuiesceAfter, conf.Liveness = 0, nil
			conf.Campaigns = limiters[i]
		}))
	}
	// Move every group's leadership to node 0, then cut node 0 off.
	for _, c := range clusters {
		l := c.leader(5 * time.Second)
		if l != c.nodes[0] {
			if err := l.raft.LeadershipTransferToServer(c.nodes[0].id, c.nodes[0].addr).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range clusters {
		waitFor(t, 5*time.Second, "leadership on node 0", func() bool { return c.nodes[0].raft.State() == Leader })
	}
	// The surviving nodes' slots are all taken when node 0 goes: every
	// group's first try must be refused (the bound is exercised whatever
	// the timing), and none may campaign until the slots come back.
	for _, l := range limiters[1:] {
		for range l.capacity {
			if !l.TryAcquire(false) {
				t.Fatal("a fresh limiter refused a slot")
			}
		}
	}
	for _, c := range clusters {
		c.nodes[0].trans.DisconnectAll()
		for _, node := range c.nodes[1:] {
			node.trans.Disconnect(c.nodes[0].addr)
		}
	}
	for _, l := range limiters[1:] {
		waitFor(t, 10*time.Second, "a campaign refused for want of a slot", func() bool { _, _, r := l.state(); return r > 0 })
	}
	for _, c := range clusters {
		for _, node := range c.nodes[1:] {
			if node.raft.State() == Candidate || node.raft.State() == Leader {
				t.Fatalf("a group campaigned with no slot free: %v", node.raft.State())
			}
		}
	}
	for _, l := range limiters[1:] {
		for range l.capacity {
			l.Release()
		}
	}
	for _, c := range clusters {
		waitFor(t, 10*time.Second, "a group without a new leader", func() bool {
			return c.nodes[1].raft.State() == Leader || c.nodes[2].raft.State() == Leader
		})
	}
	refused := 0
	for _, l := range limiters[1:] {
		waitFor(t, 5*time.Second, "slots still held", func() bool { held, _, _ := l.state(); return held == 0 })
		_, _, r := l.state()
		refused += r
	}
	if refused == 0 {
		t.Fatal("12 groups timing out together never found the 2 slots of a node taken: the bound was not exercised")
	}
}

// A candidate that cannot win (its quorum is cut off) hands its slot back
// after a few rounds, so that groups that can win are not kept waiting.
func TestCampaign_HopelessCandidateYieldsItsSlot(t *testing.T) {
	one := &testLimiter{capacity: 1}
	c := newTestCluster(t, 3, func(i int, conf *Config) {
		conf.QuiesceAfter, conf.Liveness = 0, nil
		if i == 0 {
			conf.Campaigns = one
		}
	})
	c.leader(5 * time.Second)
	lonely := c.nodes[0]
	lonely.trans.DisconnectAll()
	for _, node := range c.nodes[1:] {
		node.trans.Disconnect(lonely.addr)
	}
	waitFor(t, 5*time.Second, "the cut-off node never campaigned", func() bool { _, maxHeld, _ := one.state(); return maxHeld == 1 })
	waitFor(t, 5*time.Second, "the hopeless candidate kept its slot", func() bool {
		held, _, _ := one.state()
		return held == 0 && lonely.raft.State() != Leader
	})
}

// When a quiesced group's leader node is lost, the first voter in
// configuration order (the lost leader left out) campaigns first and wins
// unopposed: the term moves by one.
func TestCampaign_FirstInOrderWinsAfterALostLeader(t *testing.T) {
	for round := range 3 {
		c := newTestCluster(t, 3, func(_ int, conf *Config) {
			conf.Campaigns = &testLimiter{capacity: 4}
			// Timeouts long against a -race run's pauses.
			conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
		})
		old := c.leader(5 * time.Second)
		c.apply(old, "a")
		c.quiesced(5 * time.Second)
		term := old.raft.getCurrentTerm()
		var first *quiesceNode
		for _, node := range c.nodes {
			if node != old {
				first = node // nodes are bootstrapped in this order
				break
			}
		}
		old.trans.DisconnectAll()
		for _, node := range c.nodes {
			node.trans.Disconnect(old.addr)
		}
		c.setDown(old.addr, true)
		waitFor(t, 5*time.Second, "no new leader", func() bool {
			for _, node := range c.nodes {
				if node != old && node != first && node.raft.State() == Leader {
					t.Fatalf("round %d: %s won, not the first in order %s", round, node.id, first.id)
				}
			}
			return first.raft.State() == Leader
		})
		if got := first.raft.getCurrentTerm(); got != term+1 {
			t.Fatalf("round %d: the first in order won at term %d, after %d: the vote was split", round, got, term)
		}
	}
}

// campaignRanks returns the rank of each of ids in a group of those
// voters with seed, silent left out.
func campaignRanks(ids []ServerID, seed uint64, silent ServerID) map[ServerID]time.Duration {
	var conf Configuration
	for _, id := range ids {
		conf.Servers = append(conf.Servers, Server{Suffrage: Voter, ID: id, Address: ServerAddress(id)})
	}
	ranks := map[ServerID]time.Duration{}
	for _, id := range ids {
		r := &Raft{localID: id}
		r.configurations.latest = conf
		r.conf.Store(Config{CampaignSeed: seed})
		ranks[id] = r.campaignRank(silent)
	}
	return ranks
}

// The seed rotates who campaigns first among the voters a silent leader
// leaves: every replica agrees on the ranks, they are a permutation, and
// across seeds each survivor is first as often as the other. A new group
// (no silent leader) keeps configuration order: the preferred replica,
// listed first, campaigns first.
func TestCampaign_SeedSpreadsTheFirstRank(t *testing.T) {
	ids := []ServerID{"n1", "n2", "n3"}
	first := map[ServerID]int{}
	for seed := range uint64(10) {
		ranks := campaignRanks(ids, seed, "n3")
		if ranks["n1"]+ranks["n2"] != 1 || ranks["n1"] == ranks["n2"] {
			t.Fatalf("seed %d: ranks %v are not 0 and 1 for the two survivors", seed, ranks)
		}
		for id, rank := range ranks {
			if rank == 0 && id != "n3" {
				first[id]++
			}
		}
	}
	if first["n1"] != 5 || first["n2"] != 5 {
		t.Fatalf("first ranks over 10 seeds: %v, want 5 each", first)
	}
	for seed := range uint64(3) {
		if r := campaignRanks(ids, seed, ""); r["n1"] != 0 || r["n2"] != 1 || r["n3"] != 2 {
			t.Fatalf("seed %d without a silent leader: ranks %v, want configuration order", seed, r)
		}
	}
}

func TestCampaignPriority(t *testing.T) {
	now := time.Unix(1000, 0)
	const hb = 500 * time.Millisecond
	cases := []struct {
		name           string
		idle, quiesced bool
		lastEntries    time.Time
		want           bool
	}{
		{"entries just before the leader went silent", false, false, now.Add(-600 * time.Millisecond), true},
		{"entries at the edge of the window", false, false, now.Add(-campaignPriorityWindow * hb), true},
		{"heartbeats only for longer than the window", false, false, now.Add(-campaignPriorityWindow*hb - time.Millisecond), false},
		{"never any entries", false, false, time.Unix(0, 0), false},
		{"quiesced", false, true, now, false},
		{"idle (leader's node lost while quiesced)", true, false, now, false},
	}
	for _, tc := range cases {
		if got := campaignPriority(tc.idle, tc.quiesced, tc.lastEntries, now, hb); got != tc.want {
			t.Errorf("%s: priority %v, want %v", tc.name, got, tc.want)
		}
	}
}

// When the follower ranked first after a lost leader is behind its peer
// (a busy group: the leader died with entries on their way), its pre-vote
// is refused for its shorter log, and the peer, which refused it, campaigns
// at its next timeout instead of waiting out its rank (two election
// timeouts, 10 s here): the group has a leader well within that.
func TestCampaign_RefusingAShorterLogSkipsTheRankWait(t *testing.T) {
	c := newTestCluster(t, 3, func(_ int, conf *Config) {
		conf.Campaigns = &testLimiter{capacity: 4}
		conf.HeartbeatTimeout, conf.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond
		conf.ElectionTimeout = 5 * time.Second
	})
	old := c.leader(10 * time.Second)
	c.apply(old, "a")
	var ids []ServerID
	for _, node := range c.nodes {
		ids = append(ids, node.id)
	}
	ranks := campaignRanks(ids, old.raft.config().CampaignSeed, old.id)
	var behind, ahead *quiesceNode
	for _, node := range c.nodes {
		switch {
		case node == old:
		case ranks[node.id] == 0:
			behind = node
		default:
			ahead = node
		}
	}
	// The first-ranked follower misses the next entry; the other has it.
	old.trans.Disconnect(behind.addr)
	behind.trans.Disconnect(old.addr)
	c.apply(old, "b")
	waitFor(t, 5*time.Second, "the entry on the other follower", func() bool {
		return ahead.raft.getLastIndex() == old.raft.getLastIndex()
	})
	if behind.raft.getLastIndex() >= ahead.raft.getLastIndex() {
		t.Fatalf("the first-ranked follower is not behind: %d against %d", behind.raft.getLastIndex(), ahead.raft.getLastIndex())
	}
	old.trans.DisconnectAll()
	for _, node := range c.nodes {
		node.trans.Disconnect(old.addr)
	}
	c.setDown(old.addr, true)
	waitFor(t, 5*time.Second, "the follower with the longer log to lead", func() bool {
		if behind.raft.State() == Leader {
			t.Fatal("the follower with the shorter log won")
		}
		return ahead.raft.State() == Leader
	})
}
