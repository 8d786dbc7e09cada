// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

// Tests of Ferry's abstaining servers and leader-side replication progress
// (see FORK.md and rejoin.go).

package raft

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// addEmptyNode starts a node with empty stores, connected to every other
// node and abstaining, as a wiped or newly placed replica starts.
func (c *quiesceCluster) addEmptyNode() *quiesceNode {
	c.t.Helper()
	addr, trans := NewInmemTransport("")
	node := &quiesceNode{
		id: ServerID(fmt.Sprintf("n%d", len(c.nodes))), addr: addr, trans: &countingTransport{InmemTransport: trans},
		logs: NewInmemStore(), store: NewInmemStore(), snaps: NewInmemSnapshotStore(), fsm: &MockFSM{},
	}
	node.stable = node.store
	for _, other := range c.nodes {
		other.trans.Connect(node.addr, node.trans.InmemTransport)
		node.trans.Connect(other.addr, other.trans.InmemTransport)
	}
	node.trans.Connect(node.addr, node.trans.InmemTransport)
	c.nodes = append(c.nodes, node)
	conf := c.config(node)
	conf.Abstain = true
	r, err := NewRaft(conf, node.fsm, node.logs, node.stable, node.snaps, node.trans)
	if err != nil {
		c.t.Fatal(err)
	}
	node.raft = r
	return node
}

func (c *quiesceCluster) followers(leader *quiesceNode) []*quiesceNode {
	var out []*quiesceNode
	for _, node := range c.nodes {
		if node != leader && node.raft != nil {
			out = append(out, node)
		}
	}
	return out
}

// An abstaining voter refuses votes and pre-votes and never campaigns: with
// the leader gone, the group elects nobody until it stops abstaining, and
// then elects a leader that holds every committed entry.
func TestRejoin_AbstainingVoterNeitherVotesNorCampaigns(t *testing.T) {
	c := newTestCluster(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter, conf.Liveness = 0, nil
		conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	})
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.applied(1, 5*time.Second)
	f := c.followers(leader)
	abstainer, other := f[0], f[1]
	abstainer.raft.SetAbstain(true)
	if !abstainer.raft.Abstaining() {
		t.Fatal("Abstaining() is false after SetAbstain(true)")
	}
	c.cutOff(leader)
	_ = leader.raft.Shutdown().Error()
	leader.raft = nil
	// Ten election timeouts: the other follower campaigns again and again
	// and must win none of them.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if abstainer.raft.State() != Follower {
			t.Fatalf("the abstaining server became %v", abstainer.raft.State())
		}
		if other.raft.State() == Leader {
			t.Fatal("a leader was elected with the only other voter abstaining")
		}
		time.Sleep(10 * time.Millisecond)
	}
	abstainer.raft.SetAbstain(false)
	waitFor(t, 5*time.Second, "no leader once the server stopped abstaining", func() bool {
		return abstainer.raft.State() == Leader || other.raft.State() == Leader
	})
}

// A leadership transfer to an abstaining server fails and leaves the
// leader in place.
func TestRejoin_TransferToAnAbstainingServerFails(t *testing.T) {
	c := newTestCluster(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter, conf.Liveness = 0, nil
	})
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.applied(1, 5*time.Second)
	target := c.followers(leader)[0]
	target.raft.SetAbstain(true)
	if err := leader.raft.LeadershipTransferToServer(target.id, target.addr).Error(); err == nil {
		t.Fatal("leadership moved to an abstaining server")
	}
	if target.raft.State() == Leader {
		t.Fatal("the abstaining server leads")
	}
}

// ReplicationProgress shows a non-voter catching up: its match index
// reaches the commit index, its suffrage is reported, and the
// configuration index is the one a conditioned promotion needs.
func TestRejoin_ProgressShowsANonvoterCatchingUp(t *testing.T) {
	c := newTestCluster(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter, conf.Liveness = 0, nil
	})
	leader := c.leader(5 * time.Second)
	for i := range 20 {
		c.apply(leader, fmt.Sprint(i))
	}
	if _, err := c.followers(leader)[0].raft.ReplicationProgress(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower's ReplicationProgress: %v, want ErrNotLeader", err)
	}
	learner := c.addEmptyNode()
	if err := leader.raft.AddNonvoter(learner.id, learner.addr, 0, time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	var p ReplicationProgress
	waitFor(t, 5*time.Second, "the learner never caught up", func() bool {
		var err error
		if p, err = leader.raft.ReplicationProgress(); err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Servers {
			if s.ID == learner.id {
				return s.Suffrage == Nonvoter && s.Match >= p.CommitIndex
			}
		}
		return false
	})
	if len(p.Servers) != 4 || p.ConfigurationIndex == 0 || p.CommitIndex < 21 {
		t.Fatalf("progress %+v: want 4 servers, a configuration index and every entry committed", p)
	}
	for _, s := range p.Servers {
		if s.ID == leader.id && s.Match != p.LastIndex {
			t.Fatalf("the leader's own match %d, want its last index %d", s.Match, p.LastIndex)
		}
	}
	// A promotion conditioned on an older configuration is refused; on
	// the current one it applies.
	if err := leader.raft.AddVoter(learner.id, learner.addr, p.ConfigurationIndex-1, time.Second).Error(); err == nil {
		t.Fatal("a promotion conditioned on a stale configuration applied")
	}
	if err := leader.raft.AddVoter(learner.id, learner.addr, p.ConfigurationIndex, time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the learner is not a voter in the leader's progress", func() bool {
		p, err := leader.raft.ReplicationProgress()
		if err != nil {
			return false
		}
		for _, s := range p.Servers {
			if s.ID == learner.id {
				return s.Suffrage == Voter
			}
		}
		return false
	})
}

