// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

// This file is not part of upstream hashicorp/raft: it is Ferry's cheaper
// election path (see FORK.md).

package raft

import "fmt"

// StableWrite is one key of a StableBatchStore.SetBatch: Val as Set
// stores it, or, with IsUint64, Uint64 as SetUint64 does.
type StableWrite struct {
	Key      []byte
	Val      []byte
	Uint64   uint64
	IsUint64 bool
}

// StableBatchStore is a StableStore that stores several keys with one
// durable write. Upstream stores an election's new term and its vote with
// three writes in a row, on the candidate and on each voter, each waiting
// for the disk; with thousands of groups electing at once those waits
// are most of an election.
type StableBatchStore interface {
	StableStore
	// SetBatch stores every write, in order, and returns once all are
	// durable; a write is never durable without those before it (a crash
	// keeps a prefix of the batch).
	SetBatch(writes []StableWrite) error
}

// termAndVote is what an election stores: the new term and, in the same
// term, the vote for candidate.
func termAndVote(term uint64, candidate []byte) []StableWrite {
	return []StableWrite{
		{Key: keyCurrentTerm, Uint64: term, IsUint64: true},
		{Key: keyLastVoteTerm, Uint64: term, IsUint64: true},
		{Key: keyLastVoteCand, Val: candidate},
	}
}

// setTermWithSelfVote starts a candidate's term: it stores the new term
// and, when this server votes, its vote for itself, with one write if the
// store can. It reports whether the vote was stored (the caller stores it
// otherwise). Main thread only.
func (r *Raft) setTermWithSelfVote(term uint64, self []byte) (voted bool) {
	sb, ok := r.stable.(StableBatchStore)
	if !ok || !hasVote(r.configurations.latest, r.localID) {
		r.setCurrentTerm(term)
		return false
	}
	if err := sb.SetBatch(termAndVote(term, self)); err != nil {
		panic(fmt.Errorf("failed to save current term and vote: %v", err))
	}
	r.raftState.setCurrentTerm(term)
	return true
}

// persistVoteRaisingTerm stores a vote for candidate in term; when
// newTerm is set (the request raised this server's term), the new term
// goes into the same write if the store can. Main thread only.
func (r *Raft) persistVoteRaisingTerm(term uint64, candidate []byte, newTerm *uint64) error {
	sb, ok := r.stable.(StableBatchStore)
	if !ok || *newTerm == 0 {
		return r.persistVote(term, candidate)
	}
	if *newTerm != term {
		panic(fmt.Sprintf("raft: vote in term %d with the term raised to %d", term, *newTerm))
	}
	if err := sb.SetBatch(termAndVote(term, candidate)); err != nil {
		return err
	}
	r.raftState.setCurrentTerm(term)
	*newTerm = 0
	return nil
}
