// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

// Tests of Ferry's cheaper elections and lost-node handling (see FORK.md,
// election.go, campaign.go and quiesce.go).

package raft

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// batchStable is a StableBatchStore over an InmemStore that counts the
// durable writes: each Set, SetUint64 and SetBatch is one.
type batchStable struct {
	*InmemStore
	writes  atomic.Int64
	batches atomic.Int64
	mu      sync.Mutex
	log     [][]StableWrite // every SetBatch, in order
	singles []string        // the key of every Set and SetUint64, in order
}

func (b *batchStable) single(k []byte) {
	b.writes.Add(1)
	b.mu.Lock()
	b.singles = append(b.singles, string(k))
	b.mu.Unlock()
}

func (b *batchStable) Set(k, v []byte) error {
	b.single(k)
	return b.InmemStore.Set(k, v)
}

func (b *batchStable) SetUint64(k []byte, v uint64) error {
	b.single(k)
	return b.InmemStore.SetUint64(k, v)
}

func (b *batchStable) SetBatch(ws []StableWrite) error {
	b.writes.Add(1)
	b.batches.Add(1)
	b.mu.Lock()
	b.log = append(b.log, ws)
	b.mu.Unlock()
	for _, w := range ws {
		var err error
		if w.IsUint64 {
			err = b.InmemStore.SetUint64(w.Key, w.Uint64)
		} else {
			err = b.InmemStore.Set(w.Key, w.Val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// An election with a StableBatchStore stores the new term and the vote
// with one write on the candidate and one on each voter (upstream: three
// each), and what it stores is what upstream stores: every node's term is
// the new leader's, and its vote in that term is for the new leader.
func TestElection_TermAndVoteInOneWrite(t *testing.T) {
	c := newTestClusterStable(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter, conf.Liveness = 0, nil
		conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	}, func(s *InmemStore) StableStore { return &batchStable{InmemStore: s} })
	leader := c.leader(5 * time.Second)
	term := leader.raft.getCurrentTerm()
	// Everybody's writes since the start: the bootstrap stores nothing in
	// the stable store; an election that stores term and vote together
	// costs its candidate one write and each granting voter one.
	for _, node := range c.nodes {
		b := node.stable.(*batchStable)
		if b.batches.Load() == 0 && node == leader {
			t.Fatalf("the leader %s stored its term and vote without SetBatch (%d writes)", node.id, b.writes.Load())
		}
		b.mu.Lock()
		singles := b.singles
		b.mu.Unlock()
		// A term is stored alone by the bootstrap and when a node learns
		// of a newer term without voting in it; a vote, never.
		for _, k := range singles {
			if k != string(keyCurrentTerm) {
				t.Errorf("%s: stored %q alone (all: %q): a vote without its term", node.id, k, singles)
			}
		}
		if got, _ := b.InmemStore.GetUint64(keyCurrentTerm); got != term && node.raft.getCurrentTerm() == term {
			t.Errorf("%s: stored term %d, in memory %d", node.id, got, node.raft.getCurrentTerm())
		}
		b.mu.Lock()
		for _, ws := range b.log {
			if len(ws) != 3 || !bytes.Equal(ws[0].Key, keyCurrentTerm) || !bytes.Equal(ws[1].Key, keyLastVoteTerm) ||
				!bytes.Equal(ws[2].Key, keyLastVoteCand) || ws[0].Uint64 != ws[1].Uint64 {
				t.Errorf("%s: batch %+v is not (term, vote term, candidate) of one term", node.id, ws)
			}
		}
		b.mu.Unlock()
	}
	voteTerm, _ := leader.stable.GetUint64(keyLastVoteTerm)
	cand, _ := leader.stable.Get(keyLastVoteCand)
	if voteTerm != term || !bytes.Equal(cand, leader.raft.trans.EncodePeer(leader.id, leader.addr)) {
		t.Fatalf("the leader's stored vote is (%d, %q), want (%d, itself)", voteTerm, cand, term)
	}
	c.apply(leader, "a")
	c.applied(1, 5*time.Second)
}

// A vote request that raises a voter's term but is refused (the
// candidate's log is behind) still stores the new term, alone, before it
// is answered.
func TestElection_RefusedVoteStillStoresTheRaisedTerm(t *testing.T) {
	c := newTestClusterStable(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter, conf.Liveness = 0, nil
	}, func(s *InmemStore) StableStore { return &batchStable{InmemStore: s} })
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.applied(1, 5*time.Second)
	var voter *quiesceNode
	for _, node := range c.nodes {
		if node != leader {
			voter = node
			break
		}
	}
	term := voter.raft.getCurrentTerm()
	// The leader's identity with an empty log, as a restarted leader whose
	// disk was wiped would ask.
	req := &RequestVoteRequest{
		RPCHeader: RPCHeader{ProtocolVersion: ProtocolVersionMax, ID: []byte(leader.id), Addr: leader.raft.trans.EncodePeer(leader.id, leader.addr)},
		Term:      term + 5,
		// Past the "we have a leader" check, as a transfer's candidate.
		LeadershipTransfer: true,
	}
	var resp RequestVoteResponse
	if err := voter.trans.RequestVote(voter.id, voter.addr, req, &resp); err != nil {
		t.Fatalf("vote request: %v", err)
	}
	if resp.Granted {
		t.Fatal("a vote was granted to a candidate with an empty log")
	}
	stored, _ := voter.store.GetUint64(keyCurrentTerm)
	if stored < term+5 || resp.Term < term+5 {
		t.Fatalf("refused vote at term %d: stored term %d, answered term %d", term+5, stored, resp.Term)
	}
}

// cutOff makes node unreachable from every other node and lost to their
// Liveness, as a killed process is.
func (c *quiesceCluster) cutOff(node *quiesceNode) {
	node.trans.DisconnectAll()
	for _, other := range c.nodes {
		other.trans.Disconnect(node.addr)
	}
	c.setDown(node.addr, true)
}

// A leader sends a follower whose node Liveness reports lost neither
// heartbeats nor retries (upstream: one every few tens of milliseconds,
// each failing), and resumes at once when the node is back.
func TestElection_NoHeartbeatsToALostNodeUntilItIsBack(t *testing.T) {
	c := newTestCluster(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter = 0 // heartbeats as upstream sends them; Liveness stays
		conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	})
	leader := c.leader(5 * time.Second)
	var lost *quiesceNode
	for _, node := range c.nodes {
		if node != leader {
			lost = node
			break
		}
	}
	leader.trans.Disconnect(lost.addr)
	c.live.set(leader.addr, lost.addr, true)
	time.Sleep(100 * time.Millisecond) // let a heartbeat in flight finish
	before := leader.trans.appendsTo(lost.addr)
	time.Sleep(time.Second) // an observation window, not a wait for a condition
	if n := leader.trans.appendsTo(lost.addr) - before; n > 1 {
		t.Fatalf("%d AppendEntries tried in 1 s to a follower whose node is lost (the slow retry comes after 4 s; one may have been under way)", n)
	}
	if leader.raft.State() != Leader {
		t.Fatal("the leader stepped down with one follower lost")
	}

	leader.trans.Connect(lost.addr, lost.trans.InmemTransport)
	before = leader.trans.appendsTo(lost.addr)
	back := time.Now()
	c.live.set(leader.addr, lost.addr, false)
	waitFor(t, 2*time.Second, "no heartbeat after the node was back", func() bool {
		return leader.trans.appendsTo(lost.addr) > before
	})
	// The slow retry comes after lostPeerRetryScale heartbeat timeouts at
	// the earliest.
	if d := time.Since(back); d > 400*time.Millisecond {
		t.Fatalf("first heartbeat %v after the node was back: it waited for the retry, not for Liveness", d)
	}
	c.apply(leader, "a")
	c.applied(1, 5*time.Second)
}

// A busy group (not quiesced) whose leader's node is lost elects a new
// leader without waiting out its heartbeat timeout, and its follower asks
// for a campaign slot with priority; an idle (quiesced) group asks
// without, and so does a group that is not quiesced but got no entries
// for longer than campaignPriorityWindow heartbeat timeouts.
func TestElection_UnquiescedGroupWithoutEntriesAsksWithoutPriority(t *testing.T) {
	limiters := make([]*testLimiter, 3)
	const hb = 300 * time.Millisecond
	c := newTestCluster(t, 3, func(i int, conf *Config) {
		limiters[i] = &testLimiter{capacity: 4}
		conf.Campaigns = limiters[i]
		conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = hb, hb, hb
		conf.QuiesceAfter = time.Hour
	})
	old := c.leader(10 * time.Second)
	c.apply(old, "a")
	c.applied(1, 5*time.Second)
	quiet := time.Now()
	waitFor(t, 10*time.Second, "the window of the last entries to pass", func() bool {
		return time.Since(quiet) > (campaignPriorityWindow+1)*hb
	})
	c.cutOff(old)
	waitFor(t, 10*time.Second, "no new leader", func() bool {
		for _, node := range c.nodes {
			if node != old && node.raft.State() == Leader {
				return true
			}
		}
		return false
	})
	for i, l := range limiters {
		l.mu.Lock()
		asks := l.priorityAsks
		l.mu.Unlock()
		if c.nodes[i] != old && asks > 0 {
			t.Errorf("%s asked for %d campaign slots with priority after heartbeats only", c.nodes[i].id, asks)
		}
	}
}

// TestElection_BusyGroupFailsOverFirst: see the test above.
func TestElection_BusyGroupFailsOverFirst(t *testing.T) {
	for _, busy := range []bool{true, false} {
		limiters := make([]*testLimiter, 3)
		c := newTestCluster(t, 3, func(i int, conf *Config) {
			limiters[i] = &testLimiter{capacity: 4}
			conf.Campaigns = limiters[i]
			conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Second, time.Second, time.Second
			if busy {
				conf.QuiesceAfter = time.Hour
			}
		})
		old := c.leader(10 * time.Second)
		c.apply(old, "a")
		c.applied(1, 5*time.Second)
		if !busy {
			c.quiesced(10 * time.Second)
		}
		start := time.Now()
		c.cutOff(old)
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
		took := time.Since(start)
		t.Logf("busy=%v: new leader %s after %v", busy, next.id, took)
		if busy && took > 700*time.Millisecond {
			t.Errorf("a busy group took %v to elect after its leader's node was lost (heartbeat timeout 1 s)", took)
		}
		var asks int
		for i, l := range limiters {
			if c.nodes[i] != old {
				l.mu.Lock()
				asks += l.priorityAsks
				l.mu.Unlock()
			}
		}
		if busy != (asks > 0) {
			t.Errorf("busy=%v: %d campaign slots asked with priority", busy, asks)
		}
	}
}
