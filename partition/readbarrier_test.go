package partition

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
)

// A replica that becomes leader before applying entries the old leader
// confirmed does not answer reads from that stale state: ReadBarrier waits
// until its state holds them, so stats, dead letters and peeks count a
// message whose send was confirmed.
func TestPartition_NewLeaderReadsWaitForConfirmedWrites(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	send(t, c.reps[l], "before", 1)
	c.converged()
	next := (l + 1) % 3
	np := c.reps[next]

	// The next leader's FSM goroutine stops before its next batch.
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	hook := func() { <-release }
	np.beforeApply.Store(&hook)

	send(t, c.reps[l], "confirmed", 2) // committed by the leader and the third replica
	if err := c.reps[l].TransferLeadership(string(c.peers[next].ID), string(c.peers[next].Address)); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	testwait.Until(t, 10*time.Second, "the transfer", np.IsLeader)
	if st := np.Stats(); st.Ready != 1 {
		t.Fatalf("the new leader applied %d messages before its FSM was let go; the test needs it behind (want 1)", st.Ready)
	}

	type answer struct {
		ready int64
		err   error
	}
	answers := make(chan answer, 1)
	go func() {
		st, err := np.LeaderStats(ctxT(t))
		answers <- answer{st.Ready, err}
	}()
	select {
	case a := <-answers:
		t.Fatalf("read answered while the leader's state lagged: ready %d, err %v", a.ready, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	unblock()
	a := <-answers
	if a.err != nil || a.ready != 3 {
		t.Fatalf("read after the barrier: ready %d, err %v; want 3, nil", a.ready, a.err)
	}
	// Later reads of the term do not wait; a peek sees all three.
	res, err := np.Peek(ctxT(t), fsm.PeekFilter{Max: 10})
	if err != nil || len(res.Messages) != 3 {
		t.Fatalf("peek on the new leader: %d messages, %v; want 3", len(res.Messages), err)
	}
	if dead, _, err := np.LeaderDead(ctxT(t), fsm.DeadFilter{}, true, 0); err != nil || len(dead) != 0 {
		t.Fatalf("dead letters on the new leader: %v, %v; want none", dead, err)
	}
	// A follower refuses to serve a leader read.
	var nle *NotLeaderError
	if _, err := c.reps[l].LeaderStats(ctxT(t)); !errors.As(err, &nle) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("leader stats on the old leader: %v, want a not-leader error", err)
	}
	if _, _, err := c.reps[l].LeaderDead(ctxT(t), fsm.DeadFilter{}, false, 0); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("leader dead letters on the old leader: %v, want a not-leader error", err)
	}
}
