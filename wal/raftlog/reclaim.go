package raftlog

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/ferrymq/ferry/wal"
)

// countLocked adds n records of group id to segment seg's accounting.
func (s *Store) countLocked(seg, id uint32, n int32) {
	counts := s.segs[seg]
	if counts == nil {
		counts = make(map[uint32]int32)
		s.segs[seg] = counts
	}
	counts[id] += n
}

// killLocked makes the record at p reclaimable, unless a Retention keeps
// it (it becomes an orphan, reclaimed at release) or dead records are
// being held after Open.
func (s *Store) killLocked(p wal.Pos) {
	if rr := s.retained[p]; rr != nil {
		rr.orphan = true
		return
	}
	s.markDeadLocked(p)
}

// markDeadLocked tells the wal that nothing needs the record at p.
func (s *Store) markDeadLocked(p wal.Pos) {
	s.deadMarks.Add(1)
	if s.holding {
		s.heldDead = append(s.heldDead, p)
		return
	}
	if err := s.log.MarkDeadAt(p); err != nil && !errors.Is(err, wal.ErrClosed) {
		s.logger.Error("raftlog: marking a record dead", "dir", s.cfg.Dir, "pos", p.String(), "err", err)
	}
}

// killMarkerLocked makes a marker record reclaimable.
func (s *Store) killMarkerLocked(mk marker) {
	s.markDeadLocked(mk.pos)
}

// minSegmentsLocked returns, per group id, the oldest segment holding any
// record (entry or marker, dead or live) of the group.
func (s *Store) minSegmentsLocked() map[uint32]uint32 {
	mins := make(map[uint32]uint32, len(s.byID))
	for seg, counts := range s.segs {
		for id, n := range counts {
			if n <= 0 {
				continue
			}
			if m, ok := mins[id]; !ok || seg < m {
				mins[id] = seg
			}
		}
	}
	return mins
}

// checkMarkersLocked drops the markers of g that no longer protect
// anything. A marker in segment m can only concern records written before
// it, which lie in segments up to m; once no older segment holds a record
// of g, everything it could kill is gone with its own segment, so it is
// dead. Of the prefix markers only the newest matters: it covers what the
// older ones covered.
func (s *Store) checkMarkersLocked(g *GroupLog, mins map[uint32]uint32) {
	newestPrefix := -1
	for i, mk := range g.markers {
		if mk.kind == kindPrefix {
			newestPrefix = i
		}
	}
	min, ok := mins[g.id]
	if !ok {
		min = math.MaxUint32
	}
	kept := g.markers[:0]
	for i, mk := range g.markers {
		live := min < mk.pos.Segment && (mk.kind == kindTruncate || i == newestPrefix)
		if live {
			kept = append(kept, mk)
		} else {
			s.killMarkerLocked(mk)
		}
	}
	clear(g.markers[len(kept):])
	g.markers = kept
}

// reapLocked notices segments the wal deleted, drops their accounting and
// re-checks markers, until nothing more dies.
func (s *Store) reapLocked() {
	deleted := s.log.SegmentsDeleted()
	if deleted == s.reapedAt {
		return // no segment went away since the last reap: nothing to forget
	}
	defer func() { s.reapedAt = s.log.SegmentsDeleted() }()
	for {
		exists := make(map[uint32]bool)
		for _, info := range s.log.Segments() {
			exists[info.Number] = true
		}
		gone := 0
		for seg := range s.segs {
			if !exists[seg] {
				delete(s.segs, seg)
				delete(s.noCompact, seg)
				gone++
			}
		}
		if gone == 0 {
			return
		}
		s.st.segmentsDeleted.Add(uint64(gone))
		mins := s.minSegmentsLocked()
		before := 0
		for _, g := range s.byID {
			before += len(g.markers)
		}
		after := 0
		for _, g := range s.byID {
			s.checkMarkersLocked(g, mins)
			after += len(g.markers)
		}
		if after == before {
			return
		}
	}
}

