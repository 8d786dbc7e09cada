package partition

import (
	"sync"
	"time"

	"github.com/ferrymq/ferry/internal/raftutil"
	"github.com/hashicorp/raft"
)

// The scheduler serves every replica of the process (a node's replicas)
// from a fixed set of goroutines, so that an idle replica, leader or
// follower, runs none of its own:
//
//   - one sweeper looks at every replica each schedulerSweep: it logs the
//     leader changes the replica learnt (raft reports elections at Debug),
//     arms the tick timer of a replica that leads with a deadline pending
//     (a new leader, or a timer lost to a race), and hands out the
//     periodic WAL compaction of each replica every CompactInterval;
//   - schedulerWorkers workers run those compactions, one replica at a
//     time each, so that a slow compaction never delays the sweep.
//
// What a replica needs only while something happens runs on goroutines it
// starts then and that end with it: the proposal batchers (while requests
// come), the tick (when a deadline is due on the leader: see armTick), a
// snapshot taken by size (when due). Raft's own goroutines and the
// transport's are not the partition's.
const (
	schedulerSweep   = 250 * time.Millisecond
	schedulerWorkers = 2
	// schedulerJobsMax bounds the compactions waiting for a worker; a
	// replica whose compaction finds the queue full is tried again at the
	// next sweep.
	schedulerJobsMax = 256
)

// scheduler is the process's shared scheduler (see above).
type scheduler struct {
	mu    sync.Mutex
	reps  map[*Partition]*sweepState
	jobs  chan *Partition
	start sync.Once
}

// sweepState is what the sweeper keeps of one replica. Owned by the
// sweeper goroutine, except that register creates it.
type sweepState struct {
	leader      raft.ServerID // the leader last logged; none at first
	nextCompact time.Time
	// noDeadlineAt is the applied index at which this replica, leading,
	// held no deadline (0: not known); the sweep does not ask its FSM
	// again until the index moves or it stops leading.
	noDeadlineAt uint64
}

// sharedScheduler serves every replica in the process.
var sharedScheduler = &scheduler{reps: make(map[*Partition]*sweepState), jobs: make(chan *Partition, schedulerJobsMax)}

// register adds p to the sweep, starting the scheduler's goroutines on
// first use.
func (s *scheduler) register(p *Partition) {
	s.start.Do(func() {
		go s.sweepLoop()
		for range schedulerWorkers {
			go s.work()
		}
	})
	s.mu.Lock()
	s.reps[p] = &sweepState{nextCompact: time.Now().Add(p.cfg.CompactInterval)}
	s.mu.Unlock()
}

// unregister removes p from the sweep; a compaction of p already handed
// out still runs (Close waits for it through p.loops).
func (s *scheduler) unregister(p *Partition) {
	s.mu.Lock()
	delete(s.reps, p)
	s.mu.Unlock()
}

// sweepLoop runs a sweep every schedulerSweep, for as long as the process
// lives (it costs one timer while no replica is registered).
func (s *scheduler) sweepLoop() {
	t := time.NewTicker(schedulerSweep)
	defer t.Stop()
	var batch []*Partition
	var states []*sweepState
	for range t.C {
		s.mu.Lock()
		batch, states = batch[:0], states[:0]
		for p, st := range s.reps {
			batch = append(batch, p)
			states = append(states, st)
		}
		s.mu.Unlock()
		now := time.Now()
		for i, p := range batch {
			s.sweepOne(p, states[i], now)
		}
		clear(batch)
	}
}

// sweepOne looks at one replica: its leader, its tick timer, its
// compaction.
func (s *scheduler) sweepOne(p *Partition, st *sweepState, now time.Time) {
	_, id := p.raft.LeaderWithID()
	if id != st.leader {
		st.leader = id
		p.logLeader(id)
	}
	switch {
	case p.raft.State() != raft.Leader:
		st.noDeadlineAt = 0
	case !p.tickArmed():
		if applied := p.raft.AppliedIndex(); applied != st.noDeadlineAt && !p.armTickForDeadline() {
			st.noDeadlineAt = applied
		}
	default:
		p.rearmIfLate(now)
	}
	if now.Before(st.nextCompact) {
		return
	}
	if !p.track() {
		return // closing
	}
	select {
	case s.jobs <- p:
		st.nextCompact = now.Add(p.cfg.CompactInterval)
	default:
		p.loops.Done() // every worker busy: next sweep
	}
}

// work runs the compactions handed out by the sweeper.
func (s *scheduler) work() {
	for p := range s.jobs {
		p.compact()
		p.loops.Done()
	}
}

// leaderLines is the process's budget for "partition leader changed"
// lines: every replica logs each leader it learns, which is what an
// operator needs for a few partitions and 70,000 lines a minute when a
// node leading thousands dies.
var leaderLines = raftutil.NewLogBudget(leaderLinesPerSecond, leaderLinesBurst, time.Now)

// Bounds of leaderLines.
const (
	leaderLinesPerSecond = 100
	leaderLinesBurst     = 1000
)

// logLeader logs, at Info and within a process budget, the leader this
// replica learnt, with the term
// and the applied index: raft's own messages about elections and
// transfers are at Debug (and a leadership transfer logs nothing above
// it), so without this an operator (or a chaos run's logs) cannot tell
// who led a partition when. Changes faster than a sweep show as one.
func (p *Partition) logLeader(id raft.ServerID) {
	leader := string(id)
	if leader == "" {
		leader = "(none)"
	}
	ok, suppressed := leaderLines.Take()
	if !ok {
		return
	}
	if suppressed > 0 {
		p.logger.Info("partition leader changes not logged (over the process's budget)", "count", suppressed)
	}
	p.logger.Info("partition leader changed", "leader", leader,
		"term", p.raft.CurrentTerm(), "applied_index", p.raft.AppliedIndex())
}

// track counts a goroutine or job of the replica in p.loops, which Close
// waits for, unless the replica is closing (then it returns false and
// nothing may start).
func (p *Partition) track() bool {
	p.trackMu.Lock()
	defer p.trackMu.Unlock()
	if p.stopped {
		return false
	}
	p.loops.Add(1)
	return true
}

// stopTracking makes track refuse from now on; Close then waits for what
// was tracked.
func (p *Partition) stopTracking() {
	p.trackMu.Lock()
	p.stopped = true
	p.trackMu.Unlock()
}

// goTracked runs fn on a new goroutine counted in p.loops, unless the
// replica is closing.
func (p *Partition) goTracked(fn func()) bool {
	if !p.track() {
		return false
	}
	go func() {
		defer p.loops.Done()
		fn()
	}()
	return true
}
