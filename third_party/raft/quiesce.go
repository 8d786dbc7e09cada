// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

// This file is not part of upstream hashicorp/raft: it is Ferry's
// quiescence change (see FORK.md).

package raft

import (
	"sync"
	"sync/atomic"
	"time"
)

// Liveness tells a quiescing group whether the node at the other end of a
// replication is up, from a signal that costs nothing per group (for
// example the node-level probes of a transport shared by every group).
type Liveness interface {
	// PeerAlive reports whether the node of id at addr answered its
	// node-level probes recently. When it did, lost is a channel that is
	// closed as soon as that stops being true (the connection failed, or
	// probes went unanswered); when it did not, lost is nil.
	PeerAlive(id ServerID, addr ServerAddress) (alive bool, lost <-chan struct{})
	// PeerBack returns nil while the node of id at addr is up, and
	// otherwise a channel that is closed as soon as it answers again. A
	// leader sends a lost node's followers no heartbeats and no retries
	// until then (their RPCs could only fail), and resumes at once when it
	// is back.
	PeerBack(id ServerID, addr ServerAddress) (back <-chan struct{})
}

// quiesceState is a leader's view of one follower's quiescence. A
// quiesced follower has every entry and knows the commit index; the
// leader sends it neither heartbeats nor empty appends, and counts it as
// contacted while Liveness says its node is up.
type quiesceState struct {
	mu       sync.Mutex
	quiesced bool
	wakes    uint64 // wakes so far: a quiesce decided before a wake is not taken

	// wakeCh tells the follower's heartbeat goroutine that it was woken.
	wakeCh chan struct{}
	// leaderWake tells the leader loop that a follower woke (its lease
	// check runs again).
	leaderWake chan struct{}
	// quiescedCh tells the replication goroutine that the follower was
	// quiesced: it leaves pipeline mode (see pipelineReplicate).
	quiescedCh chan struct{}
	// ackedCommit is the highest commit index the follower acknowledged.
	ackedCommit atomic.Uint64
}

func newQuiesceState(leaderWake chan struct{}) quiesceState {
	return quiesceState{wakeCh: make(chan struct{}, 1), quiescedCh: make(chan struct{}, 1), leaderWake: leaderWake}
}

// isQuiesced reports whether the leader treats s as quiesced.
func (s *followerReplication) isQuiesced() bool {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	return s.q.quiesced
}

// quiesceEnabled reports whether this group may quiesce at all.
func (r *Raft) quiesceEnabled() bool {
	return r.liveness != nil && r.config().QuiesceAfter > 0
}

// peerAlive asks Liveness about s's node.
func (r *Raft) peerAlive(s *followerReplication) (bool, <-chan struct{}) {
	s.peerLock.RLock()
	peer := s.peer
	s.peerLock.RUnlock()
	return r.liveness.PeerAlive(peer.ID, peer.Address)
}

// wakeFollower ends s's quiescence, if it was quiesced, and makes its last
// contact now: it was counted as contacted until this moment (or its node
// was just lost), and from here on real heartbeats judge it, so the
// leader's lease lapses LeaderLeaseTimeout after they stop being answered,
// as for a follower that never quiesced. (Dating the contact back to the
// quiesce would step a leader down the moment its followers' nodes were
// reported lost together, as a node overloaded by an election storm can
// be, and feed the storm.)
func (r *Raft) wakeFollower(s *followerReplication) {
	s.q.mu.Lock()
	s.q.wakes++
	was := s.q.quiesced
	s.q.quiesced = false
	s.q.mu.Unlock()
	if !was {
		return
	}
	s.setLastContact()
	asyncNotifyCh(s.q.wakeCh)
	asyncNotifyCh(s.q.leaderWake)
	// The replication goroutine waits with no commit-timeout timer while
	// the follower is quiesced: trigger it, so that it sends the commit
	// index (and any entries a restarted or wiped follower lacks) and
	// watches the timer again.
	asyncNotifyCh(s.triggerCh)
}

// quiesceCandidate reports whether s may be quiesced now, and the wake
// count and last index the decision was taken at: the group has been
// without new entries for QuiesceAfter, every entry is committed, s has
// them all and has acknowledged the commit index, and its node is up.
func (r *Raft) quiesceCandidate(s *followerReplication) (ok bool, wakes, lastIdx uint64) {
	if !r.quiesceEnabled() {
		return false, 0, 0
	}
	s.q.mu.Lock()
	quiesced, wakes := s.q.quiesced, s.q.wakes
	s.q.mu.Unlock()
	if quiesced {
		return false, 0, 0
	}
	lastIdx = r.getLastIndex()
	if r.getCommitIndex() < lastIdx || atomic.LoadUint64(&s.nextIndex) <= lastIdx ||
		s.q.ackedCommit.Load() < lastIdx {
		return false, 0, 0
	}
	if time.Since(time.Unix(0, r.lastAppendNanos.Load())) < r.quiesceDelay(lastIdx) {
		return false, 0, 0
	}
	if alive, _ := r.peerAlive(s); !alive {
		return false, 0, 0
	}
	return true, wakes, lastIdx
}

