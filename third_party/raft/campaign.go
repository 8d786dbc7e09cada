// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

// This file is not part of upstream hashicorp/raft: it is Ferry's bound on
// concurrent campaigns (see FORK.md).

package raft

import "time"

// CampaignLimiter bounds how many groups of one node campaign at once.
// When a node leading thousands of groups dies, every follower of those
// groups times out together; unbounded, their pre-votes, votes and first
// entries swamp the surviving nodes, rounds outlast the election timeout,
// and elections restart without end. With a limiter, a follower that finds
// no free slot stays a follower without a leader (so it grants the votes
// of the candidates that got one) and tries again on its next timeout.
//
// A group whose leader went silent while the group was busy asks with
// priority: a limiter serves it before idle groups, so that the
// partitions clients are using fail over first (see campaignPriority).
type CampaignLimiter interface {
	// TryAcquire takes a slot, reporting false when none is free.
	TryAcquire(priority bool) bool
	// Release returns a slot TryAcquire took.
	Release()
	// Wait queues the caller for a slot: wake receives once when one may
	// be free (the caller then calls TryAcquire). The caller must call
	// done once it stops waiting, saying whether it took a slot after its
	// wake, so that a wake it did not use goes to the next in line.
	Wait(priority bool) (wake <-chan struct{}, done func(tookSlot bool))
}

// followerCampaign is one follower loop's state about starting a
// campaign: when it first found its leader silent, which leader that was,
// and its place in the limiter's queue.
type followerCampaign struct {
	timedOutAt time.Time
	deadLeader ServerID
	wake       <-chan struct{}
	done       func(tookSlot bool)
	woken      bool
	// idle is set when the leader's node was lost while it had this
	// follower quiesced; priority is decided when the leader is first
	// found silent: a group that was not idle asks with priority.
	idle     bool
	priority bool
}

// mayCampaign decides, on a follower whose leader is silent, whether it
// starts an election now. A follower waits its rank times two election
// timeouts first (none when it refused a candidate with a shorter log in
// the last two election timeouts) (its place among the voters in configuration order, the
// silent leader left out: a round of the first, and a retry if its first
// pre-vote came before the others noticed the silence), so that the
// replicas of a group do not split the vote and the first in order
// usually wins unopposed; then it needs a slot, and queues
// for one when none is free. Without a limiter it always may (upstream
// behaviour). Main thread only.
func (r *Raft) mayCampaign(fc *followerCampaign, lastLeaderID ServerID) bool {
	if r.campaigns == nil {
		return true // upstream behaviour
	}
	now := time.Now()
	if fc.timedOutAt.IsZero() {
		fc.timedOutAt, fc.deadLeader = now, lastLeaderID
		fc.priority = campaignPriority(fc.idle, r.followerQuiesced.Load(),
			time.Unix(0, r.lastEntriesNanos.Load()), now, r.config().HeartbeatTimeout)
	}
	wait := r.campaignRank(fc.deadLeader) * 2 * r.config().ElectionTimeout
	if now.Sub(r.outrankedAt) < 2*r.config().ElectionTimeout {
		// A candidate of this group asked for a vote with a log behind
		// ours: it cannot win, so nobody ranked before us can split the
		// vote with us. Waiting out our rank would leave the group
		// leaderless for that long (a busy partition's first-ranked
		// follower is often an entry or two behind its peer).
		wait = 0
	}
	if now.Sub(fc.timedOutAt) < wait {
		return false
	}
	if r.campaignHeld {
		return true
	}
	if r.campaigns.TryAcquire(fc.priority) {
		r.campaignHeld, r.campaignRounds = true, 0
		r.endCampaignWait(fc, true)
		return true
	}
	if fc.woken {
		r.endCampaignWait(fc, true) // the slot went to another: queue again
	}
	if fc.done == nil {
		fc.wake, fc.done = r.campaigns.Wait(fc.priority)
	}
	return false
}

// campaignPriorityWindow, in heartbeat timeouts, is how recent a
// follower's last entries must be for its group to count as busy when its
// leader goes silent: a follower times out at most two heartbeat timeouts
// after its leader's last message.
const campaignPriorityWindow = 3

// campaignPriority reports whether a follower whose leader went silent at
// now asks for a campaign slot with priority: its group was busy, meaning
// it was neither idle nor quiesced and received entries within
// campaignPriorityWindow heartbeat timeouts. Not being quiesced is not
// enough: groups created or used a moment before a node died are not
// quiesced yet, and with thousands of them asking with priority a
// partition under load waited seconds in line behind them (3.5 s among
// 9,999 idle queues in one measured failover).
func campaignPriority(idle, quiesced bool, lastEntries, now time.Time, heartbeatTimeout time.Duration) bool {
	if idle || quiesced {
		return false
	}
	return now.Sub(lastEntries) <= campaignPriorityWindow*heartbeatTimeout
}

