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