// newLeaderQuiesceScale divides QuiesceAfter for a leader whose log has
// nothing after its own no-op.
const newLeaderQuiesceScale = 10

// noOpCommitted runs on the leader loop when the commit index moved from
// old to commit: when that committed this leader's no-op and nothing
// follows it, the followers are told the commit index at once rather
// than by the empty append CommitTimeout paces (a second in Ferry). A new
// leader of an idle group (thousands at once after a node's loss) then
// quiesces its followers as soon as its shortened QuiesceAfter allows,
// instead of heartbeating them until that append. Main thread only.
func (r *Raft) noOpCommitted(old, commit uint64) {
	if !r.quiesceEnabled() || commit <= old || commit != r.termStartIndex.Load() || commit != r.getLastIndex() {
		return
	}
	for _, s := range r.leaderState.replState {
		asyncNotifyCh(s.triggerCh)
	}
}

// quiesceDelay is how long the log must go without a new entry before the
// leader quiesces a follower: QuiesceAfter, or a tenth of it while the
// last entry is this leader's own no-op. A leader elected because its
// predecessor's node died (thousands at once after a node loss) then
// stops heartbeating sooner; a group with client traffic wakes at its
// next entry either way.
func (r *Raft) quiesceDelay(lastIdx uint64) time.Duration {
	d := r.config().QuiesceAfter
	if lastIdx == r.termStartIndex.Load() {
		d /= newLeaderQuiesceScale
	}
	return d
}

// finishQuiesce marks s quiesced once it acknowledged a heartbeat that
// told it so, unless it was woken or the log grew since the decision.
func (r *Raft) finishQuiesce(s *followerReplication, wakes, lastIdx uint64) {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	if s.q.wakes == wakes && r.getLastIndex() == lastIdx {
		s.q.quiesced = true
		asyncNotifyCh(s.q.quiescedCh)
	}
}

// heartbeatWait returns what the heartbeat goroutine of s waits on next:
// the interval's timer; while s is quiesced and its node up, only the
// channel that closes when the node is lost; while its node is lost, the
// channel that closes when it is back, and a slow timer in case Liveness
// never says so.
func (r *Raft) heartbeatWait(s *followerReplication) (tick <-chan time.Time, lost, back <-chan struct{}) {
	if s.isQuiesced() {
		alive, lost := r.peerAlive(s)
		if alive {
			return nil, lost, nil
		}
		r.wakeFollower(s)
	}
	if back := r.peerBack(s); back != nil {
		return randomTimeout(lostPeerRetryScale * r.config().HeartbeatTimeout), nil, back
	}
	return randomTimeout(r.config().HeartbeatTimeout / 10), nil, nil
}

// lostPeerRetryScale times HeartbeatTimeout to twice that is how often a
// leader tries a follower whose node Liveness reports lost: it learns of
// the node's return from Liveness at once, and this retry only covers a
// Liveness that fails to say so. With thousands of groups led beside a
// dead node every try is a failed RPC per group, so it is rare: at four
// heartbeat timeouts, 5,000 leaders made about 4,000 failed RPCs a second
// to a killed node while the survivors were electing its groups.
const lostPeerRetryScale = 20

// failureBackoff is how long replication to s waits after s.failures
// failed RPCs in a row: upstream's exponential backoff, which reaches
// 10 s after about 20 s of failures. With a Liveness, a follower whose
// node is up (it answers the transport, so the failures are its group's:
// not opened yet after a restart, busy) is tried again at least every
// HeartbeatTimeout instead: a node that restarts and opens its groups
// after a few seconds of refusals would otherwise get no entry, and so
// no commit index, for up to 10 s more per group. A lost node is waited
// for on its liveness channel (replicateTo), not on this.
func (r *Raft) failureBackoff(s *followerReplication) time.Duration {
	wait := backoff(failureWait, s.failures, maxFailureScale)
	if hb := r.config().HeartbeatTimeout; r.liveness != nil && wait > hb {
		wait = hb
	}
	return wait
}