// campaignRank is this server's place among the voters of the latest
// configuration, leaving out the silent leader. Without one (a new group)
// it is their configuration order, so that the first listed (Ferry's
// preferred leader) usually wins; after a leader went silent it is that
// order rotated by Config.CampaignSeed, so that groups with the same
// members (every group of a three-node cluster) do not all put the same
// survivor first. Every replica of a group computes the same ranks.
func (r *Raft) campaignRank(silent ServerID) time.Duration {
	var voters []ServerID
	for _, s := range r.configurations.latest.Servers {
		if s.Suffrage == Voter && s.ID != silent {
			voters = append(voters, s.ID)
		}
	}
	n, seed := uint64(len(voters)), r.config().CampaignSeed
	if silent == "" {
		seed = 0
	}
	for i, id := range voters {
		if id == r.localID {
			return time.Duration((uint64(i) + n - seed%n) % n)
		}
	}
	return 0
}

// contactResumed forgets a follower's silent leader once it hears from a
// leader again, leaving the limiter's queue.
func (r *Raft) contactResumed(fc *followerCampaign) {
	fc.timedOutAt, fc.deadLeader, fc.idle, fc.priority = time.Time{}, "", false, false
	r.endCampaignWait(fc, false)
}

// watchLeaderNode returns the channel that Liveness closes when the node
// of this follower's leader is lost, or nil (no Liveness, no leader, or
// its node not up now). A follower that is not quiesced watches it too,
// so that a busy group's follower does not wait out its heartbeat timeout
// after its leader's node died (Ferry fork).
func (r *Raft) watchLeaderNode() <-chan struct{} {
	if r.liveness == nil {
		return nil
	}
	addr, id := r.LeaderWithID()
	if addr == "" {
		return nil
	}
	if alive, lost := r.liveness.PeerAlive(id, addr); alive {
		return lost
	}
	return nil
}

// leaderNodeUp reports whether the node of a known leader is up, for the
// check that refuses votes while a leader is known: true without
// Liveness (upstream behaviour). A voter whose leader's node is lost
// votes although it has not timed out itself yet, so that the first
// candidate of a group wins its first round instead of waiting an
// election timeout for the voter's own timer (Ferry fork). Votes stay as
// safe as ever: the check only avoids disrupting a healthy leader.
func (r *Raft) leaderNodeUp(id ServerID, addr ServerAddress) bool {
	if r.liveness == nil {
		return true
	}
	alive, _ := r.liveness.PeerAlive(id, addr)
	return alive
}

// leaderNodeStillLost reports, on a follower that saw its leader's node
// lost, whether that is still so: then it times out although its last
// contact is recent. It clears *lost once the node is back or the
// follower knows no leader (upstream's timeout then decides).
func (r *Raft) leaderNodeStillLost(lost *bool) bool {
	if !*lost || r.liveness == nil {
		return false
	}
	addr, id := r.LeaderWithID()
	if addr != "" {
		if alive, _ := r.liveness.PeerAlive(id, addr); !alive {
			return true
		}
	}
	*lost = false
	return false
}

// endCampaignWait leaves the limiter's queue, if in it.
func (r *Raft) endCampaignWait(fc *followerCampaign, tookSlot bool) {
	if fc.done != nil {
		fc.done(tookSlot)
	}
	fc.wake, fc.done, fc.woken = nil, nil, false
}

// campaignRoundsMax is how many election rounds a candidate runs on one
// slot before it hands the slot back and waits as a follower: a group
// that cannot win (its quorum is unreachable) must not keep a slot that
// groups which can win are waiting for.
const campaignRoundsMax = 3

// afterCandidateRound runs after each runCandidate: it releases the slot
// once the node is no longer a candidate, and after campaignRoundsMax
// rounds without a result it releases the slot and goes back to waiting
// as a follower. Main thread only.
func (r *Raft) afterCandidateRound() {
	if !r.campaignHeld {
		return
	}
	if r.getState() == Candidate {
		r.campaignRounds++
		if r.campaignRounds < campaignRoundsMax {
			return
		}
		r.logger.Info("no result after several election rounds, yielding the campaign slot", "rounds", r.campaignRounds)
		r.setState(Follower)
	}
	r.releaseCampaign()
}

// releaseCampaign returns a held slot. Main thread only.
func (r *Raft) releaseCampaign() {
	if r.campaignHeld {
		r.campaignHeld = false
		r.campaigns.Release()
	}
}
