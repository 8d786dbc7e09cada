package partition

import (
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/raft"
)

// readGate remembers the leader term whose first read barrier completed, so
// that only the first read of a term pays for one.
//
// Why reads need it: a replica elected leader may hold entries that an
// earlier leader committed (and confirmed to clients) but that this replica
// has not applied yet; it learns their commit only when an entry of its own
// term commits, and applies them after that on raft's FSM goroutine. Until
// then its state lags what clients were told, and a read of it (stats, dead
// letters, peek) would miss confirmed messages.
type readGate struct {
	mu      sync.Mutex
	term    uint64        // the leader term known to be applied through
	running uint64        // the term of the barrier in flight, 0 if none
	done    chan struct{} // closed when the barrier in flight ends
	err     error         // the result of the last barrier
}

// ReadBarrier returns once this replica leads its group and its state holds
// every entry committed before its term began, so that a read of it that
// follows (Stats, ListDead, PeekDead) sees every write confirmed to a
// client before the call. The first call of a leader term appends a raft
// barrier entry and waits for it to be applied; later calls of the term
// return at once. Concurrent callers share one barrier.
//
// It fails with a *NotLeaderError when this replica does not lead (or
// stops leading meanwhile: a read has nothing in doubt), ErrTimeout when
// the barrier could not be handed to raft in time, ErrClosed, or ctx's
// cause.
func (p *Partition) ReadBarrier(ctx context.Context) error {
	term, ok := p.LeaderTerm()
	if !ok {
		if err := p.checkLeader(); err != nil {
			return err
		}
		return p.notLeader()
	}
	g := &p.reads
	g.mu.Lock()
	if g.term >= term {
		g.mu.Unlock()
		return nil
	}
	if g.running == term {
		done := g.done
		g.mu.Unlock()
		return p.awaitReadBarrier(ctx, done, term)
	}
	g.running, g.done = term, make(chan struct{})
	done := g.done
	g.mu.Unlock()
	go p.runReadBarrier(term, done)
	return p.awaitReadBarrier(ctx, done, term)
}

// runReadBarrier appends the barrier of one leader term and records the
// outcome. It ends within ApplyTimeout plus the barrier's commit and apply,
// or once raft has shut down (see waitApplied).
func (p *Partition) runReadBarrier(term uint64, done chan struct{}) {
	err := p.waitApplied(p.raft.Barrier(p.cfg.ApplyTimeout))
	g := &p.reads
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		g.term = max(g.term, term)
	}
	g.err = err
	g.running = 0
	close(done)
}

// awaitReadBarrier waits for the barrier of term and turns its outcome
// into ReadBarrier's errors.
func (p *Partition) awaitReadBarrier(ctx context.Context, done chan struct{}, term uint64) error {
	select {
	case <-done:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-p.closing:
		return ErrClosed
	}
	g := &p.reads
	g.mu.Lock()
	applied, err := g.term >= term, g.err
	g.mu.Unlock()
	switch {
	case applied:
		return nil
	case err == nil, errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrNotLeader),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return p.notLeader()
	default:
		return p.mapRaftError(err)
	}
}