// move is one record a compaction step copies forward.
type move struct {
	seq          uint64
	from, to     wal.Pos
	h            recHeader
	payloadBytes int
}

// compactCandidate returns the oldest sealed segment whose live share is
// below Config.CompactLiveRatio, or 0.
func (s *Store) compactCandidate() uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed || s.failed != nil || s.holding {
		return 0
	}
	for _, info := range s.log.Segments() {
		if !info.Sealed || info.PendingDelete || info.RecordBytes == 0 || s.noCompact[info.Number] {
			continue
		}
		live := float64(info.RecordBytes-info.DeadBytes) / float64(info.RecordBytes)
		if live < s.cfg.CompactLiveRatio {
			return info.Number
		}
	}
	return 0
}

// liveLocked reports whether the record at pos with header h is still
// needed: an entry its group holds there, a live marker, or a retained
// record.
func (s *Store) liveLocked(h recHeader, pos wal.Pos) bool {
	if s.retained[pos] != nil {
		return true
	}
	g := s.byID[h.group]
	if g == nil {
		return false
	}
	switch h.kind {
	case kindEntry:
		p, ok := g.posLocked(h.index)
		return ok && p == pos
	case kindTruncate, kindPrefix:
		for _, mk := range g.markers {
			if mk.pos == pos {
				return true
			}
		}
	case kindStable:
		_, ok := stableKeyAtLocked(g, pos)
		return ok
	}
	return false
}

// errStepFull stops a compaction scan once a step has enough bytes.
var errStepFull = errors.New("compaction step full")

// compactStep copies up to CompactBytesMax of live records out of the
// oldest mostly-dead segment, makes the copies durable, and then points
// the indexes (and retentions) at them, so the old segment can die. It
// reports whether more work is waiting.
func (s *Store) compactStep() bool {
	seg := s.compactCandidate()
	if seg == 0 {
		return false
	}
	moves, full, err := s.collectMoves(seg)
	if err != nil {
		s.logger.Error("raftlog: compaction scan failed", "dir", s.cfg.Dir, "segment", seg, "err", err)
		s.mu.Lock()
		s.noCompact[seg] = true
		s.mu.Unlock()
		return false
	}
	if len(moves) == 0 {
		// The wal counts bytes nobody here needs as live; nothing can be
		// moved, so do not try this segment again.
		s.logger.Warn("raftlog: mostly-dead segment has no live record to move", "dir", s.cfg.Dir, "segment", seg)
		s.mu.Lock()
		s.noCompact[seg] = true
		s.mu.Unlock()
		return true
	}
	mark := s.log.End()
	if err := s.copyMoves(moves, mark); err != nil {
		s.abortCompaction(mark, err)
		return false
	}
	s.applyMoves(moves)
	return full || s.compactCandidate() != 0
}

// collectMoves lists the live records of seg, up to CompactBytesMax. The
// lock is taken per record, so readers never wait for the whole scan; a
// record that dies after it was listed is caught by applyMoves.
func (s *Store) collectMoves(seg uint32) (moves []move, full bool, err error) {
	var bytes int64
	err = s.log.ScanSegmentPrefix(seg, scanPrefixBytes, func(seq uint64, pos wal.Pos, n int, prefix []byte) error {
		h, err := decodeHeader(prefix, n)
		if err != nil {
			return fmt.Errorf("%w: %v: %v", ErrCorrupt, pos, err)
		}
		s.mu.RLock()
		live := s.liveLocked(h, pos)
		s.mu.RUnlock()
		if !live {
			return nil
		}
		moves = append(moves, move{seq: seq, from: pos, h: h, payloadBytes: n})
		if bytes += walRecordHeaderBytes + int64(n); bytes >= s.cfg.CompactBytesMax {
			return errStepFull
		}
		return nil
	})
	if errors.Is(err, errStepFull) {
		return moves, true, nil
	}
	return moves, false, err
}

