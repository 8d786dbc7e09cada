package partition

import (
	"context"
	"errors"
	"sort"

	"github.com/ferrymq/ferry/fsm"
	"github.com/hashicorp/raft"
)

// Status is a replica's view of its group.
type Status struct {
	GroupID    string
	State      string // Leader, Follower, Candidate, Shutdown
	LeaderID   string
	LeaderAddr string
	// Term is the replica's current raft term.
	Term uint64
	// AppliedIndex is the index of the last raft entry applied to the FSM.
	AppliedIndex uint64
	Voters       []string
}

// Status reports the replica's raft role and progress.
func (p *Partition) Status() Status {
	addr, id := p.raft.LeaderWithID()
	s := Status{
		GroupID: p.cfg.GroupID, State: p.raft.State().String(),
		LeaderID: string(id), LeaderAddr: string(addr), Term: p.raft.CurrentTerm(),
	}
	if f := p.raft.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			if srv.Suffrage == raft.Voter {
				s.Voters = append(s.Voters, string(srv.ID))
			}
		}
	}
	p.mu.Lock()
	s.AppliedIndex = p.applied
	p.mu.Unlock()
	return s
}

// LeaderTerm returns the raft term when this replica leads its group, and
// false otherwise; cheap enough to call often.
func (p *Partition) LeaderTerm() (uint64, bool) {
	if p.raft.State() != raft.Leader {
		return 0, false
	}
	return p.raft.CurrentTerm(), true
}

// RaftStats returns raft's own counters for the group (commit_index,
// applied_index, last_log_index, last_contact, term, state, ...), as
// raft.Raft.Stats formats them.
func (p *Partition) RaftStats() map[string]string { return p.raft.Stats() }

// Role returns this replica's raft role ("Leader", "Follower",
// "Candidate", "Shutdown") and the leader it knows (empty if none),
// without a round trip through raft's main loop (Status asks it for the
// configuration): views of thousands of replicas use this.
func (p *Partition) Role() (role, leaderID string) {
	_, id := p.raft.LeaderWithID()
	return p.raft.State().String(), string(id)
}

// Leader returns the leader this replica knows (empty if none), as
// cheaply as Role: request paths use it to point a client elsewhere.
func (p *Partition) Leader() (id, addr string) {
	a, i := p.raft.LeaderWithID()
	return string(i), string(a)
}

// IsLeader says whether this replica currently leads its group.
func (p *Partition) IsLeader() bool { return p.raft.State() == raft.Leader }

// Stats returns the FSM's stats as this replica has applied them. Served by
// any replica; only the leader's are current, and only after ReadBarrier.
func (p *Partition) Stats() fsm.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fsm.Stats()
}

// LeaderStats returns the FSM's stats from the leader, once its state holds
// every write confirmed to a client before the call (ReadBarrier).
func (p *Partition) LeaderStats(ctx context.Context) (fsm.Stats, error) {
	if err := p.ReadBarrier(ctx); err != nil {
		return fsm.Stats{}, err
	}
	return p.Stats(), nil
}

// LeaderDead lists dead letters from the leader once its state holds
// every write confirmed to a client before the call (ReadBarrier). With
// bodies set it returns their headers and bodies within maxBytes, and more
// reports that the budget ended the page (see fsm.FSM.PeekDead).
func (p *Partition) LeaderDead(ctx context.Context, f fsm.DeadFilter, bodies bool, maxBytes int) (letters []fsm.DeadLetter, more bool, err error) {
	if err := p.ReadBarrier(ctx); err != nil {
		return nil, false, err
	}
	if bodies {
		return p.PeekDead(f, maxBytes)
	}
	letters, err = p.ListDead(f)
	return letters, false, err
}

// ApplyLag returns how many committed entries this replica's state
// machine has yet to apply: its raft commit index (as its leader last
// told it) less the index of the last entry its FSM applied. A replica
// fed by a snapshot holds the log long before it has applied it.
func (p *Partition) ApplyLag() uint64 {
	commit := p.raft.CommitIndex()
	p.mu.Lock()
	applied := p.applied
	p.mu.Unlock()
	if applied >= commit {
		return 0
	}
	return commit - applied
}

// Digest returns the FSM's state digest and the raft index it was taken at,
// so replicas can be compared.
func (p *Partition) Digest() (uint64, [32]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied, p.fsm.Digest()
}

// ListDead lists dead letters (without bodies) from this replica's state.
func (p *Partition) ListDead(f fsm.DeadFilter) ([]fsm.DeadLetter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fsm.ListDead(f)
}

// PeekDead lists dead letters with their headers and bodies, within
// maxBytes (see fsm.FSM.PeekDead).
func (p *Partition) PeekDead(f fsm.DeadFilter, maxBytes int) ([]fsm.DeadLetter, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fsm.PeekDead(f, maxBytes)
}

