package raftlog

import (
	"fmt"

	"github.com/ferrymq/ferry/wal"
	"github.com/hashicorp/raft"
)

// reqKind says what a request asks of the writer.
type reqKind uint8

const (
	reqStore reqKind = iota + 1
	reqDelete
	reqDrop
	reqStable
)

// request is one call waiting for the writer.
type request struct {
	kind     reqKind
	g        *GroupLog
	logs     []*raft.Log
	min, max uint64
	key      string // reqStable
	val      []byte // reqStable
	bytes    int64  // record bytes it will write, for batch bounds
	done     chan error

	// Set by the writer while staging.
	err       error
	positions []wal.Pos
	mk        marker // a delete's marker, or a Set's record
	hasMarker bool
}

// groupView is a group's extent as seen by the requests staged so far in
// one batch.
type groupView struct {
	first, last uint64 // last 0 means empty
	dropped     bool
	newKeys     map[string]bool // stable keys the batch adds
}

// submit queues r, commits the queue or leaves it to the writer
// (commitQueued), and waits for r's answer.
func (s *Store) submit(r *request) error {
	r.done = make(chan error, 1)
	if err := s.enqueue(r); err != nil {
		return err
	}
	s.commitQueued()
	return <-r.done
}

// submitAll queues rs together, in order, and waits for every answer;
// it returns the first error. Batches are taken in queue order and each
// is synced before the next, so a later request of rs is never durable
// without the earlier ones.
func (s *Store) submitAll(rs []*request) error {
	for _, r := range rs {
		r.done = make(chan error, 1)
	}
	if err := s.enqueue(rs...); err != nil {
		return err
	}
	s.commitQueued()
	var first error
	for _, r := range rs {
		if err := <-r.done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// enqueue appends rs to the queue, or returns ErrClosed after Close.
func (s *Store) enqueue(rs ...*request) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.qclosed {
		return ErrClosed
	}
	s.queue = append(s.queue, rs...)
	return nil
}

// commitQueued commits the next batch of the queue on the calling
// goroutine when nobody is committing, and otherwise wakes the writer,
// which commits it once the batch in progress is durable. Committing in
// the caller spares the two goroutine hand-offs of going through the
// writer (waking it, and it waking the caller), which under a
// synchronous load of one group on a 2-core machine measured about a
// tenth of a round's latency and CPU. Batching is unchanged: calls
// queued while a commit runs go together in the next one. A caller
// commits one batch at most; anything left, and compaction, is the
// writer's.
func (s *Store) commitQueued() {
	if !s.commitMu.TryLock() {
		s.nudge()
		return
	}
	batch := s.takeBatch()
	if len(batch) > 0 {
		s.commit(batch)
		s.st.callerBatches.Add(1)
	}
	due := s.compactionDue()
	s.commitMu.Unlock()
	if due {
		s.nudge()
	}
}

// nudge wakes the writer without blocking.
func (s *Store) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the writer goroutine: it commits the batches queued while a
// commit was in progress, and between batches runs bounded compaction
// steps when compaction is due.
func (s *Store) run() {
	defer close(s.done)
	for {
		closing := s.waitWork()
		s.commitMu.Lock()
		batch := s.takeBatch()
		if len(batch) > 0 {
			s.commit(batch)
			due := s.compactionDue()
			s.commitMu.Unlock()
			if due {
				s.nudge() // look at compaction once the queue is empty
			}
			continue // takeBatch nudged if more is queued
		}
		if closing {
			// Under commitMu: a caller's commit in progress has ended,
			// and with the queue closed and empty none can begin.
			s.commitMu.Unlock()
			return
		}
		more := s.compactIfDue()
		s.commitMu.Unlock()
		if more {
			s.nudge()
		}
	}
}

// waitWork waits until the queue holds a request, the writer is nudged,
// or Close was called; it reports the last.
func (s *Store) waitWork() (closing bool) {
	s.qmu.Lock()
	empty, closed := len(s.queue) == 0, s.qclosed
	s.qmu.Unlock()
	if empty && !closed {
		select {
		case <-s.wake:
		case <-s.closing:
		}
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.qclosed
}

// takeBatch removes the next batch from the queue (possibly none),
// bounded by BatchCallsMax and BatchBytesMax, and nudges the writer if
// requests remain. The caller holds commitMu.
func (s *Store) takeBatch() []*request {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	var n int
	var bytes int64
	for n < len(s.queue) && n < s.cfg.BatchCallsMax {
		if n > 0 && bytes+s.queue[n].bytes > s.cfg.BatchBytesMax {
			break
		}
		bytes += s.queue[n].bytes
		n++
	}
	if n == 0 {
		return nil
	}
	batch := append([]*request(nil), s.queue[:n]...)
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	if rest > 0 {
		s.nudge()
	}
	return batch
}

// compactState is where the log stood when compaction was looked at.
type compactState struct {
	deadMarks uint64
	segment   uint32
}

// compactionDue reports whether compaction should be looked at: a record
// died or a segment was sealed since a step last found nothing to do. The
// caller holds commitMu.
func (s *Store) compactionDue() bool {
	return s.compactNow() != s.compactSeen
}

// compactNow is the log's state as compactionDue compares it.
func (s *Store) compactNow() compactState {
	return compactState{deadMarks: s.deadMarks.Load(), segment: s.log.End().Pos().Segment}
}

// compactIfDue runs one compaction step if compaction is due and reports
// whether more work is waiting. The caller holds commitMu.
func (s *Store) compactIfDue() bool {
	now := s.compactNow()
	if now == s.compactSeen {
		return false
	}
	if s.compactStep() {
		return true
	}
	s.compactSeen = now
	return false
}

// commit writes a batch with one append and one sync, cuts it back on
// failure, applies it to the indexes on success, and answers every call.
func (s *Store) commit(batch []*request) {
	s.mu.RLock()
	failed := s.failed
	s.mu.RUnlock()
	if failed != nil {
		for _, r := range batch {
			r.done <- fmt.Errorf("%w: %w", ErrFailed, failed)
		}
		return
	}
	mark := s.log.End()
	views := make(map[*GroupLog]*groupView)
	var werr error
	wrote := false
	for _, r := range batch {
		if werr = s.stage(r, views); werr != nil {
			break
		}
		wrote = wrote || (r.err == nil && r.kind != reqDrop)
	}
	if werr == nil && wrote {
		werr = s.syncBatch(mark)
	}
	if werr != nil {
		s.abort(batch, mark, werr)
	}
	s.mu.Lock()
	for _, r := range batch {
		if r.err == nil {
			s.applyLocked(r)
		}
	}
	s.reapLocked()
	s.mu.Unlock()
	s.st.batches.Add(1)
	s.st.callsCommitted.Add(uint64(len(batch)))
	if n := int64(len(batch)); n > s.st.maxBatchCalls.Load() {
		s.st.maxBatchCalls.Store(n)
	}
	for _, r := range batch {
		r.done <- r.err
	}
}

// syncBatch makes everything appended since mark durable.
func (s *Store) syncBatch(mark wal.Mark) error {
	end := s.log.End().Pos()
	if s.cfg.SyncMode == SyncData {
		if err := s.log.SyncData(); err != nil {
			return err
		}
		s.st.syncs.Add(1)
	}
	s.st.bytesSync.Add(uint64(bytesBetween(mark.Pos(), end)))
	return nil
}

// bytesBetween estimates the bytes written from a to b: exact within one
// segment, the bytes of b's segment otherwise.
func bytesBetween(a, b wal.Pos) int64 {
	if a.Segment == b.Segment {
		return int64(b.Offset) - int64(a.Offset)
	}
	return int64(b.Offset) - walSegmentHeaderBytes
}

// abort cuts a failed batch back and fails its store and delete calls.
// Drops already took effect in the registry and still apply.
func (s *Store) abort(batch []*request, mark wal.Mark, werr error) {
	s.st.writeErrors.Add(1)
	err := classifyWriteError(werr)
	s.logger.Warn("raftlog: write failed, cutting the batch back", "dir", s.cfg.Dir, "err", werr)
	if rerr := s.log.RollbackTo(mark); rerr != nil {
		s.logger.Error("raftlog: cutting a failed write back failed; the store refuses writes until reopened",
			"dir", s.cfg.Dir, "err", rerr)
		s.mu.Lock()
		s.failed = rerr
		s.mu.Unlock()
		err = fmt.Errorf("%w: %w", ErrFailed, rerr)
	}
	for _, r := range batch {
		if r.kind != reqDrop && r.err == nil {
			r.err = err
		}
	}
}

// view returns g's extent within the batch being staged.
func view(views map[*GroupLog]*groupView, g *GroupLog) *groupView {
	v := views[g]
	if v == nil {
		// Only the writer changes these fields, so it reads them unlocked.
		v = &groupView{first: g.first, last: g.lastLocked(), dropped: g.dropped}
		views[g] = v
	}
	return v
}

// stage validates r against the batch so far and appends its records. A
// refused call gets r.err; a write failure is returned (the whole batch
// fails).
func (s *Store) stage(r *request, views map[*GroupLog]*groupView) error {
	v := view(views, r.g)
	if v.dropped {
		r.err = ErrGroupDropped
		return nil
	}
	switch r.kind {
	case reqStore:
		return s.stageStore(r, v)
	case reqDelete:
		return s.stageDelete(r, v)
	case reqStable:
		return s.stageStable(r, v)
	case reqDrop:
		if err := s.dropFromRegistry(r.g); err != nil {
			r.err = classifyWriteError(err)
			return nil
		}
		v.dropped = true
	}
	return nil
}

// stageStore appends the entries of a StoreLogs call.
func (s *Store) stageStore(r *request, v *groupView) error {
	lo, hi := r.logs[0].Index, r.logs[len(r.logs)-1].Index
	if v.last != 0 && (lo < v.first || lo > v.last+1) {
		r.err = fmt.Errorf("%w: group %q holds %d..%d, call starts at %d", ErrNotContiguous, r.g.name, v.first, v.last, lo)
		return nil
	}
	r.positions = make([]wal.Pos, 0, len(r.logs))
	for _, l := range r.logs {
		s.scratch = encodeEntry(s.scratch[:0], kindEntry, r.g.id, l)
		pos, err := s.log.Append(s.nextSeq, s.scratch)
		if err != nil {
			return err
		}
		s.nextSeq++
		r.positions = append(r.positions, pos)
	}
	if v.last == 0 {
		v.first = lo
	}
	v.last = max(v.last, hi)
	return nil
}

// stageDelete turns a DeleteRange call into a truncate or prefix marker.
func (s *Store) stageDelete(r *request, v *groupView) error {
	if v.last == 0 {
		return nil
	}
	lo, hi := max(r.min, v.first), min(r.max, v.last)
	if lo > hi {
		return nil
	}
	var kind byte
	var value uint64
	switch {
	case hi == v.last:
		kind, value = kindTruncate, lo-1
		if lo == v.first {
			v.first, v.last = 0, 0
		} else {
			v.last = lo - 1
		}
	case lo == v.first:
		kind, value = kindPrefix, hi+1
		v.first = hi + 1
	default:
		r.err = fmt.Errorf("%w: %d..%d lies strictly inside %d..%d", ErrBadRange, lo, hi, v.first, v.last)
		return nil
	}
	s.scratch = encodeMarker(s.scratch[:0], kind, r.g.id, value)
	pos, err := s.log.Append(s.nextSeq, s.scratch)
	if err != nil {
		return err
	}
	r.mk = marker{kind: kind, value: value, seq: s.nextSeq, pos: pos}
	r.hasMarker = true
	s.nextSeq++
	return nil
}

// dropFromRegistry removes g from the registry file durably.
func (s *Store) dropFromRegistry(g *GroupLog) error {
	s.regSave.Lock()
	defer s.regSave.Unlock()
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if id, ok := s.reg.ids[g.name]; !ok || id != g.id {
		return nil
	}
	delete(s.reg.ids, g.name)
	if err := s.reg.save(); err != nil {
		s.reg.ids[g.name] = g.id
		return err
	}
	return nil
}

// applyLocked makes a durable request visible in the indexes.
func (s *Store) applyLocked(r *request) {
	switch r.kind {
	case reqStore:
		s.applyStoreLocked(r)
	case reqDelete:
		if r.hasMarker {
			s.applyMarkerLocked(r.g, r.mk)
		}
	case reqStable:
		s.applyStableLocked(r)
	case reqDrop:
		s.applyDropLocked(r.g)
	}
}

// applyStoreLocked adds stored entries to the group's index.
func (s *Store) applyStoreLocked(r *request) {
	g := r.g
	for i, l := range r.logs {
		p := r.positions[i]
		s.countLocked(p.Segment, g.id, 1)
		s.st.entriesAppended.Add(1)
		s.st.entryBytesAppended.Add(uint64(len(l.Data) + len(l.Extensions)))
		switch last := g.lastLocked(); {
		case len(g.pos) == 0:
			g.first = l.Index
			g.pos = append(g.pos[:0], p)
		case l.Index == last+1:
			g.pos = append(g.pos, p)
		default:
			old := &g.pos[l.Index-g.first]
			s.killLocked(*old)
			*old = p
		}
	}
}

// applyMarkerLocked removes the entries a truncate or prefix marker names
// and records the marker.
func (s *Store) applyMarkerLocked(g *GroupLog, mk marker) {
	s.countLocked(mk.pos.Segment, g.id, 1)
	last := g.lastLocked()
	switch mk.kind {
	case kindTruncate:
		keep := 0
		if len(g.pos) > 0 && mk.value >= g.first {
			keep = int(min(mk.value, last) - g.first + 1)
		}
		for _, p := range g.pos[keep:] {
			s.killLocked(p)
		}
		g.pos = shrink(g.pos[:keep])
		if len(g.pos) == 0 {
			g.first = 0
		}
	case kindPrefix:
		n := int(min(mk.value, last+1) - g.first)
		for _, p := range g.pos[:n] {
			s.killLocked(p)
		}
		g.pos = shrink(g.pos[n:])
		g.first = mk.value
	}
	g.markers = append(g.markers, mk)
	s.checkMarkersLocked(g, s.minSegmentsLocked())
}

// shrink returns p, copied into a right-sized array when most of its
// backing array is unused, so that index memory follows the log's length.
func shrink(p []wal.Pos) []wal.Pos {
	if len(p) == 0 {
		return nil
	}
	if cap(p) > 2*len(p)+64 {
		return append(make([]wal.Pos, 0, len(p)+len(p)/4), p...)
	}
	return p
}

// applyDropLocked forgets a dropped group and releases its records.
func (s *Store) applyDropLocked(g *GroupLog) {
	g.dropped = true
	for _, p := range g.pos {
		s.killLocked(p)
	}
	for _, mk := range g.markers {
		s.killMarkerLocked(mk)
	}
	for _, v := range g.stable {
		s.killLocked(v.pos)
	}
	g.pos, g.markers, g.first, g.stable = nil, nil, 0, nil
	delete(s.groups, g.name)
	delete(s.byID, g.id)
	for _, counts := range s.segs {
		delete(counts, g.id)
	}
}