// copyMoves appends a copy of every move's record, keeping its write
// sequence, and syncs. An entry that raft no longer holds but a Retention
// keeps is copied as kindKept, so that it can never rejoin a log.
func (s *Store) copyMoves(moves []move, mark wal.Mark) error {
	for i := range moves {
		m := &moves[i]
		_, payload, err := s.log.Read(m.from)
		if err != nil {
			return err
		}
		if m.h.kind == kindEntry {
			s.mu.RLock()
			g := s.byID[m.h.group]
			held := false
			if g != nil {
				p, ok := g.posLocked(m.h.index)
				held = ok && p == m.from
			}
			s.mu.RUnlock()
			if !held {
				payload[0] = kindKept
				m.h.kind = kindKept
			}
		}
		if m.to, err = s.log.Append(m.seq, payload); err != nil {
			return err
		}
	}
	return s.syncBatch(mark)
}

// abortCompaction cuts a failed compaction step back.
func (s *Store) abortCompaction(mark wal.Mark, err error) {
	s.st.writeErrors.Add(1)
	s.logger.Warn("raftlog: compaction write failed, cutting it back", "dir", s.cfg.Dir, "err", err)
	if rerr := s.log.RollbackTo(mark); rerr != nil {
		s.logger.Error("raftlog: cutting a failed compaction back failed", "dir", s.cfg.Dir, "err", rerr)
		s.mu.Lock()
		s.failed = rerr
		s.mu.Unlock()
	}
}

// applyMoves points everything that referred to a moved record at its
// copy, then lets the original die; a record that died meanwhile lets its
// copy die instead. Moved callbacks run after the lock is released.
func (s *Store) applyMoves(moves []move) {
	var notes []func()
	s.mu.Lock()
	for _, m := range moves {
		live := s.liveLocked(recHeader{kind: kindEntryIfKept(m.h.kind), group: m.h.group, index: m.h.index}, m.from)
		if !live {
			s.markDeadLocked(m.to)
			continue
		}
		notes = append(notes, s.redirectLocked(m)...)
		if err := s.log.MarkDead(m.from, m.payloadBytes); err != nil {
			s.logger.Error("raftlog: marking a moved record dead", "dir", s.cfg.Dir, "pos", m.from.String(), "err", err)
		}
		s.st.recordsCompacted.Add(1)
		s.st.bytesCompacted.Add(uint64(walRecordHeaderBytes + m.payloadBytes))
	}
	s.reapLocked()
	s.mu.Unlock()
	for _, note := range notes {
		note()
	}
}

// kindEntryIfKept maps a kept copy back to the entry kind of its original
// for the liveness check.
func kindEntryIfKept(kind byte) byte {
	if kind == kindKept {
		return kindEntry
	}
	return kind
}

// redirectLocked updates the index, marker list and retentions that name
// m.from to name m.to, returning the moved callbacks to run.
func (s *Store) redirectLocked(m move) []func() {
	if g := s.byID[m.h.group]; g != nil {
		switch m.h.kind {
		case kindEntry:
			if p, ok := g.posLocked(m.h.index); ok && p == m.from {
				g.pos[m.h.index-g.first] = m.to
				s.countLocked(m.to.Segment, g.id, 1)
			}
		case kindTruncate, kindPrefix:
			for i := range g.markers {
				if g.markers[i].pos == m.from {
					g.markers[i].pos = m.to
					s.countLocked(m.to.Segment, g.id, 1)
				}
			}
		case kindStable:
			if k, ok := stableKeyAtLocked(g, m.from); ok {
				v := g.stable[k]
				v.pos = m.to
				g.stable[k] = v
			}
		}
	}
	rr := s.retained[m.from]
	if rr == nil {
		return nil
	}
	delete(s.retained, m.from)
	rr.pos = m.to
	s.retained[m.to] = rr
	notes := make([]func(), 0, len(rr.holders))
	ids := make([]uint64, 0, len(rr.holders))
	for id := range rr.holders {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if fn := rr.holders[id]; fn != nil {
			from, to := m.from, m.to
			notes = append(notes, func() { fn(from, to) })
		}
	}
	return notes
}
