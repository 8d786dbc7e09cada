package raftlog

import (
	"errors"
	"fmt"
	"syscall"
)

// Errors returned by the package, alone or wrapped with detail. Test for
// them with errors.Is. GetLog answers raft.ErrLogNotFound for an index the
// group does not hold, as raft expects.
var (
	// ErrCorrupt is returned by Open (and by reads) when a record before
	// the torn tail of the last segment does not decode, when records
	// contradict each other (a gap inside a group's log, a group id that
	// the registry never handed out), or when the registry file is
	// damaged. Nothing is skipped.
	ErrCorrupt = errors.New("raftlog: corrupt log")

	// ErrDiskFull is returned by a write that failed because the file
	// system is out of space or quota. The partial write was cut back,
	// the store stays usable, and the same write succeeds once space
	// returns.
	ErrDiskFull = errors.New("raftlog: disk full")

	// ErrIO is returned by a write that failed with an I/O error other
	// than a full disk. Like ErrDiskFull the partial write was cut back.
	ErrIO = errors.New("raftlog: i/o error")

	// ErrFailed is returned by every write after a failed write could not
	// be cut back (the cut itself failed). Close and Open again.
	ErrFailed = errors.New("raftlog: store failed")

	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("raftlog: store closed")

	// ErrInvalidConfig is returned by Config.Validate and Open; the
	// message names the field.
	ErrInvalidConfig = errors.New("raftlog: invalid config")

	// ErrBadGroupName is returned for a group name that is empty, longer
	// than GroupNameBytesMax or not printable ASCII.
	ErrBadGroupName = errors.New("raftlog: bad group name")

	// ErrTooManyGroups is returned by Group when Config.GroupsMax groups
	// exist.
	ErrTooManyGroups = errors.New("raftlog: too many groups")

	// ErrGroupDropped is returned by a GroupLog whose group was dropped.
	ErrGroupDropped = errors.New("raftlog: group dropped")

	// ErrEntryTooLarge is returned by StoreLogs for an entry whose Data
	// and Extensions together exceed Config.EntryBytesMax. Nothing of the
	// call is stored.
	ErrEntryTooLarge = errors.New("raftlog: entry too large")

	// ErrNotContiguous is returned by StoreLogs for entries that would
	// leave a gap in the group's log or land below its first index.
	// Nothing of the call is stored.
	ErrNotContiguous = errors.New("raftlog: entries not contiguous")

	// ErrBadRange is returned by DeleteRange for a range strictly inside
	// the log (neither a prefix nor a suffix). Nothing is deleted.
	ErrBadRange = errors.New("raftlog: bad delete range")

	// ErrStableNotFound is returned by Get and GetUint64 for a stable key
	// never set. Its text is exactly "not found": raft tells a missing
	// term or vote from a failure by that text.
	ErrStableNotFound = errors.New("not found")

	// ErrStableTooLarge is returned by Set for a key or value over its
	// bound, or a new key beyond StableKeysMax. Nothing is stored.
	ErrStableTooLarge = errors.New("raftlog: stable key or value too large")

	// ErrBadPosition is returned by ReadData for a position that does not
	// hold an entry record or a range outside its Data.
	ErrBadPosition = errors.New("raftlog: bad position")
)

// classifyWriteError wraps a failed write or sync as ErrDiskFull or ErrIO.
func classifyWriteError(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return fmt.Errorf("%w: %w", ErrIO, err)
}
