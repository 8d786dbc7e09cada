package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/hashicorp/raft"
)

// neverAnswered is an apply future raft took as it shut down: nobody
// answers it.
type neverAnswered struct{ raft.ApplyFuture }

func (neverAnswered) Error() error { select {} }

type answered struct{ raft.ApplyFuture }

func (answered) Error() error { return nil }

func TestPartition_WaitAppliedReturnsOnceRaftIsDown(t *testing.T) {
	p := &Partition{raftDown: make(chan struct{})}
	if err := p.waitApplied(answered{}); err != nil {
		t.Fatalf("answered future: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- p.waitApplied(neverAnswered{}) }()
	select {
	case err := <-got:
		t.Fatalf("returned %v before raft was down", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(p.raftDown)
	wantShutdown(t, got)
}

// TestPartition_ProposalsWaitWithoutAGoroutine: raft's apply and barrier
// futures can be waited on until raft is down without a goroutine per
// future (the raft fork's ErrorUnless), and waitApplied gets their
// answers that way.
func TestPartition_ProposalsWaitWithoutAGoroutine(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	defer c.close()
	p := c.reps[c.leader()]
	f := p.raft.Barrier(time.Second)
	if _, ok := f.(errorUnless); !ok {
		t.Fatalf("raft's barrier future %T cannot be waited on with a way out", f)
	}
	if err := p.waitApplied(f); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	af, err := p.startProposal(ctxT(t), fsm.Command{Type: fsm.CmdPurge})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := af.(errorUnless); !ok {
		t.Fatalf("raft's apply future %T cannot be waited on with a way out", af)
	}
	if _, err := p.proposalResult(af); err != nil {
		t.Fatalf("proposal: %v", err)
	}
}

// neverAnsweredStoppable is a future like raft's (it has ErrorUnless)
// that nobody answers.
type neverAnsweredStoppable struct{ raft.ApplyFuture }

func (neverAnsweredStoppable) Error() error { select {} }

func (neverAnsweredStoppable) ErrorUnless(stop <-chan struct{}) (error, bool) {
	<-stop
	return nil, false
}

func TestPartition_WaitAppliedWithAWayOutReturnsOnceRaftIsDown(t *testing.T) {
	p := &Partition{raftDown: make(chan struct{})}
	got := make(chan error, 1)
	go func() { got <- p.waitApplied(neverAnsweredStoppable{}) }()
	close(p.raftDown)
	wantShutdown(t, got)
}

// wantShutdown waits for waitApplied's result on got, which must be
// raft.ErrRaftShutdown, raft being down.
func wantShutdown(t *testing.T, got <-chan error) {
	t.Helper()
	select {
	case err := <-got:
		if !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatalf("got %v, want raft.ErrRaftShutdown", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a future nobody answers kept waitApplied after raft shut down")
	}
}
