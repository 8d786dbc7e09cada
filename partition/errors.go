package partition

import (
	"errors"

	"github.com/ferrymq/ferry/internal/raftutil"
)

// Errors returned by a Partition. FSM errors (fsm.ErrQueueFull, ...) reach
// callers inside results, not through these.
var (
	// ErrNotLeader is returned when this replica is not the partition's
	// leader. The error is a *NotLeaderError naming the leader if known.
	// It is raftutil.ErrNotLeader, which the meta group returns too.
	ErrNotLeader = raftutil.ErrNotLeader

	// ErrUnknownOutcome is returned when a command was handed to raft but
	// leadership was lost before its commit was known: it may or may not
	// have been applied. Callers must treat it as ambiguous.
	ErrUnknownOutcome = errors.New("outcome unknown: leadership lost while committing")

	// ErrTimeout is returned when a command could not be handed to raft in
	// time; it was not applied.
	ErrTimeout = errors.New("timed out enqueuing the command")

	// ErrClosed is returned after Close, or when raft is shutting down.
	ErrClosed = errors.New("partition closed")

	// ErrDiskFull is returned for a send refused because the replica's
	// disk is (nearly) full: nothing was stored. Receives and acks keep
	// working; sends succeed again once space returns. Retryable.
	ErrDiskFull = errors.New("disk full")

	// ErrIO is returned for a command the leader could not write to its
	// raft log (a disk write or fsync error, raftlog.ErrIO, or a full disk,
	// raftlog.ErrDiskFull, both still matched by errors.Is). The write was
	// cut back and never replicated, so nothing was applied; the replica
	// gives up leadership. Retryable, on whichever replica leads next. (If
	// the cut itself failed, raftlog.ErrFailed, the outcome is
	// ErrUnknownOutcome instead.)
	ErrIO = errors.New("leader could not write its raft log")

	// ErrClockUnverified is returned for a command refused because this
	// node's clock is known to be off the other nodes' (Config.ClockHealthy),
	// or is more than Config.MaxClockStep ahead of the partition's clock and
	// has not yet been checked against the other nodes'. Nothing was
	// applied; retryable (on another leader).
	ErrClockUnverified = errors.New("leader clock not verified against the other nodes")

	// ErrInvalidConfig is returned by Config.Validate; the message names the
	// field.
	ErrInvalidConfig = errors.New("invalid partition config")
)

// NotLeaderError is the detail of ErrNotLeader: the leader's raft server id
// and address, empty when no leader is known. It is the one type the
// node's raft groups share (raftutil.NotLeaderError), under the name
// partition's callers know.
type NotLeaderError = raftutil.NotLeaderError
