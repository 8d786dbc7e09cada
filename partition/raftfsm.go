package partition

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/hashicorp/raft"
)

// raftFSM adapts the partition's fsm.FSM to raft.BatchingFSM. Apply and
// ApplyBatch run on raft's FSM goroutine; they take the partition's lock for
// the whole batch so readers see whole batches.
type raftFSM Partition

var _ raft.BatchingFSM = (*raftFSM)(nil)

// Apply applies one entry.
func (r *raftFSM) Apply(l *raft.Log) any {
	return r.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in order. Command entries yield an
// fsm.Result each; configuration entries yield nil.
func (r *raftFSM) ApplyBatch(logs []*raft.Log) []any {
	p := (*Partition)(r)
	if hook := p.beforeApply.Load(); hook != nil {
		(*hook)()
	}
	out := make([]any, len(logs))
	p.mu.Lock()
	// Only the leader's results reach clients: a leader that steps down
	// fails its pending futures, so followers need no bodies.
	// p.raft is set under p.mu once NewRaft returns; entries a leader
	// sends a brand-new replica may apply before that (not a leader then).
	leader := p.raft != nil && p.raft.State() == raft.Leader
	p.fsm.SkipBodies(!leader)
	counted := p.fsm.Counters()
	clockBefore := p.fsm.Clock()
	before, hadDeadline := p.fsm.NextDeadline()
	snapshot := false
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = p.fsm.ApplyEntry(l.Index, l.Data)
			snapshot = p.snaps.applied(len(l.Data)) || snapshot
		}
		p.applied = l.Index
		p.serveDigestWaitsLocked()
	}
	p.markClockLocked(clockBefore)
	after, hasDeadline := p.fsm.NextDeadline()
	p.noteDeadline(after, hasDeadline)
	if p.fsm.HasEligible() {
		p.wakeReceivesLocked()
	}
	counts := p.fsm.Counters()
	p.mu.Unlock()
	if leader {
		p.logEvictions(counted, counts)
	}
	if n := counts.ClockRefused - counted.ClockRefused; n > 0 {
		// Every replica refuses the same commands; each says so, so that
		// whichever log is read shows it.
		p.logger.Warn("commands refused: stamped more than the max clock step ahead of the partition clock (the proposing leader's clock is suspect)",
			"count", n, "clock_refused_total", counts.ClockRefused, "max_clock_step", p.fsm.MaxClockStep())
	}
	if leader && hasDeadline && (!hadDeadline || after < before) {
		p.armTick(time.Duration(after - p.now().UnixNano()))
	}
	if snapshot {
		p.snapshotBySize()
	}
	return out
}

// evictionLogEvery is the least time between two eviction log lines of one
// partition; the counts in between are summed into the next line.
const evictionLogEvery = 10 * time.Second

// evictionLog holds the evictions not yet logged and when the last line
// was written.
type evictionLog struct {
	at          time.Time
	dead, dedup uint64
}

// logEvictions reports, on the leader, the dead letters and dedup ids that
// commands deleted to stay within the queue's caps, so that they never go
// silently: at once, then at most once every evictionLogEvery with the
// counts since the last line.
func (p *Partition) logEvictions(before, after fsm.Counters) {
	e := &p.evictions
	e.dead += after.DeadEvicted - before.DeadEvicted
	e.dedup += after.DedupEvicted - before.DedupEvicted
	now := p.now()
	if e.dead+e.dedup == 0 || now.Sub(e.at) < evictionLogEvery {
		return
	}
	if e.dead > 0 {
		p.logger.Warn("dead letters deleted: partition at its max_dead or max_dead_bytes",
			"count", e.dead, "dead_evicted_total", after.DeadEvicted)
	}
	if e.dedup > 0 {
		p.logger.Warn("dedup ids forgotten early: partition at its dedup_max_ids, a retry of one is no longer a duplicate",
			"count", e.dedup, "dedup_evicted_total", after.DedupEvicted)
	}
	*e = evictionLog{at: now}
}

// Snapshot freezes the FSM; raft persists it on another goroutine. The
// body records written so far are made durable first, since the local
// snapshot will name them; a pin keeps everything it names until a newer
// snapshot replaces it.
func (r *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	p := (*Partition)(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.body.Sync(); err != nil {
		return nil, fmt.Errorf("partition %s: sync body records: %w", p.cfg.GroupID, err)
	}
	return &raftSnapshot{applied: p.applied, snap: p.fsm.Snapshot(), keep: p.bodies.Pin(), bodies: p.bodies,
		trigger: p.snaps, covered: p.snaps.frozen()}, nil
}

// Restore replaces the FSM's state with a snapshot's.
func (r *raftFSM) Restore(rc io.ReadCloser) error {
	p := (*Partition)(r)
	defer rc.Close()
	var head [8]byte
	if _, err := io.ReadFull(rc, head[:]); err != nil {
		return fmt.Errorf("partition snapshot header: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applied = binary.LittleEndian.Uint64(head[:])
	p.clockMark = clockMark{} // the restored clock was moved elsewhere
	if err := p.fsm.Restore(rc); err != nil {
		return err
	}
	p.serveDigestWaitsLocked()
	p.noteDeadline(p.fsm.NextDeadline())
	if !p.starting.Load() {
		return nil // an install: the full form, payloads in body records
	}
	if err := p.bodies.finishRestore(); err != nil {
		return fmt.Errorf("partition %s: release old body records: %w", p.cfg.GroupID, err)
	}
	p.bodies.adoptSnapshotPin(p.bodies.Pin())
	return nil
}

// raftSnapshot is the FSM's snapshot preceded by the index of the last
// entry it includes, so a restored replica reports the same applied index
// as the replica it came from.
type raftSnapshot struct {
	applied uint64
	snap    *fsm.Snapshot
	keep    func() // the pin the snapshot's store keeps once it is persisted
	bodies  *replicaBodies
	trigger *snapshotTrigger
	covered int64 // applied entry bytes the snapshot includes
}

func (s *raftSnapshot) Persist(sink raft.SnapshotSink) error {
	var head [8]byte
	binary.LittleEndian.PutUint64(head[:], s.applied)
	out := &countingWriter{w: sink}
	_, err := out.Write(head[:])
	if err == nil {
		err = s.snap.PersistLocal(out)
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	s.bodies.adoptSnapshotPin(s.keep)
	s.keep = nil
	s.trigger.persisted(out.n, s.covered)
	return nil
}

// Release lets the frozen state go; the pin stays with the store when the
// snapshot was persisted.
func (s *raftSnapshot) Release() {
	s.snap.Release()
	if s.keep != nil {
		s.keep()
		s.keep = nil
	}
}
