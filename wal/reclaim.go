package wal

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// MarkDead records that the owner no longer needs the record at pos, whose
// payload is payloadBytes long. When every record of a sealed segment is
// dead the segment file is deleted at once, or, if a pin covers it, when
// the last such pin is released. The active segment is never deleted; it
// is retired when it is sealed if it is entirely dead by then.
//
// The Log does not remember which records are dead, only how many bytes
// per segment: marking a record dead twice, or with the wrong size, skews
// that count. A mark that would exceed the segment's record bytes returns
// ErrBadPosition and changes nothing.
func (l *Log) MarkDead(pos Pos, payloadBytes int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	seg, err := l.segmentForLocked(pos)
	if err != nil {
		return err
	}
	size := recordBytes(payloadBytes)
	if payloadBytes < 0 || int64(pos.Offset)+size > seg.sizeBytes {
		return fmt.Errorf("%w: %v: a record with a %d-byte payload runs past the segment end at %d",
			ErrBadPosition, pos, payloadBytes, seg.sizeBytes)
	}
	if seg.deadBytes+size > seg.recordBytes {
		return fmt.Errorf("%w: %v: marking %d more bytes dead would exceed the segment's %d record bytes (%d already dead)",
			ErrBadPosition, pos, size, seg.recordBytes, seg.deadBytes)
	}
	seg.deadBytes += size
	if seg.sealed && seg.entirelyDead() {
		_, err := l.retireLocked(seg)
		return err
	}
	return nil
}

// retireLocked deletes an entirely dead sealed segment, or defers the
// deletion if a pin covers it. It reports whether deletion was deferred.
func (l *Log) retireLocked(seg *segment) (deferred bool, err error) {
	if seg == l.active || seg.pendingDelete {
		return seg.pendingDelete, nil
	}
	if l.pinnedLocked(seg.num) {
		seg.pendingDelete = true
		return true, nil
	}
	return false, l.deleteLocked(seg)
}

// deleteLocked closes and removes a segment file and forgets the segment.
func (l *Log) deleteLocked(seg *segment) error {
	cerr := seg.close()
	delete(l.segments, seg.num)
	seg.deleted = true
	seg.pendingDelete = false
	seg.buf = nil
	l.segmentsDeleted++
	l.dirDirty = true
	if err := os.Remove(seg.path); err != nil {
		return errors.Join(cerr, fmt.Errorf("wal: delete segment %d: %w", seg.num, err))
	}
	return cerr
}

// pinnedLocked reports whether a pin covers segment num.
func (l *Log) pinnedLocked(num uint32) bool {
	for _, highest := range l.pins {
		if highest >= num {
			return true
		}
	}
	return false
}

// Pin keeps every segment that exists now from being deleted until release
// is called, so that positions captured after Pin stay readable even if
// their records are marked dead or moved by Compact. Segments created
// later are not covered. release is idempotent and safe to call from any
// goroutine; pins left unreleased end at Close.
func (l *Log) Pin() (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return func() {}
	}
	l.nextPinID++
	id := l.nextPinID
	l.pins[id] = l.active.num
	var once sync.Once
	return func() { once.Do(func() { l.unpin(id) }) }
}

// unpin drops one pin and deletes the segments it alone was keeping.
func (l *Log) unpin(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	delete(l.pins, id)
	for _, seg := range l.segments {
		if !seg.pendingDelete || l.pinnedLocked(seg.num) {
			continue
		}
		if err := l.deleteLocked(seg); err != nil {
			l.logger.Error("wal: deleting segment after pin release", "dir", l.cfg.Dir, "segment", seg.num, "err", err)
		}
	}
}

// Scan calls fn for every record of every segment not waiting for
// deletion, oldest first and in offset order, with the record's payload
// length. It stops at the first error fn returns and returns it. An owner
// uses Scan after Open to re-mark records dead. fn may call Read, but must
// not modify the Log; records appended during Scan may or may not be seen.
func (l *Log) Scan(fn func(key uint64, pos Pos, payloadBytes int) error) error {
	return l.scanSegments(0, 0, func(key uint64, pos Pos, payloadBytes int, _ []byte) error {
		return fn(key, pos, payloadBytes)
	})
}

// scanFailure turns a scanner error into the error reported to callers.
func scanFailure(num uint32, err error) error {
	var fe *frameError
	if errors.As(err, &fe) {
		return corruptf(num, fe.offset, "%s", fe.reason)
	}
	return fmt.Errorf("wal: scan segment %d: %w", num, err)
}
