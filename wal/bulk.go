package wal

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ferrymq/ferry/internal/diskfault"
	"golang.org/x/sys/unix"
)

// This file holds the calls an owner needs to use the log as a durable,
// group-committed store rather than a buffer rebuilt from elsewhere: a data
// sync that does not block readers, rolling back a failed write, scanning
// with payload prefixes, and per-segment accounting.

// Mark is the end of the log at one moment: where the next record would
// start and how many records the active segment held then. RollbackTo
// returns the log to a Mark.
type Mark struct {
	end     Pos
	records int
}

// Pos returns the position at which the log ended when the Mark was taken.
func (m Mark) Pos() Pos {
	return m.end
}

// End returns the current end of the log. Owner only.
func (l *Log) End() Mark {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.active == nil {
		return Mark{}
	}
	return Mark{end: Pos{Segment: l.active.num, Offset: uint32(l.active.sizeBytes)}, records: l.active.records}
}

// RollbackTo discards every record appended after m was taken: segments
// created since are deleted, the segment that was active then is cut back
// to m and made active again, and the cut is made durable. It also clears
// the failed state left by a write error (ErrFailed), so that an owner can
// answer a failed write with an error, roll back to the last durable end,
// and go on writing once the cause (a full disk) is gone. Records after m
// must not have been marked dead or handed out. Owner only.
func (l *Log) RollbackTo(m Mark) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	target, start, records := l.segments[m.end.Segment], int64(m.end.Offset), m.records
	if target == nil || target.pendingDelete {
		// The segment of the mark was entirely dead and was retired when
		// it was sealed: what followed the mark starts the next segment.
		target, start, records = l.segments[m.end.Segment+1], segmentHeaderBytes, 0
	}
	if target == nil || start < segmentHeaderBytes || start > target.sizeBytes {
		return fmt.Errorf("%w: rollback to %v: no such end of the log", ErrBadPosition, m.end)
	}
	var errs []error
	for _, seg := range l.sortedSegmentsLocked() {
		if seg.num > target.num {
			errs = append(errs, l.deleteLocked(seg))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return l.fail(err)
	}
	if err := cutSegment(target, start); err != nil {
		return l.fail(err)
	}
	target.records = records
	target.recordBytes = start - segmentHeaderBytes
	target.deadBytes = min(target.deadBytes, target.recordBytes)
	target.sealed = false
	l.activate(target)
	if l.dirDirty {
		if err := syncDir(l.cfg.Dir); err != nil {
			return l.fail(err)
		}
		l.dirDirty = false
	}
	l.failed = nil
	return nil
}

// cutSegment shortens seg to size bytes, keeping buffered bytes before
// size, and makes the cut durable.
func cutSegment(seg *segment, size int64) error {
	if size <= seg.flushedBytes {
		seg.buf = seg.buf[:0]
		seg.flushedBytes = size
	} else {
		seg.buf = seg.buf[:size-seg.flushedBytes]
	}
	seg.sizeBytes = size
	// A failed fsync before the FileCache closed the file is reported
	// here too: the cut may not cover what it lost.
	if _, err := seg.h.syncNeeded(); err != nil {
		return err
	}
	f, gen, err := seg.h.acquire(true)
	if err != nil {
		return err
	}
	defer seg.h.release()
	// The file may also hold part of a write that failed beyond
	// flushedBytes.
	if err := f.Truncate(seg.flushedBytes); err != nil {
		return fmt.Errorf("wal: truncate segment %d at offset %d: %w", seg.num, seg.flushedBytes, err)
	}
	seg.prewritten = false
	if err := fdatasyncFile(seg.num, f); err != nil {
		return err
	}
	seg.h.synced(gen)
	return nil
}

// injectedSyncError returns the fsync failure a chaosdisk build's armed
// fault injects for seg, or nil. Appends' syncs (Sync, SyncData, the seal
// of a rotated segment) call it; the sync of RollbackTo's cut does not,
// so that an injected fault never stops a failed write being cut back.
func injectedSyncError(seg *segment) error {
	if err := diskfault.SyncError(seg.path); err != nil {
		return fmt.Errorf("wal: sync segment %d: %w", seg.num, err)
	}
	return nil
}

// fdatasyncFile makes the written bytes of f, the file of segment num,
// and its size durable.
func fdatasyncFile(num uint32, f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("wal: sync segment %d: %w", num, err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return fmt.Errorf("wal: sync segment %d: %w", num, err)
	}
	if serr != nil {
		return fmt.Errorf("wal: sync segment %d: %w", num, serr)
	}
	return nil
}

