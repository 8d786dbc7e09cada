package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
)

// Log is an open segmented log. See the package documentation for which
// methods may be called concurrently.
type Log struct {
	cfg    Config
	logger *slog.Logger
	// files opens and closes the segment files: Config.Files, or a cache
	// of the Log's own without bound or sweep.
	files *FileCache
	// appends counts appends, for the idle sweep (read without mu).
	appends atomic.Uint64

	// mu guards everything below. Read takes it shared for the whole read,
	// so that a segment cannot be deleted under a pread.
	mu       sync.RWMutex
	closed   bool
	failed   error // sticky write failure; see ErrFailed
	segments map[uint32]*segment
	active   *segment
	dirDirty bool // a segment was created since the directory was fsynced
	// dirtyNoted is set once the write buffer holds records and files has
	// been told (FileCache.noteDirty); the idle sweep clears it.
	dirtyNoted bool

	pins      map[uint64]uint32 // pin id -> highest segment number it covers
	nextPinID uint64

	spare         spareState // see prealloc.go
	spareFailures uint64
	sparesSkipped uint64

	recordsAppended uint64
	segmentsCreated uint64
	segmentsDeleted uint64
}

// Open opens the log in cfg.Dir, creating the directory and a first
// segment if needed, and recovers the segment files (see the package
// documentation). Every recovered record counts as live.
func Open(cfg Config) (*Log, RecoverySummary, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, RecoverySummary{}, err
	}
	if err := os.MkdirAll(cfg.Dir, dirMode); err != nil {
		return nil, RecoverySummary{}, fmt.Errorf("wal: create directory %s: %w", cfg.Dir, err)
	}
	if err := removeStaleSpare(cfg.Dir); err != nil {
		return nil, RecoverySummary{}, err
	}
	l := &Log{
		cfg:      cfg,
		logger:   cfg.Logger,
		files:    cfg.Files,
		segments: make(map[uint32]*segment),
		pins:     make(map[uint64]uint32),
	}
	if l.files == nil {
		l.files = newFileCache(0, 0)
	}
	sum, err := l.recover()
	if err != nil {
		for _, seg := range l.segments {
			_ = seg.close()
		}
		return nil, sum, err
	}
	l.logger.Debug("wal: opened", "dir", cfg.Dir, "summary", sum.String())
	l.mu.Lock()
	l.startSpareLocked()
	l.mu.Unlock()
	return l, sum, nil
}

// writableLocked returns why the log cannot take writes, or nil.
func (l *Log) writableLocked() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return fmt.Errorf("%w: %w", ErrFailed, l.failed)
	}
	return nil
}

// fail records a write failure, which makes the log refuse further writes.
// A segment file that could not be opened again (ErrReopen) is not one:
// nothing was written, and the operation may be retried.
func (l *Log) fail(err error) error {
	if l.failed == nil && !errors.Is(err, ErrReopen) {
		l.failed = err
	}
	return err
}

// Append adds a record and returns its position. The record is buffered,
// not fsynced, unless Config.SyncOnAppend is set; it is readable at once.
// A payload longer than Config.RecordBytesMax returns ErrRecordTooLarge and
// changes nothing.
func (l *Log) Append(key uint64, payload []byte) (Pos, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return Pos{}, err
	}
	if len(payload) > l.cfg.RecordBytesMax {
		return Pos{}, fmt.Errorf("%w: payload of %d bytes, limit is %d (Config.RecordBytesMax)",
			ErrRecordTooLarge, len(payload), l.cfg.RecordBytesMax)
	}
	return l.appendLocked(key, payload)
}

// appendLocked appends without the RecordBytesMax check (compaction may
// move records written under a larger limit); the record must still fit in
// an empty segment.
func (l *Log) appendLocked(key uint64, payload []byte) (Pos, error) {
	size := recordBytes(len(payload))
	if size > l.cfg.SegmentBytesMax-segmentHeaderBytes {
		return Pos{}, fmt.Errorf("%w: payload of %d bytes does not fit in a segment of %d bytes",
			ErrRecordTooLarge, len(payload), l.cfg.SegmentBytesMax)
	}
	if l.active.sizeBytes > segmentHeaderBytes &&
		(l.active.sizeBytes+size > l.cfg.SegmentBytesMax || l.sealEarlyLocked()) {
		if err := l.rotateLocked(); err != nil {
			return Pos{}, err
		}
	}
	seg := l.active
	pos := Pos{Segment: seg.num, Offset: uint32(seg.sizeBytes)}
	var hdr [recordHeaderBytes]byte
	encodeRecordHeader(&hdr, key, payload)
	if err := seg.appendRecord(hdr[:], payload); err != nil {
		return Pos{}, l.fail(err)
	}
	seg.records++
	seg.recordBytes += size
	l.recordsAppended++
	l.appends.Add(1)
	if !l.dirtyNoted && len(seg.buf) > 0 {
		l.dirtyNoted = true
		l.files.noteDirty(l)
	}
	l.startSpareLocked()
	if l.cfg.SyncOnAppend {
		if err := l.syncLocked(); err != nil {
			return Pos{}, err
		}
	}
	return pos, nil
}

