// Package diskfault injects disk errors into the write-ahead logs, for
// the chaos suite. In a normal build it does nothing and cannot be armed;
// in a build with the chaosdisk tag, ArmKind makes the next fsyncs or
// writes of log files whose path contains a given string fail with EIO,
// as a failing disk's would.
//
// Three kinds of fault exist. Sync fails fsyncs. Write fails the write
// call of an append (a segment flush or a large record's direct write)
// before it writes anything. ShortWrite writes the first half of the
// bytes, then fails: the file is left holding part of the record, which
// the log must cut back. One fault is armed at a time: arming replaces
// whatever was armed, and a count of 0 disarms.
//
// The hooks (SyncError, WriteFault) are called by package wal before each
// fsync of an append (including the fsync of a written segment file that
// a wal.FileCache closes) and each write of records to a segment, with
// the segment file's path.
// In a normal build they return constants and cost nothing measurable.
// The sync of a cut-back (wal's RollbackTo) is never failed, so that a
// failed write can always be undone.
//
// Which files may be targeted is the caller's choice. The raft log store
// (wal/raftlog) cuts a failed batch back and takes the next write; the
// chaos suite targets only it ("/raftlog/"). A partition's body records
// are written while raft applies a command, where a failed write is fatal
// by design, so arming a fault that matches them stops the replica.
package diskfault

import (
	"errors"
	"fmt"
)

// Errors returned by the package.
var (
	// ErrNotArmable is returned by Arm and ArmKind in a build without the
	// chaosdisk tag.
	ErrNotArmable = errors.New("diskfault: fault injection not built in")

	// ErrBadFault is returned for an unknown kind or a count outside
	// 0..CountMax.
	ErrBadFault = errors.New("diskfault: bad fault")
)

// CountMax bounds how many failing operations one Arm may ask for.
const CountMax = 1000

// SyncCountMax is the bound on fsync failures; it equals CountMax.
const SyncCountMax = CountMax

// Kind is what an armed fault makes fail.
type Kind uint8

// Fault kinds.
const (
	// Sync makes fsyncs fail with EIO.
	Sync Kind = iota + 1
	// Write makes writes fail with EIO before writing anything.
	Write
	// ShortWrite makes writes write half their bytes, then fail with EIO.
	ShortWrite
)

var kindNames = [...]string{Sync: "fsync", Write: "write", ShortWrite: "short-write"}

// String returns the kind's name, as ParseKind reads it.
func (k Kind) String() string {
	if k >= Sync && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind reads a kind name: "fsync", "write" or "short-write".
func ParseKind(s string) (Kind, error) {
	for k := Sync; int(k) < len(kindNames); k++ {
		if kindNames[k] == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown kind %q (fsync, write or short-write)", ErrBadFault, s)
}

// SyncError returns the injected error for an fsync of the file at path,
// or nil. The wal calls it before every fsync of an append (Sync, SyncData,
// sealing a segment, closing a written file for a wal.FileCache), with
// the segment file's path.
func SyncError(path string) error { return syncError(path) }

// WriteFault says what a write of n bytes to the file at path does: it
// may write the first allowed bytes, and must then fail with err. With no
// fault firing it returns (n, nil). The wal calls it before every segment
// write.
func WriteFault(path string, n int) (allowed int, err error) { return writeFault(path, n) }

// Arm makes the next count fsyncs of files whose path
// contains match fail: ArmKind(Sync, match, count).
func Arm(match string, count int) error { return ArmKind(Sync, match, count) }

// ArmKind makes the next count operations of kind on files whose path
// contains match fail, replacing any fault armed before (count 0
// disarms). Counts are bounded by CountMax. A normal build returns
// ErrNotArmable.
func ArmKind(kind Kind, match string, count int) error {
	if kind < Sync || int(kind) >= len(kindNames) {
		return fmt.Errorf("%w: unknown kind %d", ErrBadFault, kind)
	}
	if count < 0 || count > CountMax {
		return fmt.Errorf("%w: count %d outside 0..%d", ErrBadFault, count, CountMax)
	}
	return arm(kind, match, count)
}

// Remaining returns how many armed failures have not fired yet.
func Remaining() int { return remaining() }
