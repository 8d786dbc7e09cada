package wal

import (
	"errors"
	"io"
)

// CompactStats reports what one Compact call did. Sizes are in bytes.
type CompactStats struct {
	// SegmentsCompacted counts sealed segments whose live records were
	// copied out and which were then deleted or queued for deletion.
	SegmentsCompacted int
	// SegmentsDeferred counts compacted segments whose file deletion waits
	// for a pin to be released.
	SegmentsDeferred int
	// RecordsMoved counts records copied to the active end of the log.
	RecordsMoved int
	// RecordsDropped counts records that live reported dead.
	RecordsDropped int
	// BytesMoved is the size of the copied records.
	BytesMoved int64
	// BytesReclaimed is the size of the compacted segment files minus the
	// bytes moved out of them: the net space freed once they are deleted.
	BytesReclaimed int64
}

// compactCandidate is a segment chosen for compaction and its size then.
type compactCandidate struct {
	seg       *segment
	sizeBytes int64
}

// Compact rewrites every sealed segment whose live ratio is below
// Config.CompactLiveRatio, oldest first. For each record of such a segment
// it asks live(key, pos); a live record is appended again (rotating as
// usual) and moved(key, from, to) reports its new position. Then the old
// segment is deleted, or queued for deletion while a pin covers it.
// Segments created during the call are not compacted by it.
//
// live should answer by position (is pos still where the owner keeps key?)
// rather than by key alone, so that a record is never copied twice.
//
// The callbacks run synchronously on the calling goroutine without any Log
// lock held. They may call Read but must not call Append, MarkDead, Compact
// or Close. On error Compact stops and returns what it did so far; moved
// has been called for every record already copied.
func (l *Log) Compact(live func(key uint64, pos Pos) bool, moved func(key uint64, from, to Pos)) (CompactStats, error) {
	var st CompactStats
	if live == nil || moved == nil {
		return st, errors.New("wal: Compact needs non-nil live and moved callbacks")
	}
	cands, err := l.compactCandidates()
	if err != nil {
		return st, err
	}
	for _, c := range cands {
		if err := l.compactSegment(c, live, moved, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// compactCandidates lists the sealed segments below the live ratio.
func (l *Log) compactCandidates() ([]compactCandidate, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.writableLocked(); err != nil {
		return nil, err
	}
	var cands []compactCandidate
	for _, seg := range l.sortedSegmentsLocked() {
		if !seg.sealed || seg.pendingDelete || seg.recordBytes == 0 {
			continue
		}
		if float64(seg.liveBytes())/float64(seg.recordBytes) < l.cfg.CompactLiveRatio {
			cands = append(cands, compactCandidate{seg: seg, sizeBytes: seg.sizeBytes})
		}
	}
	return cands, nil
}

// compactSegment copies the live records out of one candidate and retires
// it.
func (l *Log) compactSegment(c compactCandidate, live func(uint64, Pos) bool, moved func(uint64, Pos, Pos), st *CompactStats) error {
	var movedBytes int64
	sc := newRecordScanner(lockedReaderAt{l, c.seg}, segmentHeaderBytes, c.sizeBytes, true)
	for {
		rec, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return scanFailure(c.seg.num, err)
		}
		from := Pos{Segment: c.seg.num, Offset: uint32(rec.offset)}
		if !live(rec.key, from) {
			st.RecordsDropped++
			continue
		}
		to, err := l.moveRecord(c.seg, rec)
		if err != nil {
			return err
		}
		moved(rec.key, from, to)
		st.RecordsMoved++
		st.BytesMoved += rec.size()
		movedBytes += rec.size()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	c.seg.deadBytes = c.seg.recordBytes
	deferred, err := l.retireLocked(c.seg)
	st.SegmentsCompacted++
	st.BytesReclaimed += c.sizeBytes - movedBytes
	if deferred {
		st.SegmentsDeferred++
	}
	return err
}

// moveRecord appends a copy of rec and counts the original as dead.
func (l *Log) moveRecord(from *segment, rec scannedRecord) (Pos, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return Pos{}, err
	}
	to, err := l.appendLocked(rec.key, rec.payload)
	if err != nil {
		return Pos{}, err
	}
	from.deadBytes = min(from.deadBytes+rec.size(), from.recordBytes)
	return to, nil
}