// SyncData writes buffered records to the active segment and makes them
// durable with fdatasync (and fsyncs the directory if a segment was created
// since the last sync). Unlike Sync it holds the log's lock only while
// flushing, so reads go on during the device flush. Owner only.
func (l *Log) SyncData() error {
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	seg := l.active
	f, gen, err := l.flushForSyncLocked(seg)
	if err != nil {
		err = l.fail(err)
		l.mu.Unlock()
		return err
	}
	dirDirty := l.dirDirty
	l.dirDirty = false
	l.mu.Unlock()

	// Only the owner rotates or deletes the active segment, and the
	// FileCache closes no file in use, so f stays open while we sync
	// without the lock. In a chaosdisk build an armed fault may fail the
	// sync instead.
	err = injectedSyncError(seg)
	if f != nil {
		if err == nil {
			if err = fdatasyncFile(seg.num, f); err == nil {
				seg.h.synced(gen)
			}
		}
		seg.h.release()
	}
	if err == nil && dirDirty {
		err = syncDir(l.cfg.Dir)
	}
	if err != nil {
		l.mu.Lock()
		if dirDirty {
			l.dirDirty = true
		}
		err = l.fail(err)
		l.mu.Unlock()
	}
	return err
}

// flushForSyncLocked writes seg's buffer and, if the file was written
// since its last fsync, returns it acquired (the caller syncs and
// releases it) with its write generation; nil if there is nothing to
// sync.
func (l *Log) flushForSyncLocked(seg *segment) (*os.File, uint64, error) {
	if err := seg.flush(); err != nil {
		return nil, 0, err
	}
	need, err := seg.h.syncNeeded()
	if err != nil || !need {
		return nil, 0, err
	}
	return seg.h.acquire(false)
}

// PrefixFunc receives one record of a prefix scan: its key, position,
// payload length and up to the requested number of leading payload bytes.
// prefix is valid only during the call.
type PrefixFunc func(key uint64, pos Pos, payloadBytes int, prefix []byte) error

// ScanPrefix is Scan that also hands fn up to prefixBytes leading bytes of
// every payload. Checksums of whole records are verified as they are
// scanned; the payloads beyond the prefix are never copied.
func (l *Log) ScanPrefix(prefixBytes int, fn PrefixFunc) error {
	return l.scanSegments(0, prefixBytes, fn)
}

// ScanSegmentPrefix is ScanPrefix over one segment only. A segment that
// does not exist is ErrBadPosition.
func (l *Log) ScanSegmentPrefix(num uint32, prefixBytes int, fn PrefixFunc) error {
	if num == 0 {
		return fmt.Errorf("%w: segment 0 does not exist", ErrBadPosition)
	}
	return l.scanSegments(num, prefixBytes, fn)
}

// scanSegments scans segment only (or every segment when only is 0).
func (l *Log) scanSegments(only uint32, prefixBytes int, fn PrefixFunc) error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	var segs []*segment
	var ends []int64
	for _, seg := range l.sortedSegmentsLocked() {
		if !seg.pendingDelete && (only == 0 || seg.num == only) {
			segs = append(segs, seg)
			ends = append(ends, seg.sizeBytes)
		}
	}
	l.mu.RUnlock()
	if only != 0 && len(segs) == 0 {
		return fmt.Errorf("%w: segment %d not found", ErrBadPosition, only)
	}
	for i, seg := range segs {
		sc := newRecordScanner(lockedReaderAt{l, seg}, segmentHeaderBytes, ends[i], false)
		sc.prefixBytes = max(prefixBytes, 0)
		for {
			rec, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return scanFailure(seg.num, err)
			}
			pos := Pos{Segment: seg.num, Offset: uint32(rec.offset)}
			if err := fn(rec.key, pos, rec.payloadBytes, rec.prefix); err != nil {
				return err
			}
		}
	}
	return nil
}

// payloadLengthLocked reads the payload length from the header at pos.
func (l *Log) payloadLengthLocked(seg *segment, pos Pos) (int, error) {
	var b [recordHeaderBytes]byte
	if err := seg.readAt(b[:], int64(pos.Offset)); err != nil {
		return 0, err
	}
	n := parseRecordHeader(b[:]).length
	if int64(n) > seg.sizeBytes-int64(pos.Offset)-recordHeaderBytes {
		return 0, corruptf(seg.num, int64(pos.Offset), "record length %d runs past the segment end at %d", n, seg.sizeBytes)
	}
	return int(n), nil
}

// MarkDeadAt is MarkDead for an owner that does not keep record sizes: it
// reads the payload length from the record header at pos.
func (l *Log) MarkDeadAt(pos Pos) error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	seg, err := l.segmentForLocked(pos)
	if err != nil {
		l.mu.RUnlock()
		return err
	}
	n, err := l.payloadLengthLocked(seg, pos)
	l.mu.RUnlock()
	if err != nil {
		return err
	}
	return l.MarkDead(pos, n)
}

