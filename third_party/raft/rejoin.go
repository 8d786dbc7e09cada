// Ferry fork: abstaining servers and the leader's view of each server's
// log, the two pieces a learner-first membership change needs.

package raft

import (
	"errors"
	"maps"
	"time"
)

// ErrAbstaining is returned to a TimeoutNow sent to an abstaining server.
var ErrAbstaining = errors.New("server abstains from elections")

// SetAbstain turns abstaining on or off (see Config.Abstain). The caller
// turns it off once the server is known to hold every entry committed
// before it lost its state or joined: for Ferry, once the leader saw it
// caught up and the catalog recorded so.
func (r *Raft) SetAbstain(on bool) {
	if r.abstaining.Swap(on) != on {
		r.logger.Info("abstaining from elections changed", "abstaining", on)
	}
}

// Abstaining reports whether the server abstains from elections.
func (r *Raft) Abstaining() bool { return r.abstaining.Load() }

// refuseAbstaining reports whether a vote or pre-vote request must be
// refused because this server abstains.
func (r *Raft) refuseAbstaining(kind string, candidate []byte) bool {
	if !r.abstaining.Load() {
		return false
	}
	r.logger.Debug("refusing a request while abstaining", "kind", kind, "candidate", string(candidate))
	return true
}

// ServerProgress is what a leader knows of one server of its latest
// configuration.
type ServerProgress struct {
	ID       ServerID
	Address  ServerAddress
	Suffrage ServerSuffrage
	// Match is the highest log index the server acknowledged holding in
	// the leader's term (the leader's own last index for itself); 0 until
	// its first successful append or snapshot of the term.
	Match uint64
	// LastContact is when the server last answered the leader (now, for
	// the leader itself).
	LastContact time.Time
}

// ReplicationProgress is a leader's view of its group, for deciding when a
// new member has caught up.
type ReplicationProgress struct {
	Term        uint64
	CommitIndex uint64
	LastIndex   uint64
	// ConfigurationIndex is the index of the latest configuration; pass it
	// as prevIndex to a membership change so that the change applies only
	// to this configuration.
	ConfigurationIndex uint64
	Servers            []ServerProgress
}

// ReplicationProgress returns the leader's view of every server of its
// latest configuration. It fails with ErrNotLeader on any other server.
// It does not go through the main loop: the figures may trail it by a
// moment, never run ahead of what followers acknowledged.
func (r *Raft) ReplicationProgress() (ReplicationProgress, error) {
	r.progressMu.Lock()
	repl := r.progress
	r.progressMu.Unlock()
	if repl == nil || r.getState() != Leader {
		return ReplicationProgress{}, ErrNotLeader
	}
	index := r.latestConfigurationIndex.Load()
	latest := r.getLatestConfiguration()
	out := ReplicationProgress{
		Term: r.getCurrentTerm(), CommitIndex: r.getCommitIndex(), LastIndex: r.getLastIndex(),
		ConfigurationIndex: index, Servers: make([]ServerProgress, 0, len(latest.Servers)),
	}
	now := time.Now()
	for _, s := range latest.Servers {
		p := ServerProgress{ID: s.ID, Address: s.Address, Suffrage: s.Suffrage}
		if s.ID == r.localID {
			p.Match, p.LastContact = out.LastIndex, now
		} else if f := repl[s.ID]; f != nil {
			p.Match, p.LastContact = f.match.Load(), f.LastContact()
		}
		out.Servers = append(out.Servers, p)
	}
	return out, nil
}

// setProgress publishes a copy of the leader's replication map (nil when
// leadership ends). Main loop only.
func (r *Raft) setProgress(repl map[ServerID]*followerReplication) {
	var c map[ServerID]*followerReplication
	if repl != nil {
		c = maps.Clone(repl)
	}
	r.progressMu.Lock()
	r.progress = c
	r.progressMu.Unlock()
}

// raiseMatch records that the follower acknowledged holding index.
func (s *followerReplication) raiseMatch(index uint64) {
	for {
		cur := s.match.Load()
		if index <= cur || s.match.CompareAndSwap(cur, index) {
			return
		}
	}
}
