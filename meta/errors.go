package meta

import (
	"errors"

	"github.com/ferrymq/ferry/fsm"
)

// Errors returned by the meta state machine, alone or wrapped with detail. A
// command that fails with one of these changes nothing.
var (
	// ErrInvalidArgument is returned for a malformed command: an unknown
	// type, a missing payload, a node with a bad id or address, or a
	// catalog already at its node limit.
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrInvalidName is returned for a queue name that is empty, longer than
	// NameBytesMax, or not made of [A-Za-z0-9._-] starting with a letter or
	// digit.
	ErrInvalidName = errors.New("invalid queue name")

	// ErrInvalidConfig is returned when a QueueConfig fails validation; the
	// message names the field. It is the same value as fsm.ErrInvalidConfig,
	// so errors.Is matches either name for the per-partition settings too.
	ErrInvalidConfig = fsm.ErrInvalidConfig

	// ErrQueueExists is returned when creating a queue whose name is taken.
	ErrQueueExists = errors.New("queue already exists")

	// ErrQueueNotFound is returned when updating or deleting a queue that
	// does not exist.
	ErrQueueNotFound = errors.New("queue not found")

	// ErrNotEnoughNodes is returned when a queue asks for more replicas than
	// there are registered nodes (or when no node is registered at all).
	ErrNotEnoughNodes = errors.New("not enough nodes")

	// ErrLimitExceeded is returned when a create would take the catalog
	// past its queue count (QueuesMax, or the create's MaxQueues) or its
	// partition count (the create's MaxPartitions).
	ErrLimitExceeded = errors.New("cluster limit exceeded")

	// ErrNodeNotFound is returned when removing a node that is not
	// registered.
	ErrNodeNotFound = errors.New("node not found")

	// ErrNodeRemoved is returned when registering a node id that was
	// removed from the cluster.
	ErrNodeRemoved = errors.New("node was removed from the cluster")

	// ErrStalePlacement is returned by a replica command (caught up,
	// left, move) that no longer matches the partition's placement: the
	// queue was deleted, the replica is not joining or leaving any more,
	// the node lost its data again, or another move started first.
	ErrStalePlacement = errors.New("placement changed")

	// ErrSnapshotFormat is returned by Restore for a stream that is not a
	// meta snapshot of a known version, is cut short, carries trailing
	// bytes, or describes an inconsistent catalog.
	ErrSnapshotFormat = errors.New("bad meta snapshot")
)