// Peek returns the live messages f selects (ready ones by default) with
// their bodies, oldest first, without leasing them. It serves only on the leader, once its state holds every
// entry committed before its term (ReadBarrier), and first confirms with a
// quorum that this replica still leads (a heartbeat round), so a deposed
// leader cannot answer from stale state. A filter the FSM would refuse
// (fsm.PeekFilter.Validate) is answered with that error at once.
func (p *Partition) Peek(ctx context.Context, f fsm.PeekFilter) (fsm.PeekResult, error) {
	if err := f.Validate(); err != nil {
		return fsm.PeekResult{}, err
	}
	if err := p.ReadBarrier(ctx); err != nil {
		return fsm.PeekResult{}, err
	}
	if err := p.raft.VerifyLeader().Error(); err != nil {
		if errors.Is(err, raft.ErrLeadershipLost) {
			return fsm.PeekResult{}, p.notLeader() // a read: nothing is in doubt
		}
		return fsm.PeekResult{}, p.mapRaftError(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fsm.Peek(f)
}

// Find returns the messages with this id in any state (fsm.FSM.Find),
// read on the leader as Peek reads.
func (p *Partition) Find(ctx context.Context, id string) ([]fsm.MessageInfo, error) {
	if err := p.ReadBarrier(ctx); err != nil {
		return nil, err
	}
	if err := p.raft.VerifyLeader().Error(); err != nil {
		if errors.Is(err, raft.ErrLeadershipLost) {
			return nil, p.notLeader()
		}
		return nil, p.mapRaftError(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fsm.Find(id), nil
}

// Config returns the queue config in force in this replica's FSM.
func (p *Partition) Config() fsm.QueueConfig {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fsm.Config()
}

// Progress returns the leader's view of its group's members and how far
// each has replicated (leader only): what a move decides from.
func (p *Partition) Progress() (raft.ReplicationProgress, error) {
	prog, err := p.raft.ReplicationProgress()
	return prog, p.mapErr(err)
}

// WakeFollower ends the quiescence of the replica on node id (leader
// only), so that it answers heartbeats again; it reports whether this
// replica leads a replication to it.
func (p *Partition) WakeFollower(id string) bool {
	return p.raft.WakeFollower(raft.ServerID(id))
}

// AddLearner adds a replica as a non-voter (leader only), if the group's
// configuration is still the one at prevIndex.
func (p *Partition) AddLearner(id, addr string, prevIndex uint64) error {
	if err := p.checkLeader(); err != nil {
		return err
	}
	return p.mapErr(p.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), prevIndex, p.cfg.ApplyTimeout).Error())
}

// Promote makes a replica a voter (leader only), if the group's
// configuration is still the one at prevIndex.
func (p *Partition) Promote(id, addr string, prevIndex uint64) error {
	if err := p.checkLeader(); err != nil {
		return err
	}
	return p.mapErr(p.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), prevIndex, p.cfg.ApplyTimeout).Error())
}

// Suffrage returns "voter", "nonvoter" or "none": this replica's place in
// its group's latest configuration as it knows it.
func (p *Partition) Suffrage() string {
	f := p.raft.GetConfiguration()
	if f.Error() != nil {
		return "none"
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == p.cfg.NodeID {
			if s.Suffrage == raft.Voter {
				return "voter"
			}
			return "nonvoter"
		}
	}
	return "none"
}

// Voters returns the ids of the voters in this replica's latest
// configuration, sorted (nil when the configuration cannot be read).
func (p *Partition) Voters() []string {
	f := p.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			out = append(out, string(s.ID))
		}
	}
	sort.Strings(out)
	return out
}

// SetAbstain turns this replica's abstaining from elections on or off
// (see Config.Abstain).
func (p *Partition) SetAbstain(on bool) { p.raft.SetAbstain(on) }

// Abstaining reports whether this replica abstains from elections.
func (p *Partition) Abstaining() bool { return p.raft.Abstaining() }

// TransferLeadership hands leadership to the replica id at addr (leader
// only); it returns once the transfer finished or failed.
func (p *Partition) TransferLeadership(id, addr string) error {
	if err := p.checkLeader(); err != nil {
		return err
	}
	return p.mapErr(p.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr)).Error())
}

// GiveUpLeadership hands leadership to the most up-to-date follower
// (leader only); it returns once the transfer finished or failed.
func (p *Partition) GiveUpLeadership() error {
	if err := p.checkLeader(); err != nil {
		return err
	}
	return p.mapErr(p.raft.LeadershipTransfer().Error())
}

// RemoveServer removes a replica from the group (leader only), if the
// group's configuration is still the one at prevIndex.
func (p *Partition) RemoveServer(id string, prevIndex uint64) error {
	if err := p.checkLeader(); err != nil {
		return err
	}
	return p.mapErr(p.raft.RemoveServer(raft.ServerID(id), prevIndex, p.cfg.ApplyTimeout).Error())
}

func (p *Partition) mapErr(err error) error {
	if err == nil {
		return nil
	}
	return p.mapRaftError(err)
}