// rotateLocked seals the active segment (flushed and fsynced) and starts
// the next one. A sealed segment that is already entirely dead is retired.
func (l *Log) rotateLocked() error {
	old := l.active
	if old.num == math.MaxUint32 {
		return fmt.Errorf("wal: segment numbers exhausted at segment %d", old.num)
	}
	if err := old.flush(); err != nil {
		return l.fail(err)
	}
	if err := trimPrewritten(old); err != nil {
		return l.fail(err)
	}
	if err := injectedSyncError(old); err != nil {
		return l.fail(err)
	}
	if err := old.syncFile(false); err != nil {
		return l.fail(err)
	}
	next := l.takeSpareLocked(old.num + 1)
	if next == nil {
		var err error
		if next, err = l.createSegment(old.num + 1); err != nil {
			return err
		}
	}
	next.buf, old.buf = old.buf[:0], nil
	l.addSegment(next)
	l.dirDirty = true
	l.segmentsCreated++
	if old.entirelyDead() {
		_, err := l.retireLocked(old)
		return err
	}
	return nil
}

// Read returns the key and a fresh copy of the payload of the record at
// pos, verifying its checksum. It is safe to call concurrently with every
// other method. Unflushed records are served from the write buffer.
func (l *Log) Read(pos Pos) (key uint64, payload []byte, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, nil, ErrClosed
	}
	seg, err := l.segmentForLocked(pos)
	if err != nil {
		return 0, nil, err
	}
	off := int64(pos.Offset)
	var b [recordHeaderBytes]byte
	if err := seg.readAt(b[:], off); err != nil {
		return 0, nil, err
	}
	h := parseRecordHeader(b[:])
	if int64(h.length) > seg.sizeBytes-off-recordHeaderBytes {
		return 0, nil, corruptf(seg.num, off, "record length %d runs past the segment end at %d", h.length, seg.sizeBytes)
	}
	payload = make([]byte, h.length)
	if err := seg.readAt(payload, off+recordHeaderBytes); err != nil {
		return 0, nil, err
	}
	if sum := crc32Payload(h, payload); sum != h.checksum {
		return 0, nil, corruptf(seg.num, off, "record checksum mismatch on read")
	}
	return h.key, payload, nil
}

// KeyAt returns the key of the record at pos, reading its header only (the
// payload and its checksum are not read). It is safe to call concurrently
// with every other method.
func (l *Log) KeyAt(pos Pos) (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	seg, err := l.segmentForLocked(pos)
	if err != nil {
		return 0, err
	}
	if _, err := l.payloadLengthLocked(seg, pos); err != nil {
		return 0, err
	}
	var b [recordHeaderBytes]byte
	if err := seg.readAt(b[:], int64(pos.Offset)); err != nil {
		return 0, err
	}
	return parseRecordHeader(b[:]).key, nil
}

// segmentForLocked returns the segment holding a record header at pos.
func (l *Log) segmentForLocked(pos Pos) (*segment, error) {
	seg, ok := l.segments[pos.Segment]
	if !ok {
		return nil, fmt.Errorf("%w: %v: segment not found (deleted or never written)", ErrBadPosition, pos)
	}
	if off := int64(pos.Offset); off < segmentHeaderBytes || off+recordHeaderBytes > seg.sizeBytes {
		return nil, fmt.Errorf("%w: %v: offset outside the records of the segment (%d bytes)", ErrBadPosition, pos, seg.sizeBytes)
	}
	return seg, nil
}

// Sync writes buffered records to the active segment file and fsyncs it
// (and the directory, if a segment was created since the last Sync).
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	return l.syncLocked()
}

// syncLocked is Sync with the lock held.
func (l *Log) syncLocked() error {
	seg := l.active
	if err := seg.flush(); err != nil {
		return l.fail(err)
	}
	if err := injectedSyncError(seg); err != nil {
		return l.fail(err)
	}
	if err := seg.syncFile(false); err != nil {
		return l.fail(err)
	}
	if l.dirDirty {
		if err := syncDir(l.cfg.Dir); err != nil {
			return err
		}
		l.dirDirty = false
	}
	return nil
}

