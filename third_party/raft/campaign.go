// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

// This file is not part of upstream hashicorp/raft: it is Ferry's bound on
// concurrent campaigns (see FORK.md).

package raft

// CampaignLimiter bounds how many groups of one node campaign at once.
// When a node leading thousands of groups dies, every follower of those
// groups times out together; unbounded, their pre-votes, votes and first
// entries swamp the surviving nodes, rounds outlast the election timeout,
// and elections restart without end. With a limiter, a follower that finds
// no free slot stays a follower without a leader (so it grants the votes
// of the candidates that got one) and tries again on its next timeout.
type CampaignLimiter interface {
	// TryAcquire takes a slot, reporting false when none is free.
	TryAcquire() bool
	// Release returns a slot TryAcquire took.
	Release()
}

// campaignRoundsMax is how many election rounds a candidate runs on one
// slot before it hands the slot back and waits as a follower: a group
// that cannot win (its quorum is unreachable) must not keep a slot that
// groups which can win are waiting for.
const campaignRoundsMax = 3

// takeCampaign reports whether this follower may start an election now,
// taking a slot when a limiter is set. Main thread only.
func (r *Raft) takeCampaign() bool {
	if r.campaigns == nil || r.campaignHeld {
		return true
	}
	if !r.campaigns.TryAcquire() {
		return false
	}
	r.campaignHeld, r.campaignRounds = true, 0
	return true
}

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