// ReadHeadAndRange reads, with one read of the file where they are close,
// the first len(head) payload bytes of the record at pos into head and
// the len(p) payload bytes starting off into p. Both ranges must lie
// within the payload. A body that sits in the middle of a large record
// costs two reads (the head, then the range); one near its start costs
// one, instead of a read of the record header per range. The checksum is
// not verified, as in ReadRange.
func (l *Log) ReadHeadAndRange(pos Pos, head []byte, off int64, p []byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	seg, err := l.segmentForLocked(pos)
	if err != nil {
		return err
	}
	start := int64(pos.Offset)
	if off >= 0 && off+int64(len(p)) <= int64(len(head))+oneReadGapBytes {
		// Record header, head and range in one read.
		end := max(off+int64(len(p)), int64(len(head)))
		buf := make([]byte, recordHeaderBytes+end)
		if _, err := l.readRecordPrefix(seg, start, buf); err != nil {
			return err
		}
		copy(head, buf[recordHeaderBytes:])
		copy(p, buf[recordHeaderBytes+off:])
		return nil
	}
	buf := make([]byte, recordHeaderBytes+len(head))
	n, err := l.readRecordPrefix(seg, start, buf)
	if err != nil {
		return err
	}
	copy(head, buf[recordHeaderBytes:])
	if off < 0 || off+int64(len(p)) > int64(n) {
		return fmt.Errorf("%w: %v: range [%d,%d) outside the %d-byte payload", ErrBadPosition, pos, off, off+int64(len(p)), n)
	}
	return seg.readAt(p, start+recordHeaderBytes+off)
}

// oneReadGapBytes is how many payload bytes between the head and the range
// ReadHeadAndRange reads rather than make a second read.
const oneReadGapBytes = 16 << 10

// readRecordPrefix reads buf (a record header and as much of the payload
// as fits after it) at start and returns the payload length, checked
// against the segment and against len(buf).
func (l *Log) readRecordPrefix(seg *segment, start int64, buf []byte) (int, error) {
	if start+int64(len(buf)) > seg.sizeBytes {
		return 0, fmt.Errorf("%w: segment %d offset %d: %d bytes run past its end at %d", ErrBadPosition, seg.num, start, len(buf), seg.sizeBytes)
	}
	if err := seg.readAt(buf, start); err != nil {
		return 0, err
	}
	n := parseRecordHeader(buf).length
	if int64(n) > seg.sizeBytes-start-recordHeaderBytes {
		return 0, corruptf(seg.num, start, "record length %d runs past the segment end at %d", n, seg.sizeBytes)
	}
	if int64(len(buf)-recordHeaderBytes) > int64(n) {
		return 0, fmt.Errorf("%w: segment %d offset %d: %d payload bytes asked of a %d-byte record", ErrBadPosition, seg.num, start, len(buf)-recordHeaderBytes, n)
	}
	return int(n), nil
}

// ReadRange fills p with payload bytes of the record at pos, starting off
// bytes into the payload. The range must lie within the payload. The
// record's checksum is not verified (that would read the whole record);
// Read does that.
func (l *Log) ReadRange(pos Pos, off int64, p []byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	seg, err := l.segmentForLocked(pos)
	if err != nil {
		return err
	}
	n, err := l.payloadLengthLocked(seg, pos)
	if err != nil {
		return err
	}
	if off < 0 || off+int64(len(p)) > int64(n) {
		return fmt.Errorf("%w: %v: range [%d,%d) outside the %d-byte payload", ErrBadPosition, pos, off, off+int64(len(p)), n)
	}
	return seg.readAt(p, int64(pos.Offset)+recordHeaderBytes+off)
}

// SegmentInfo describes one segment file. Sizes are in bytes.
type SegmentInfo struct {
	// Number is the segment number.
	Number uint32
	// Sealed is false only for the active segment.
	Sealed bool
	// PendingDelete is set for an entirely dead segment kept for a pin.
	PendingDelete bool
	// Records counts the records in the segment, dead or live.
	Records int
	// RecordBytes counts record bytes, headers included.
	RecordBytes int64
	// DeadBytes is the part of RecordBytes marked dead.
	DeadBytes int64
}

// SegmentsDeleted counts the segment files deleted since Open (as
// Stats().SegmentsDeleted, without building the rest of Stats): a caller
// that keeps per-segment state can tell from it whether any went away.
func (l *Log) SegmentsDeleted() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segmentsDeleted
}

// Segments describes every segment file, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	segs := l.sortedSegmentsLocked()
	out := make([]SegmentInfo, 0, len(segs))
	for _, s := range segs {
		out = append(out, SegmentInfo{
			Number: s.num, Sealed: s.sealed, PendingDelete: s.pendingDelete,
			Records: s.records, RecordBytes: s.recordBytes, DeadBytes: s.deadBytes,
		})
	}
	return out
}