// Close syncs the active segment and closes every file. Segments waiting
// only for pins to be released are deleted now: reads fail after Close in
// any case. Calling Close again returns nil.
func (l *Log) Close() error {
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return nil
	}
	spareErr := l.stopSpare()
	l.mu.Lock()
	defer l.mu.Unlock()
	errs := []error{spareErr}
	if l.failed == nil {
		if err := trimPrewritten(l.active); err != nil {
			errs = append(errs, l.fail(err))
		} else {
			errs = append(errs, l.syncLocked())
		}
	}
	l.closed = true
	l.files.forget(l)
	for _, seg := range l.segments {
		if seg.pendingDelete {
			errs = append(errs, l.deleteLocked(seg))
		} else {
			errs = append(errs, seg.close())
		}
	}
	clear(l.pins)
	return errors.Join(errs...)
}

// Remove closes the log and deletes all of its segment files, for an
// owner that resets its state. The directory itself is kept.
func (l *Log) Remove() error {
	return errors.Join(l.Close(), RemoveSegments(l.cfg.Dir))
}

// Stats is a point-in-time view of a Log. Sizes are in bytes.
type Stats struct {
	// Segments counts segment files, including the active one and those
	// waiting for pins to be released before deletion.
	Segments int
	// SegmentsPendingDelete counts entirely dead segments kept for pins.
	SegmentsPendingDelete int
	// ActiveSegment is the number of the segment receiving appends.
	ActiveSegment uint32
	// TotalBytes is the size of all segment files, headers and unflushed
	// bytes included.
	TotalBytes int64
	// RecordBytes counts record bytes (headers included) in all segments.
	RecordBytes int64
	// LiveBytes is RecordBytes not marked dead.
	LiveBytes int64
	// DeadBytes is RecordBytes marked dead; LiveBytes + DeadBytes =
	// RecordBytes.
	DeadBytes int64
	// Records counts the records held in the segment files, dead or live.
	Records int
	// UnflushedBytes is what the write buffer holds.
	UnflushedBytes int64
	// RecordsAppended counts appends since Open, compaction copies
	// included.
	RecordsAppended uint64
	// SegmentsCreated counts segments created by rotation since Open.
	SegmentsCreated uint64
	// SegmentsDeleted counts segment files deleted since Open.
	SegmentsDeleted uint64
	// Pins is the number of pins not yet released.
	Pins int
	// SpareBytes is disk written ahead of records by
	// Config.PreallocateSegments, which TotalBytes does not count: the
	// spare segment file waiting for the next rotation, if one is ready,
	// and the zeros after the active segment's end. A spare still being
	// filled is not counted.
	SpareBytes int64
	// SpareFailures counts spares that could not be prepared (a full disk,
	// say) or were interrupted by Close; rotation then creates an empty
	// segment.
	SpareFailures uint64
	// SparesSkipped counts active segments for which no spare was
	// prepared because they were written faster than
	// Config.PrewriteRateMaxBytesPerSecond.
	SparesSkipped uint64
	// ActivePrewritten reports whether the active segment is a pre-written
	// one (its file extends past its records with zeros).
	ActivePrewritten bool
	// OpenFiles counts the Log's segment files open now (see FileCache);
	// a ready spare is never open, one being filled is not counted.
	OpenFiles int
}

// Stats returns current sizes and counters. Safe for concurrent use.
func (l *Log) Stats() Stats {
	l.mu.RLock()
	defer l.mu.RUnlock()
	st := Stats{
		Segments:        len(l.segments),
		RecordsAppended: l.recordsAppended,
		SegmentsCreated: l.segmentsCreated,
		SegmentsDeleted: l.segmentsDeleted,
		Pins:            len(l.pins),
		SpareBytes:      l.spare.bytes,
		SpareFailures:   l.spareFailures,
		SparesSkipped:   l.sparesSkipped,
	}
	if l.active != nil {
		st.ActiveSegment = l.active.num
		st.UnflushedBytes = int64(len(l.active.buf))
		if l.active.prewritten {
			st.SpareBytes += max(l.cfg.SegmentBytesMax-l.active.sizeBytes, 0)
			st.ActivePrewritten = true
		}
	}
	for _, seg := range l.segments {
		if seg.pendingDelete {
			st.SegmentsPendingDelete++
		}
		if seg.h.isOpen() {
			st.OpenFiles++
		}
		st.TotalBytes += seg.sizeBytes
		st.RecordBytes += seg.recordBytes
		st.DeadBytes += seg.deadBytes
		st.Records += seg.records
	}
	st.LiveBytes = st.RecordBytes - st.DeadBytes
	return st
}

// sortedSegmentsLocked returns the segments in ascending number order.
func (l *Log) sortedSegmentsLocked() []*segment {
	segs := make([]*segment, 0, len(l.segments))
	for _, seg := range l.segments {
		segs = append(segs, seg)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].num < segs[j].num })
	return segs
}
