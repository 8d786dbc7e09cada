package raft

import "testing"

// TestNotifyAnswered_LateAnswerCountsOnlyForEarlierVerifies: an answer to a
// heartbeat votes for the verifies registered before that heartbeat was
// sent, and leaves a verify registered while it was on its way for the
// next heartbeat (Ferry fork).
func TestNotifyAnswered_LateAnswerCountsOnlyForEarlierVerifies(t *testing.T) {
	s := &followerReplication{notify: make(map[*verifyFuture]uint64)}
	ch := make(chan *verifyFuture, 2)
	before := &verifyFuture{notifyCh: ch, quorumSize: 1}
	after := &verifyFuture{notifyCh: ch, quorumSize: 1}
	s.addNotify(before)
	mark := s.notifyMark() // the heartbeat leaves
	s.addNotify(after)     // a verify begins while it is on its way
	s.notifyAnswered(mark, true)
	if before.votes != 1 || len(ch) != 1 || <-ch != before {
		t.Fatalf("the verify registered before the heartbeat got %d votes", before.votes)
	}
	if after.votes != 0 {
		t.Fatal("a late answer counted for a verify registered after its heartbeat left")
	}
	if _, ok := s.notify[after]; !ok || len(s.notify) != 1 {
		t.Fatalf("pending after the answer: %v, want only the later verify", s.notify)
	}
	s.notifyAnswered(s.notifyMark(), true) // the next heartbeat's answer
	if after.votes != 1 || len(s.notify) != 0 {
		t.Fatalf("the later verify: %d votes, %d pending", after.votes, len(s.notify))
	}
}

// TestUpdateLastAppended_AnswerVotesOnlyForVerifiesBeforeTheRequest: a
// successful append's answer votes for the verifies registered when the
// leader built the request, not for one that began while it was on its
// way (Ferry fork; upstream's notifyAll counted it).
func TestUpdateLastAppended_AnswerVotesOnlyForVerifiesBeforeTheRequest(t *testing.T) {
	s := &followerReplication{notify: make(map[*verifyFuture]uint64), peer: Server{ID: "f1"},
		commitment: newCommitment(make(chan struct{}, 1), Configuration{Servers: []Server{{ID: "f1", Suffrage: Voter}}}, 1)}
	ch := make(chan *verifyFuture, 2)
	before := &verifyFuture{notifyCh: ch, quorumSize: 1}
	after := &verifyFuture{notifyCh: ch, quorumSize: 1}
	s.addNotify(before)
	req := &AppendEntriesRequest{notifyMark: s.notifyMark(), Entries: []*Log{{Index: 1, Term: 1}}}
	s.addNotify(after) // a verify begins while the append is on its way
	updateLastAppended(s, req)
	if before.votes != 1 || after.votes != 0 {
		t.Fatalf("votes: %d for the verify before the request, %d for the one after; want 1 and 0", before.votes, after.votes)
	}
	if _, ok := s.notify[after]; !ok || len(s.notify) != 1 {
		t.Fatalf("pending after the answer: %v, want only the later verify", s.notify)
	}
	updateLastAppended(s, &AppendEntriesRequest{notifyMark: s.notifyMark()}) // the next append's answer
	if after.votes != 1 || len(s.notify) != 0 {
		t.Fatalf("the later verify: %d votes, %d pending", after.votes, len(s.notify))
	}
}
