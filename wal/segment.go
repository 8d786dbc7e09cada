package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/internal/diskfault"
)

// File-system constants.
const (
	segmentFileSuffix = ".seg"
	// segmentNameDigits is wide enough for every uint32.
	segmentNameDigits = 10
	segmentFileMode   = 0o644
	dirMode           = 0o755
	// writeBufferBytes is the active segment's write buffer. Records at
	// least this large bypass it.
	writeBufferBytes = 256 << 10
	// scanBufferBytes is the read buffer used when scanning a segment.
	scanBufferBytes = 256 << 10
)

// segmentFileName returns the file name of segment num.
func segmentFileName(num uint32) string {
	return fmt.Sprintf("%0*d%s", segmentNameDigits, num, segmentFileSuffix)
}

// parseSegmentFileName returns the number of a segment file name, or false
// if name is not one.
func parseSegmentFileName(name string) (uint32, bool) {
	digits, ok := strings.CutSuffix(name, segmentFileSuffix)
	if !ok || len(digits) != segmentNameDigits {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// listSegments returns the numbers of the segment files in dir, ascending.
// Other files are ignored; a segment file numbered 0 is corruption.
func listSegments(dir string) ([]uint32, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list segments in %s: %w", dir, err)
	}
	var nums []uint32
	for _, e := range entries {
		n, ok := parseSegmentFileName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: segment file %s: segment numbers start at 1", ErrCorrupt, e.Name())
		}
		nums = append(nums, n)
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	return nums, nil
}

// RemoveSegments deletes every segment file in dir, leaving other files and
// the directory itself alone. A missing dir is not an error. It must not be
// called while a Log is open on dir; (*Log).Remove closes the Log first.
func RemoveSegments(dir string) error {
	nums, err := listSegments(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nums {
		if err := os.Remove(filepath.Join(dir, segmentFileName(n))); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("wal: remove segment %d: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// segment is one segment file and its accounting. Fields are guarded by
// Log.mu; h opens and closes the file through the Log's FileCache and is
// safe for concurrent use.
type segment struct {
	num  uint32
	path string
	h    *fileHandle

	// sizeBytes is the logical size: bytes in the file plus buffered ones.
	sizeBytes int64
	// flushedBytes is how much of sizeBytes is in the file; buf holds the
	// rest. Only the active segment buffers.
	flushedBytes int64
	buf          []byte

	records     int
	recordBytes int64 // sizeBytes minus the header
	deadBytes   int64

	// prewritten is set while the file extends past sizeBytes with zeros
	// written before the records (see prealloc.go).
	prewritten bool
	sealed     bool
	// activeSince and activeBaseBytes are when the segment last became
	// the active one and its size then: the append rate that decides
	// whether a spare is worth pre-writing (prealloc.go).
	activeSince     time.Time
	activeBaseBytes int64
	pendingDelete   bool // entirely dead, waiting for pins to be released
	deleted         bool
}

// newSegment returns segment num of the log, its file not yet open;
// create makes the first open create the file.
func (l *Log) newSegment(num uint32, create bool) *segment {
	path := filepath.Join(l.cfg.Dir, segmentFileName(num))
	return &segment{num: num, path: path, h: l.files.handle(num, path, create)}
}

// createSegment creates segment num and writes its header.
func (l *Log) createSegment(num uint32) (*segment, error) {
	seg := l.newSegment(num, true)
	f, _, err := seg.h.acquire(true)
	if err != nil {
		return nil, err
	}
	hdr := encodeSegmentHeader(num)
	_, err = f.WriteAt(hdr[:], 0)
	seg.h.release()
	if err != nil {
		_ = seg.close()
		_ = os.Remove(seg.path)
		return nil, fmt.Errorf("wal: write header of segment %d: %w", num, err)
	}
	seg.sizeBytes, seg.flushedBytes = segmentHeaderBytes, segmentHeaderBytes
	return seg, nil
}

// liveBytes is the record bytes not marked dead.
func (s *segment) liveBytes() int64 {
	return s.recordBytes - s.deadBytes
}

// entirelyDead reports whether every record byte is marked dead.
func (s *segment) entirelyDead() bool {
	return s.recordBytes > 0 && s.deadBytes >= s.recordBytes
}

// readAt fills p from offset off, taking flushed bytes from the file and
// the rest from the write buffer. The caller checks off+len(p) <= sizeBytes.
func (s *segment) readAt(p []byte, off int64) error {
	if off < s.flushedBytes {
		n := int64(len(p))
		if off+n > s.flushedBytes {
			n = s.flushedBytes - off
		}
		f, _, err := s.h.acquire(false)
		if err != nil {
			return err
		}
		_, err = f.ReadAt(p[:n], off)
		s.h.release()
		if err != nil {
			return fmt.Errorf("wal: read segment %d offset %d: %w", s.num, off, err)
		}
		p, off = p[n:], off+n
	}
	if len(p) > 0 {
		copy(p, s.buf[off-s.flushedBytes:])
	}
	return nil
}

// appendRecord adds one encoded record (header then payload) at the end of
// the segment, buffering it unless it is large.
func (s *segment) appendRecord(hdr, payload []byte) error {
	n := len(hdr) + len(payload)
	if len(s.buf)+n > writeBufferBytes {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if n < writeBufferBytes {
		if s.buf == nil {
			s.buf = make([]byte, 0, writeBufferBytes)
		}
		s.buf = append(append(s.buf, hdr...), payload...)
		s.sizeBytes += int64(n)
		return nil
	}
	f, _, err := s.h.acquire(true)
	if err != nil {
		return err
	}
	defer s.h.release()
	for _, part := range [][]byte{hdr, payload} {
		if _, err := s.writeFile(f, part, s.flushedBytes); err != nil {
			return fmt.Errorf("wal: write segment %d offset %d: %w", s.num, s.flushedBytes, err)
		}
		s.flushedBytes += int64(len(part))
	}
	s.sizeBytes = s.flushedBytes
	return nil
}

// flush writes the buffered bytes to the file.
func (s *segment) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	f, _, err := s.h.acquire(true)
	if err != nil {
		return err
	}
	n, err := s.writeFile(f, s.buf, s.flushedBytes)
	s.h.release()
	s.flushedBytes += int64(n)
	s.buf = s.buf[:copy(s.buf, s.buf[n:])]
	if err != nil {
		return fmt.Errorf("wal: write segment %d offset %d: %w", s.num, s.flushedBytes, err)
	}
	return nil
}

// writeFile writes p at offset off of f, the segment's file. In a chaosdisk
// build an armed fault may fail it, after writing part of p or nothing;
// either way the caller treats it as a failed write, and the owner's
// RollbackTo truncates whatever reached the file.
func (s *segment) writeFile(f *os.File, p []byte, off int64) (int, error) {
	allowed, fault := diskfault.WriteFault(s.path, len(p))
	if fault == nil {
		return f.WriteAt(p, off)
	}
	n, err := f.WriteAt(p[:allowed], off)
	if err == nil {
		err = fault
	}
	return n, err
}

// close closes the segment's file for good (the segment is deleted or
// its Log closed).
func (s *segment) close() error {
	return s.h.drop()
}

// syncFile fsyncs the segment's file (fdatasync when data is set), unless
// nothing was written to it since its last fsync. It reports the failure
// of an fsync the FileCache made before closing the file.
func (s *segment) syncFile(data bool) error {
	need, err := s.h.syncNeeded()
	if err != nil || !need {
		return err
	}
	f, gen, err := s.h.acquire(false)
	if err != nil {
		return err
	}
	defer s.h.release()
	if data {
		err = fdatasyncFile(s.num, f)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("wal: sync segment %d: %w", s.num, err)
	}
	if err != nil {
		return err
	}
	s.h.synced(gen)
	return nil
}

// syncDir fsyncs a directory so that created and removed files persist.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("wal: open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: sync directory %s: %w", dir, err)
	}
	return nil
}

// lockedReaderAt reads one segment through its Log, taking the read lock
// per call, so that a long scan never blocks the owner for long.
type lockedReaderAt struct {
	log *Log
	seg *segment
}

// ReadAt implements io.ReaderAt over the segment's logical contents.
func (r lockedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r.log.mu.RLock()
	defer r.log.mu.RUnlock()
	if r.log.closed {
		return 0, ErrClosed
	}
	if r.seg.deleted {
		return 0, fmt.Errorf("%w: segment %d was deleted", ErrBadPosition, r.seg.num)
	}
	if off >= r.seg.sizeBytes {
		return 0, io.EOF
	}
	n := len(p)
	if rest := r.seg.sizeBytes - off; int64(n) > rest {
		n = int(rest)
	}
	if err := r.seg.readAt(p[:n], off); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
