package mover

import (
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// stepJoins makes at most one change for the first replica in joining
// that needs one, or asks the caller to record one that caught up.
func (m *Mover) stepJoins(g Group, pl Placement, c Cluster, prog raft.ReplicationProgress,
	servers map[string]raft.ServerProgress, st *groupState, joining []string) (Step, error) {
	awaiting := ""
	for _, id := range joining {
		s, in := servers[id]
		switch {
		case !in:
			return m.addLearner(g, pl, prog, st, id)
		case s.Suffrage == raft.Voter:
			// Only a voter the catalog lists as joining gets here: it
			// lost its data, so its old acknowledgements count for
			// nothing. It leaves, then comes back as a learner.
			if !canLose(prog, pl, c, id) || !m.claim(st, id) {
				continue
			}
			err := g.RemoveServer(id, prog.ConfigurationIndex)
			if err != nil {
				m.release(st, id)
			}
			return Step{Action: RemovedToRejoin, Node: id}, err
		default:
			if !m.claim(st, id) {
				continue // added by an earlier leader; waits for a slot
			}
			if !m.heldCaughtUp(prog, s, m.join(st, id)) {
				continue
			}
			if slices.Contains(pl.Joining, id) {
				// Recorded first, promoted after: the record lets the
				// replica vote, and a leader lost in between leaves a
				// learner the next leader promotes, never a voter that
				// abstains.
				return Step{Action: CaughtUp, Node: id}, nil
			}
			if s.Abstain != raft.Votes {
				// Recorded, but its node has not applied the record yet
				// (or its answers have not said so): promoted now, it
				// would be a voter that cannot vote, and with one voter
				// down the group could not elect. A quiesced learner
				// answers nothing, so it is woken to answer again.
				g.WakeFollower(id)
				awaiting = id
				continue
			}
			return m.promote(g, pl, prog, st, id)
		}
	}
	if awaiting != "" {
		return Step{Action: AwaitingVote, Node: awaiting}, nil
	}
	return Step{Action: Waiting}, nil
}

// addLearner adds id as a non-voter when a catch-up slot is free.
func (m *Mover) addLearner(g Group, pl Placement, prog raft.ReplicationProgress, st *groupState, id string) (Step, error) {
	addr, ok := pl.Addrs[id]
	if !ok {
		return Step{Action: Waiting, Node: id}, ErrNoAddress
	}
	if !m.claim(st, id) {
		return Step{Action: Waiting, Node: id}, nil
	}
	err := g.AddLearner(id, addr, prog.ConfigurationIndex)
	if err != nil {
		m.release(st, id)
	}
	return Step{Action: AddedLearner, Node: id}, err
}

// heldCaughtUp reports whether a learner has held at least its target
// and stayed within LagMax of the leader's last index for HoldFor.
func (m *Mover) heldCaughtUp(prog raft.ReplicationProgress, s raft.ServerProgress, js *joinState) bool {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if js.target == 0 {
		// First seen in the group by this leader: it must hold at least
		// everything the leader holds now, every committed entry included.
		js.target = max(prog.LastIndex, 1)
	}
	caughtUp := s.Match >= js.target && s.Match+m.cfg.LagMax >= prog.LastIndex
	switch {
	case !caughtUp:
		js.since = time.Time{}
	case js.since.IsZero():
		js.since = now
	}
	return caughtUp && now.Sub(js.since) >= m.cfg.HoldFor
}

// promote makes a caught-up learner a voter.
func (m *Mover) promote(g Group, pl Placement, prog raft.ReplicationProgress, st *groupState, id string) (Step, error) {
	addr, ok := pl.Addrs[id]
	if !ok {
		return Step{Action: Waiting, Node: id}, ErrNoAddress
	}
	if err := g.Promote(id, addr, prog.ConfigurationIndex); err != nil {
		return Step{Action: Promoted, Node: id}, err
	}
	m.mu.Lock()
	st.joins[id].promoted = true
	m.mu.Unlock()
	return Step{Action: Promoted, Node: id}, nil
}

// stepLeaves runs once every placed replica is a settled voter: it removes
// the servers that are not placed (the leader itself last, after handing
// leadership to a placed voter that is up), then asks the caller to record
// each leaving node that is out of the group.
func stepLeaves(g Group, pl Placement, c Cluster, prog raft.ReplicationProgress, servers map[string]raft.ServerProgress) (Step, error) {
	leavingSelf := false
	for _, s := range prog.Servers {
		id := string(s.ID)
		if slices.Contains(pl.Replicas, id) {
			continue
		}
		if id == pl.Self {
			leavingSelf = true
			continue
		}
		return Step{Action: Removed, Node: id}, g.RemoveServer(id, prog.ConfigurationIndex)
	}
	if leavingSelf {
		for _, id := range pl.Replicas {
			if s, in := servers[id]; in && s.Suffrage == raft.Voter && c.Alive(id) {
				if addr, ok := pl.Addrs[id]; ok {
					return Step{Action: HandedOver, Node: id}, g.TransferLeadership(id, addr)
				}
			}
		}
		return Step{Action: Waiting}, nil
	}
	for _, id := range pl.Leaving {
		if _, in := servers[id]; !in {
			return Step{Action: Left, Node: id}, nil
		}
	}
	return Step{Action: Settled}, nil
}

// canLose reports whether voter id may leave the group now: the voters
// left must number at least a majority of the placed replicas, and a
// majority of them must be up, so the group still commits.
func canLose(prog raft.ReplicationProgress, pl Placement, c Cluster, id string) bool {
	voters, up := 0, 0
	for _, s := range prog.Servers {
		sid := string(s.ID)
		if s.Suffrage != raft.Voter || sid == id {
			continue
		}
		voters++
		if sid == pl.Self || c.Alive(sid) {
			up++
		}
	}
	return voters >= len(pl.Replicas)/2+1 && up >= voters/2+1
}

// join returns id's catch-up state in st, or nil.
func (m *Mover) join(st *groupState, id string) *joinState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return st.joins[id]
}

// claim gives id a catch-up slot (true if it had one); false when every
// slot is taken.
func (m *Mover) claim(st *groupState, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st.joins[id] != nil {
		return true
	}
	if m.catchingUpLocked() >= m.cfg.CatchUpsMax {
		return false
	}
	st.joins[id] = &joinState{}
	return true
}

// release frees id's slot after a change that failed.
func (m *Mover) release(st *groupState, id string) {
	m.mu.Lock()
	delete(st.joins, id)
	m.mu.Unlock()
}
