package node

import (
	"context"
	"slices"
	"time"

	"github.com/ferrymq/ferry/meta"
	"github.com/hashicorp/raft"
)

// metaVotersMax is the most voters the meta group gets; later members join
// as non-voters, which replicate the catalog without slowing commits.
const metaVotersMax = 5

// duty loops wake at least this often.
const dutyInterval = 250 * time.Millisecond

// runBootstrap forms the meta group once BootstrapExpect members see each
// other: the BootstrapExpect smallest node ids bootstrap with the same voter
// list. A node whose meta group already has state, or that sees a member
// already in a formed cluster, never bootstraps.
func (n *Node) runBootstrap() {
	defer n.loops.Done()
	if n.cfg.BootstrapExpect == 0 || n.meta.hasState {
		return
	}
	for {
		select {
		case <-n.closing:
			return
		case <-n.members.events:
		case <-time.After(dutyInterval):
		}
		if n.meta.leaderID() != "" {
			return // contacted by an existing cluster
		}
		members := n.members.members()
		if len(members) < n.cfg.BootstrapExpect || slices.ContainsFunc(members, func(m memberMeta) bool { return m.Formed }) {
			continue
		}
		chosen := members[:n.cfg.BootstrapExpect]
		if !slices.ContainsFunc(chosen, func(m memberMeta) bool { return m.ID == n.cfg.ID }) {
			continue // one of the chosen bootstraps; we are added later
		}
		voters := make([]raft.Server, len(chosen))
		for i, m := range chosen {
			voters[i] = raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Raft), Suffrage: raft.Voter}
		}
		if err := n.meta.bootstrap(voters); err != nil {
			n.logger.Error("meta bootstrap failed", "err", err)
			continue
		}
		n.logger.Info("meta group bootstrapped", "voters", len(voters))
		return
	}
}

// runMetaDuties does the meta leader's work: it registers every alive member
// in the catalog and adds it to the meta group.
func (n *Node) runMetaDuties() {
	defer n.loops.Done()
	for {
		select {
		case <-n.closing:
			return
		case <-time.After(dutyInterval):
		}
		if n.meta.leaderID() != "" {
			n.members.markFormed()
		}
		n.meta.stopAbstaining()
		if !n.meta.isLeader() {
			continue
		}
		for _, m := range n.members.members() {
			n.registerMember(m)
		}
		n.dropRemovedServers()
		n.demoteDeadVoters()
		n.promoteVoters()
		n.runShapeDuties()
	}
}

// registerMember, on the meta leader, brings one alive member into the
// cluster: it records (or updates) the member in the catalog when its
// addresses or incarnation changed, then adds it to the meta group if it
// is not in it yet: as a voter while there are fewer than metaVotersMax,
// else as a non-voter. A member not admitted (no proof of the cluster
// secret) or removed for good is left out. Every step is idempotent: the
// duty loop calls it for every member every dutyInterval.
func (n *Node) registerMember(m memberMeta) {
	if !n.members.admitted(m) {
		n.members.warnUnadmitted(m.ID)
		return
	}
	var known meta.Node
	var ok, removed bool
	n.meta.view(func(f *meta.FSM) {
		known, ok = f.Node(m.ID)
		removed = f.Removed(m.ID)
	})
	if removed {
		return // removed for good: neither registered nor added again
	}
	inc := m.incarnation()
	if !ok || known.RaftAddr != m.Raft || known.ClientAddr != m.Client || known.HTTPAddr != m.HTTP ||
		(inc != 0 && known.Incarnation != inc) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		node := meta.Node{ID: m.ID, RaftAddr: m.Raft, ClientAddr: m.Client, HTTPAddr: m.HTTP, Incarnation: inc}
		res, err := n.meta.propose(ctx, meta.Command{Type: meta.CmdRegisterNode, RegisterNode: &meta.RegisterNodeCmd{Node: node}})
		cancel()
		if err != nil || res.Err != nil {
			n.logger.Warn("registering member failed", "member", m.ID, "err", err, "result", res.Err)
			return
		}
		if known.Incarnation != 0 && inc != 0 && known.Incarnation != inc {
			n.logger.Warn("member lost its data: its replicas catch up again before they vote", "member", m.ID)
		}
		n.logger.Info("member registered", "member", m.ID)
	}
	servers, err := n.meta.servers()
	if err != nil {
		return
	}
	voters := 0
	for _, s := range servers {
		if string(s.ID) == m.ID {
			return
		}
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	add := n.meta.raft.AddVoter
	if voters >= metaVotersMax {
		add = n.meta.raft.AddNonvoter
	}
	if err := add(raft.ServerID(m.ID), raft.ServerAddress(m.Raft), 0, 5*time.Second).Error(); err != nil {
		n.logger.Warn("adding member to the meta group failed", "member", m.ID, "err", err)
	}
}
