// Ferry fork: abstaining servers and the leader's view of each server's
// log, the two pieces a learner-first membership change needs.

package raft

import (
	"errors"
	"maps"
	"sync/atomic"
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
	// Match is the highest log index the server acknowledged holding
	// since the leader started replicating to it (in this term, or since
	// the server was added; the leader's own last index for itself); 0
	// until its first successful append or snapshot. A server that lost
	// its data keeps its old match until it is removed and added again.
	Match uint64
	// Answered is when the server last answered an append or snapshot
	// (now, for the leader itself; zero if never since replication to it
	// started). Heartbeats do not count.
	Answered time.Time
	// Abstain is what the server's latest answer to this leader (an
	// append or a heartbeat) said of its abstaining from elections:
	// AbstainUnknown until it answered. A server of a version that does
	// not report it counts as Votes.
	Abstain AbstainReport
	// NextIndex, AckedCommit and Quiesced are the leader's replication
	// state for the server, for diagnostics: the next index it sends, the
	// highest commit index the server acknowledged, and whether the
	// leader treats it as quiesced (no heartbeats while its node is up).
	NextIndex   uint64
	AckedCommit uint64
	Quiesced    bool
}

// AbstainReport is what a leader learned from a server's answers about
// its abstaining from elections.
type AbstainReport uint32

// The values of AbstainReport.
const (
	// AbstainUnknown: the server has not answered this leader yet.
	AbstainUnknown AbstainReport = iota
	// Abstains: its latest answer said it abstains.
	Abstains
	// Votes: its latest answer said it may vote.
	Votes
)

// String returns "unknown", "abstains" or "votes".
func (a AbstainReport) String() string {
	switch a {
	case Abstains:
		return "abstains"
	case Votes:
		return "votes"
	default:
		return "unknown"
	}
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
			p.Match, p.Answered, p.Abstain = out.LastIndex, now, Votes
		} else if f := repl[s.ID]; f != nil {
			if at := f.answeredNanos.Load(); at != 0 {
				p.Answered = time.Unix(0, at)
			}
			p.Match = f.match.Load()
			p.Abstain = AbstainReport(f.abstain.Load())
			p.NextIndex = atomic.LoadUint64(&f.nextIndex)
			p.AckedCommit = f.q.ackedCommit.Load()
			p.Quiesced = f.isQuiesced()
		}
		out.Servers = append(out.Servers, p)
	}
	return out, nil
}

// WakeFollower ends the quiescence of the follower id, if this server
// leads a replication to it: its heartbeats, and their answers, resume
// until it quiesces again. A leader waiting for a learner to report that
// it stopped abstaining calls it, since a quiesced learner answers
// nothing. It reports whether this server leads a replication to id.
func (r *Raft) WakeFollower(id ServerID) bool {
	r.progressMu.Lock()
	f := r.progress[id]
	r.progressMu.Unlock()
	if f == nil || r.getState() != Leader {
		return false
	}
	r.wakeFollower(f)
	return true
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

// answered records that the follower answered an append or a snapshot.
func (s *followerReplication) answered() {
	s.answeredNanos.Store(time.Now().UnixNano())
}

// noteAbstain records what an answer of the follower, in this leader's
// term, said of its abstaining.
func (s *followerReplication) noteAbstain(resp *AppendEntriesResponse) {
	if resp.Term != s.currentTerm {
		return
	}
	report := Votes
	if resp.Abstaining {
		report = Abstains
	}
	s.abstain.Store(uint32(report))
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