// rpcFailed logs a failed RPC to s: as an error, unless Liveness already
// reports s's node lost (the node's loss is reported once, by the
// transport and the membership; one line per group and retry would
// repeat it thousands of times).
func (r *Raft) rpcFailed(s *followerReplication, msg string, args ...interface{}) {
	if r.peerBack(s) != nil {
		r.logger.Debug(msg, args...)
		return
	}
	r.logger.Error(msg, args...)
}

// peerBack returns nil while s's node is up (or no Liveness is set), and
// otherwise the channel that Liveness closes when the node is back.
func (r *Raft) peerBack(s *followerReplication) <-chan struct{} {
	if r.liveness == nil {
		return nil
	}
	s.peerLock.RLock()
	peer := s.peer
	s.peerLock.RUnlock()
	return r.liveness.PeerBack(peer.ID, peer.Address)
}

// commitTimeoutCh paces the empty appends that tell s the commit index;
// a quiesced follower knows it already and gets none.
func (r *Raft) commitTimeoutCh(s *followerReplication) <-chan time.Time {
	if s.isQuiesced() {
		return nil
	}
	return randomTimeout(r.config().CommitTimeout)
}

// releaseQuiesced tells a quiesced follower, best effort, that this
// replication ends (the leader steps down or shuts down), so that it
// watches its election timeout again instead of trusting a node that is
// up but no longer leads it.
func (r *Raft) releaseQuiesced(s *followerReplication, req AppendEntriesRequest) {
	if !s.isQuiesced() {
		return
	}
	s.peerLock.RLock()
	peer := s.peer
	s.peerLock.RUnlock()
	req.Quiesce = false
	trans := r.trans
	// Not waited for: the follower may be slow to answer, and a leader's
	// shutdown must not wait on it.
	go func() {
		var resp AppendEntriesResponse
		_ = trans.AppendEntries(peer.ID, peer.Address, &req, &resp)
	}()
}

// quorumQuiesced reports whether this leader and its quiesced voters make
// a quorum: the lease then needs no timer, since the check would count
// each of them as contacted until a wake (their node lost, a new entry)
// turns the timer back on. A follower whose node is lost (not quiesced)
// then costs no lease checks either. Main thread only.
func (r *Raft) quorumQuiesced() bool {
	if !r.quiesceEnabled() {
		return false
	}
	quiesced := 0
	for _, server := range r.configurations.latest.Servers {
		if server.Suffrage != Voter {
			continue
		}
		if server.ID == r.localID {
			quiesced++
			continue
		}
		if s := r.leaderState.replState[server.ID]; s != nil && s.isQuiesced() {
			quiesced++
		}
	}
	return quiesced >= r.quorumSize()
}

// leaseContactAge returns how long ago the leader last heard from s, for
// the lease check: zero while Liveness says s's node is up, quiesced or
// not. The lease then lapses only for followers whose node is lost (or
// whose answers stopped while no Liveness is set), not for a node that
// answers late because it is busy: stepping leaders down on a node
// overloaded by the elections of a dead node's groups added elections
// and fed the overload. Reads never rely on the lease (they verify
// leadership with real answers), so this costs no safety.
func (r *Raft) leaseContactAge(s *followerReplication, now time.Time) time.Duration {
	if r.quiesceEnabled() {
		if alive, _ := r.peerAlive(s); alive {
			return 0
		}
	}
	return now.Sub(s.LastContact())
}

// wakeForCandidate wakes the follower id when it asks for a vote while
// this node leads: it stopped hearing from the leader (a lost message or a
// reordered one ended its quiescence), and heartbeats bring it back.
// Main thread only.
func (r *Raft) wakeForCandidate(id ServerID) {
	if r.getState() != Leader || r.leaderState.replState == nil {
		return
	}
	if s := r.leaderState.replState[id]; s != nil {
		r.wakeFollower(s)
	}
}

// noteLeaderQuiesce records, on a follower, whether the leader's latest
// message asked it to quiesce; waking from quiescence re-arms the
// follower's heartbeat timer at once.
func (r *Raft) noteLeaderQuiesce(quiesce bool) {
	if r.liveness == nil {
		return
	}
	if r.followerQuiesced.Swap(quiesce) && !quiesce {
		asyncNotifyCh(r.followerNotifyCh)
	}
}

// quiescedLeaderAlive reports, on a follower whose leader asked it to
// quiesce, whether the leader's node is up, and the channel closed when
// that ends.
func (r *Raft) quiescedLeaderAlive() (<-chan struct{}, bool) {
	if r.liveness == nil || !r.followerQuiesced.Load() {
		return nil, false
	}
	addr, id := r.LeaderWithID()
	if addr == "" {
		return nil, false
	}
	alive, lost := r.liveness.PeerAlive(id, addr)
	return lost, alive
}
