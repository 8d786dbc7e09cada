package node

import (
	"context"
	"slices"
	"time"

	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wire"
	"github.com/hashicorp/raft"
)

// removeNode serves `ferry node remove` on the meta leader: the catalog
// unregisters the node and re-places its replicas (each partition's leader
// then changes its raft group to match, see syncMembers), and the node
// leaves the meta group.
func (n *Node) removeNode(ctx context.Context, r *wire.RemoveNodeRequest) (*wire.RemoveNodeResponse, error) {
	if err := n.metaLeaderHere(); err != nil {
		return nil, err
	}
	res, err := n.proposeMeta(ctx, meta.Command{Type: meta.CmdRemoveNode, RemoveNode: &meta.RemoveNodeCmd{ID: r.ID}})
	if err != nil {
		return nil, err
	}
	n.logger.Info("node removed from the catalog", "removed", r.ID, "replicas_moved", res.Moved)
	n.dropRemovedServers()
	return &wire.RemoveNodeResponse{Moved: res.Moved}, nil
}

// dropRemovedServers takes every removed node out of the meta group's raft
// configuration (meta leader only). It runs after each removal and in the
// meta duties, so a removal whose leader died half-way still completes.
func (n *Node) dropRemovedServers() {
	servers, err := n.meta.servers()
	if err != nil || !n.meta.isLeader() {
		return
	}
	var removed []string
	n.meta.view(func(f *meta.FSM) {
		for _, s := range servers {
			if f.Removed(string(s.ID)) {
				removed = append(removed, string(s.ID))
			}
		}
	})
	for _, id := range removed {
		if err := n.meta.raft.RemoveServer(raft.ServerID(id), 0, 5*time.Second).Error(); err != nil {
			n.logger.Warn("removing a node from the meta group failed", "removed", id, "err", err)
			continue
		}
		n.logger.Info("node removed from the meta group", "removed", id)
	}
}

// promoteVoters makes non-voting meta members voters while the group has
// fewer than metaVotersMax voters (after a voter was removed), alive
// members first.
func (n *Node) promoteVoters() {
	servers, err := n.meta.servers()
	if err != nil {
		return
	}
	voters := 0
	var candidates []raft.Server
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			voters++
		} else if n.members.state(string(s.ID)) == wire.NodeAlive {
			candidates = append(candidates, s)
		}
	}
	slices.SortFunc(candidates, func(a, b raft.Server) int { return cmpString(string(a.ID), string(b.ID)) })
	for _, s := range candidates[:min(len(candidates), max(0, metaVotersMax-voters))] {
		if err := n.meta.raft.AddVoter(s.ID, s.Address, 0, 5*time.Second).Error(); err != nil {
			n.logger.Warn("promoting a meta member to voter failed", "member", s.ID, "err", err)
			return
		}
		n.logger.Info("meta member promoted to voter", "member", s.ID)
	}
}

// demoteDeadVoters makes every meta voter that gossip has seen dead for
// longer than the dead-node timeout a non-voter (meta leader only). A dead
// voter counts against the catalog's quorum until somebody removes it: on
// three nodes, one dead voter and one joined replacement make four voters
// of which any second failure stops every catalog change. Demoted, it
// leaves room for a live voter (promoteVoters, registerMember); when it
// comes back alive promoteVoters makes it a voter again. Each change is
// conditioned on the configuration it read, so a retry cannot apply twice.
func (n *Node) demoteDeadVoters() {
	if !n.meta.isLeader() {
		return
	}
	f := n.meta.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == n.cfg.ID || !n.deadPastTimeout(string(s.ID)) {
			continue
		}
		if err := n.meta.raft.DemoteVoter(s.ID, f.Index(), 5*time.Second).Error(); err != nil {
			n.logger.Warn("demoting a dead meta voter failed", "member", s.ID, "err", err)
			return
		}
		n.logger.Info("dead meta voter demoted: it no longer counts in the catalog's quorum", "member", s.ID)
		return // one change per duty round: the next reads the new configuration
	}
}
