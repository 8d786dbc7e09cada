package node

import (
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/transport"
)

// handleRaftDebug serves GET /v1/debug/raft (with the profiler only): the
// liveness of every peer node and the raft state of the meta group and
// of every partition replica on this node, or of the one named by
// ?group=. It is for diagnosing a group that does not converge; nothing
// reads it on a request path.
func (n *Node) handleRaftDebug(w http.ResponseWriter, r *http.Request) {
	only := r.URL.Query().Get("group")
	var out []jsonview.RaftGroup
	if n.meta.raft != nil && (only == "" || only == "meta") {
		prog, err := n.meta.raft.ReplicationProgress()
		out = append(out, raftDebugView("meta", n.meta.raft.Stats(), prog, err))
	}
	for _, rep := range n.replicas.all() {
		if only == "" || only == rep.a.GroupID {
			prog, err := rep.p.Progress()
			v := raftDebugView(rep.a.GroupID, rep.p.RaftStats(), prog, err)
			v.Ticks = ticksView(rep.p.TickDebug())
			out = append(out, v)
		}
	}
	writeJSON(w, jsonview.RaftDebug{Peers: peerLivenessView(n.raftNet.Liveness()), Groups: out})
}

// ticksView renders a replica's tick state relative to the node's clock.
func ticksView(d partition.TickDebug) *jsonview.RaftTicks {
	v := &jsonview.RaftTicks{ClockAhead: time.Duration(d.Clock - d.Now).String(), Proposed: d.Proposed, Failed: d.Failed, LastErr: d.LastErr}
	if d.NextDeadline != 0 {
		v.DeadlineAhead = time.Duration(d.NextDeadline - d.Now).String()
	}
	return v
}

// peerLivenessView is the transport's liveness of each peer node.
func peerLivenessView(peers []transport.PeerLiveness) []jsonview.RaftPeer {
	out := make([]jsonview.RaftPeer, 0, len(peers))
	for _, p := range peers {
		v := jsonview.RaftPeer{Addr: p.Addr, Watched: p.Watched, Probing: p.Probing, Alive: p.Alive, Links: p.Links, Dialing: p.Dialing}
		if p.SinceAnswer > 0 {
			v.SinceAnswer = p.SinceAnswer.Round(time.Millisecond).String()
		}
		out = append(out, v)
	}
	return out
}

// raftDebugView is one group's stats and, on its leader (err nil), the
// leader's view of each server.
func raftDebugView(group string, stats map[string]string, prog raft.ReplicationProgress, err error) jsonview.RaftGroup {
	v := jsonview.RaftGroup{Group: group, Stats: stats}
	if err != nil {
		return v
	}
	now := time.Now()
	for _, s := range prog.Servers {
		rs := jsonview.RaftServer{ID: string(s.ID), Suffrage: s.Suffrage.String(), Match: s.Match, NextIndex: s.NextIndex,
			AckedCommit: s.AckedCommit, Quiesced: s.Quiesced, Abstain: s.Abstain.String()}
		if !s.Answered.IsZero() {
			rs.AnsweredAgo = now.Sub(s.Answered).Round(time.Millisecond).String()
		}
		v.Servers = append(v.Servers, rs)
	}
	return v
}
