package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// zeroCheckBytes is the chunk size used when checking a file for all zeros.
const zeroCheckBytes = 64 << 10

// RecoverySummary reports what Open found on disk.
type RecoverySummary struct {
	// Segments is the number of segment files after recovery, including
	// one created for an empty directory.
	Segments int
	// Records is the number of intact records recovered.
	Records int
	// Bytes is the total size of the segment files after recovery.
	Bytes int64
	// Truncated is set when a torn tail was cut off the active segment or
	// its header was rewritten; the fields below say where.
	Truncated bool
	// TruncatedSegment is the number of the segment that was cut.
	TruncatedSegment uint32
	// TruncatedAtOffset is the new size of that segment file before any
	// header rewrite (0 when the header itself was torn).
	TruncatedAtOffset int64
	// TruncatedBytes is how many bytes were cut off.
	TruncatedBytes int64
	// TruncatedReason describes the damage that was cut off.
	TruncatedReason string
}

// String summarises the recovery for logs.
func (s RecoverySummary) String() string {
	base := fmt.Sprintf("%d segments, %d records, %d bytes", s.Segments, s.Records, s.Bytes)
	if !s.Truncated {
		return base + ", no torn tail"
	}
	return fmt.Sprintf("%s, torn tail cut from segment %d at offset %d (%d bytes: %s)",
		base, s.TruncatedSegment, s.TruncatedAtOffset, s.TruncatedBytes, s.TruncatedReason)
}

// recover opens every segment file in the directory, or creates segment 1
// in an empty one, and fills l.segments and l.active.
func (l *Log) recover() (RecoverySummary, error) {
	var sum RecoverySummary
	nums, err := listSegments(l.cfg.Dir)
	if err != nil {
		return sum, err
	}
	if len(nums) == 0 {
		seg, err := l.createSegment(1)
		if err != nil {
			return sum, err
		}
		l.addSegment(seg)
		l.dirDirty = true
		sum.Segments, sum.Bytes = 1, seg.sizeBytes
		return sum, nil
	}
	for i, num := range nums {
		var seg *segment
		if i < len(nums)-1 {
			seg, err = l.recoverSealed(num)
		} else {
			seg, err = l.recoverActive(num, &sum)
		}
		if err != nil {
			return sum, err
		}
		l.addSegment(seg)
		sum.Records += seg.records
		sum.Bytes += seg.sizeBytes
	}
	sum.Segments = len(nums)
	return sum, nil
}

// addSegment registers seg as the newest segment, making it active.
func (l *Log) addSegment(seg *segment) {
	if l.active != nil {
		l.active.sealed = true
	}
	l.segments[seg.num] = seg
	l.activate(seg)
}

// activate makes seg the active segment and starts measuring its append
// rate.
func (l *Log) activate(seg *segment) {
	seg.activeSince, seg.activeBaseBytes = time.Now(), seg.sizeBytes
	l.active = seg
}

// openSegmentFile opens segment num and returns it with its size and
// its file, acquired for the caller to release; write marks the file as
// needing an fsync.
func (l *Log) openSegmentFile(num uint32, write bool) (*segment, *os.File, error) {
	seg := l.newSegment(num, false)
	f, _, err := seg.h.acquire(write)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err == nil && info.Size() > SegmentBytesLimit {
		err = corruptf(num, 0, "file is %d bytes, beyond the %d-byte segment limit", info.Size(), SegmentBytesLimit)
	} else if err != nil {
		err = fmt.Errorf("wal: stat segment %d: %w", num, err)
	}
	if err != nil {
		seg.h.release()
		_ = seg.close()
		return nil, nil, err
	}
	seg.sizeBytes, seg.flushedBytes = info.Size(), info.Size()
	return seg, f, nil
}

// readHeader returns what is wrong with the header of seg, whose file is
// f, or "".
func readHeader(seg *segment, f *os.File) (string, error) {
	if seg.sizeBytes < segmentHeaderBytes {
		return checkSegmentHeader(nil, seg.num), nil
	}
	var b [segmentHeaderBytes]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return "", fmt.Errorf("wal: read header of segment %d: %w", seg.num, err)
	}
	return checkSegmentHeader(b[:], seg.num), nil
}

// scanRecords walks the records of seg, whose file is f, counting them.
// It returns the first frame error, if any, with the records before it
// counted.
func scanRecords(seg *segment, f *os.File) (*frameError, error) {
	sc := newRecordScanner(f, segmentHeaderBytes, seg.sizeBytes, false)
	for {
		_, err := sc.next()
		if err == io.EOF {
			return nil, nil
		}
		var fe *frameError
		if errors.As(err, &fe) {
			return fe, nil
		}
		if err != nil {
			return nil, fmt.Errorf("wal: scan segment %d: %w", seg.num, err)
		}
		seg.records++
	}
}

// recoverSealed opens and verifies a sealed segment: every byte must parse.
func (l *Log) recoverSealed(num uint32) (*segment, error) {
	seg, f, err := l.openSegmentFile(num, false)
	if err != nil {
		return nil, err
	}
	err = verifySealed(seg, f)
	seg.h.release()
	if err != nil {
		_ = seg.close()
		return nil, err
	}
	seg.sealed = true
	seg.recordBytes = seg.sizeBytes - segmentHeaderBytes
	return seg, nil
}

