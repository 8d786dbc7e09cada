package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// A long poll waiting on a leader that hands leadership away answers
// not-leader soon, not when the old leader next hears of a commit: with a
// long CommitTimeout an idle follower learns of the new leader's commits
// seconds later, and the poll would sleep through the client's wait.
func TestPartition_LongPollOnADeposedLeaderAnswersNotLeader(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.CommitTimeout = 3 * time.Second })
	l := c.leader()
	c.converged()
	done := make(chan error, 1)
	go func() {
		_, err := c.reps[l].Receive(ctxT(t), fsm.ReceiveCmd{Max: 1, Visibility: time.Second}, 10*time.Second)
		done <- err
	}()
	next := (l + 1) % 3
	start := time.Now()
	if err := c.reps[l].TransferLeadership(string(c.peers[next].ID), string(c.peers[next].Address)); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("the deposed leader's long poll answered %v, want ErrNotLeader", err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Fatalf("the deposed leader's long poll answered after %v", d)
		}
	case <-time.After(2500 * time.Millisecond):
		t.Fatal("the deposed leader's long poll still waits 2.5 s after the transfer")
	}
}
