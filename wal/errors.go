package wal

import "errors"

// Errors returned by the package, alone or wrapped with detail naming the
// segment, offset or field concerned. Test for them with errors.Is.
var (
	// ErrCorrupt is returned when a record before the torn tail of the
	// active segment fails its checksum or framing, when a segment header
	// is wrong, or when Read finds a record whose checksum does not match.
	// The message names the segment and the byte offset. The package never
	// skips a corrupt record; an owner that can rebuild its data (from Raft)
	// may delete the segments with RemoveSegments and start again.
	ErrCorrupt = errors.New("wal: corrupt log")

	// ErrRecordTooLarge is returned by Append for a payload longer than
	// Config.RecordBytesMax. Nothing is written.
	ErrRecordTooLarge = errors.New("wal: record too large")

	// ErrClosed is returned by every operation on a Log after Close.
	ErrClosed = errors.New("wal: log closed")

	// ErrBadPosition is returned for a Pos that does not name a readable
	// record: an unknown or deleted segment, an offset inside the segment
	// header or beyond the segment's end, or a MarkDead that would mark more
	// bytes dead than the segment holds.
	ErrBadPosition = errors.New("wal: bad position")

	// ErrInvalidConfig is returned by Config.Validate and Open; the message
	// names the offending field and its allowed range.
	ErrInvalidConfig = errors.New("wal: invalid config")

	// ErrFailed is returned by Append, Sync and Compact after a write to a
	// segment file failed part-way: the in-memory view may no longer match
	// the file, so the Log refuses further writes. Close it and Open again;
	// recovery truncates whatever was half-written.
	ErrFailed = errors.New("wal: log failed after a write error")

	// ErrReopen is returned when a segment file that the Log had closed
	// (an idle file, or one its FileCache closed to make room) cannot be
	// opened again: by a read, which then fails, or by a flush or sync,
	// which then writes nothing. The error also wraps the cause (for
	// instance syscall.EMFILE or os.ErrNotExist). It does not fail the
	// Log: buffered records stay buffered and the call may be retried.
	ErrReopen = errors.New("wal: cannot reopen segment file")
)