// A snapshot no newer than what a follower has applied (a late one from a
// leader's second replication stream) is acknowledged without being
// installed: the follower's state machine does not roll back and its log
// keeps every entry.
func TestRejoin_StaleSnapshotIsNotInstalled(t *testing.T) {
	c := newTestCluster(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter, conf.Liveness = 0, nil
	})
	leader := c.leader(5 * time.Second)
	for i := range 10 {
		c.apply(leader, fmt.Sprint(i))
	}
	c.applied(10, 5*time.Second)
	follower := c.followers(leader)[0]
	applied := follower.raft.AppliedIndex()
	lastIdx := follower.raft.LastIndex()
	// A snapshot of the first entries only, as the leader took it earlier.
	var buf bytes.Buffer
	enc := codec.NewEncoder(&buf, &codec.MsgpackHandle{})
	if err := enc.Encode(follower.fsm.Logs()[:2]); err != nil {
		t.Fatal(err)
	}
	conf := follower.raft.GetConfiguration().Configuration()
	req := &InstallSnapshotRequest{
		RPCHeader: leader.raft.getRPCHeader(), SnapshotVersion: SnapshotVersionMax, Term: leader.raft.getCurrentTerm(),
		LastLogIndex: 3, LastLogTerm: leader.raft.getCurrentTerm(), Configuration: EncodeConfiguration(conf),
		ConfigurationIndex: 1, Size: int64(buf.Len()),
	}
	var resp InstallSnapshotResponse
	if err := leader.trans.InstallSnapshot(follower.id, follower.addr, req, &resp, &buf); err != nil {
		t.Fatal(err)
	}
	if !resp.Success {
		t.Fatal("a stale snapshot was refused: the leader would retry it forever")
	}
	if got := len(follower.fsm.Logs()); got != 10 || follower.raft.AppliedIndex() != applied || follower.raft.LastIndex() != lastIdx {
		t.Fatalf("after a stale snapshot: %d entries in the FSM (want 10), applied %d (was %d), last index %d (was %d)",
			got, follower.raft.AppliedIndex(), applied, follower.raft.LastIndex(), lastIdx)
	}
	c.apply(leader, "after")
	c.applied(11, 5*time.Second)
}

// serverProgress returns the leader's progress of server id.
func serverProgress(t *testing.T, leader *quiesceNode, id ServerID) ServerProgress {
	t.Helper()
	p, err := leader.raft.ReplicationProgress()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Servers {
		if s.ID == id {
			return s
		}
	}
	return ServerProgress{}
}

// A leader learns from each server's answers whether it abstains: a new
// learner reports it, quiesces like any follower (and then answers
// nothing), and once it stops abstaining a wake has it answer again and
// say so. Only the leader wakes followers.
func TestRejoin_AnswersReportAbstaining(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	learner := c.addEmptyNode()
	if err := leader.raft.AddNonvoter(learner.id, learner.addr, 0, time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	for _, f := range c.followers(leader) {
		if f != learner && serverProgress(t, leader, f.id).Abstain != Votes {
			// Voters answered the entries above, saying they vote.
			waitFor(t, 5*time.Second, "a voter is not reported voting", func() bool {
				return serverProgress(t, leader, f.id).Abstain == Votes
			})
		}
	}
	waitFor(t, 5*time.Second, "the learner is not reported abstaining and quiesced", func() bool {
		s := serverProgress(t, leader, learner.id)
		return s.Abstain == Abstains && s.Quiesced && s.AckedCommit == s.Match && s.NextIndex == s.Match+1
	})
	learner.raft.SetAbstain(false)
	if s := serverProgress(t, leader, learner.id); s.Abstain != Abstains || !s.Quiesced {
		t.Fatalf("a quiesced learner's report changed without an answer: %+v", s)
	}
	if learner.raft.WakeFollower(leader.id) {
		t.Fatal("a follower woke its leader")
	}
	if !leader.raft.WakeFollower(learner.id) {
		t.Fatal("the leader found no replication to wake")
	}
	waitFor(t, 5*time.Second, "the woken learner is not reported voting", func() bool {
		return serverProgress(t, leader, learner.id).Abstain == Votes
	})
	if leader.raft.WakeFollower("nobody") {
		t.Fatal("woke a server outside the group")
	}
}
