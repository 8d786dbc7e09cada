package partition

import (
	"errors"
	"testing"
	"time"

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
	select {
	case err := <-got:
		if !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatalf("got %v, want raft.ErrRaftShutdown", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a future nobody answers kept waitApplied after raft shut down")
	}
}