// verifySealed checks the header and every record of seg, whose file is
// f.
func verifySealed(seg *segment, f *os.File) error {
	reason, err := readHeader(seg, f)
	if err != nil {
		return err
	}
	if reason != "" {
		return corruptf(seg.num, 0, "%s", reason)
	}
	fe, err := scanRecords(seg, f)
	if err != nil {
		return err
	}
	if fe != nil {
		return corruptf(seg.num, fe.offset, "%s (sealed segment)", fe.reason)
	}
	return nil
}

// recoverActive opens the last segment, repairs a torn header or tail,
// and reports any truncation in sum. Its file counts as written, so that
// the first sync fsyncs whatever an earlier process left unsynced.
func (l *Log) recoverActive(num uint32, sum *RecoverySummary) (*segment, error) {
	seg, f, err := l.openSegmentFile(num, true)
	if err != nil {
		return nil, err
	}
	err = l.repairActive(seg, f, sum)
	seg.h.release()
	if err != nil {
		_ = seg.close()
		return nil, err
	}
	seg.recordBytes = seg.sizeBytes - segmentHeaderBytes
	return seg, nil
}

// repairActive does the work of recoverActive on seg, whose file is f.
func (l *Log) repairActive(seg *segment, f *os.File, sum *RecoverySummary) error {
	reason, err := readHeader(seg, f)
	if err != nil {
		return err
	}
	if reason != "" {
		zero, err := allZero(f, seg.sizeBytes)
		if err != nil {
			return err
		}
		if seg.sizeBytes >= segmentHeaderBytes && !zero {
			return corruptf(seg.num, 0, "%s", reason)
		}
		return l.rewriteHeader(seg, f, sum, reason)
	}
	fe, err := scanRecords(seg, f)
	if err != nil || fe == nil {
		return err
	}
	end, err := dataEnd(f, fe.offset, seg.sizeBytes)
	if err != nil {
		return fmt.Errorf("wal: segment %d: %w", seg.num, err)
	}
	if end == fe.offset {
		return l.truncateTail(seg, f, fe.offset, zeroTailReason, sum)
	}
	// A record after the damage means the damage is not a torn tail. Only
	// the bytes before the trailing zeros are read.
	rest := make([]byte, max(end-fe.offset-1, 0))
	if _, err := f.ReadAt(rest, fe.offset+1); err != nil {
		return fmt.Errorf("wal: read tail of segment %d: %w", seg.num, err)
	}
	p, exhausted := findValidRecordZeroTail(rest, seg.sizeBytes-fe.offset-1-int64(len(rest)), l.cfg.RecordBytesMax, tailSearchBudgetBytes)
	if p >= 0 {
		return corruptf(seg.num, fe.offset, "%s, yet a valid record follows at offset %d", fe.reason, fe.offset+1+int64(p))
	}
	if exhausted {
		return corruptf(seg.num, fe.offset, "%s, and the %d bytes after it could not be ruled out as valid records",
			fe.reason, seg.sizeBytes-fe.offset-1)
	}
	return l.truncateTail(seg, f, fe.offset, fe.reason, sum)
}

// rewriteHeader replaces a segment torn during creation with an empty one.
func (l *Log) rewriteHeader(seg *segment, f *os.File, sum *RecoverySummary, reason string) error {
	cut := seg.sizeBytes
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("wal: truncate segment %d: %w", seg.num, err)
	}
	hdr := encodeSegmentHeader(seg.num)
	if _, err := f.WriteAt(hdr[:], 0); err != nil {
		return fmt.Errorf("wal: rewrite header of segment %d: %w", seg.num, err)
	}
	seg.sizeBytes, seg.flushedBytes = segmentHeaderBytes, segmentHeaderBytes
	l.noteTruncation(sum, seg.num, 0, cut, "torn segment header: "+reason)
	return nil
}

// truncateTail cuts seg, whose file is f, at offset.
func (l *Log) truncateTail(seg *segment, f *os.File, offset int64, reason string, sum *RecoverySummary) error {
	if err := f.Truncate(offset); err != nil {
		return fmt.Errorf("wal: truncate segment %d at offset %d: %w", seg.num, offset, err)
	}
	cut := seg.sizeBytes - offset
	seg.sizeBytes, seg.flushedBytes = offset, offset
	l.noteTruncation(sum, seg.num, offset, cut, reason)
	return nil
}

// noteTruncation records a truncation in sum and logs it.
func (l *Log) noteTruncation(sum *RecoverySummary, num uint32, offset, cutBytes int64, reason string) {
	sum.Truncated = true
	sum.TruncatedSegment = num
	sum.TruncatedAtOffset = offset
	sum.TruncatedBytes = cutBytes
	sum.TruncatedReason = reason
	l.logger.Warn("wal: truncated torn tail of active segment",
		"dir", l.cfg.Dir, "segment", num, "offset", offset, "bytes", cutBytes, "reason", reason)
}

// allZero reports whether the first size bytes of f are all zero.
func allZero(f *os.File, size int64) (bool, error) {
	buf := make([]byte, min(size, zeroCheckBytes))
	for off := int64(0); off < size; off += int64(len(buf)) {
		chunk := buf[:min(int64(len(buf)), size-off)]
		if _, err := f.ReadAt(chunk, off); err != nil {
			return false, fmt.Errorf("wal: read segment file: %w", err)
		}
		for _, b := range chunk {
			if b != 0 {
				return false, nil
			}
		}
	}
	return true, nil
}
