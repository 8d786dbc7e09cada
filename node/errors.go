package node

import "errors"

// Errors returned by a Node.
var (
	// ErrInvalidConfig is returned by Config.Validate; the message names the
	// field.
	ErrInvalidConfig = errors.New("invalid node config")

	// ErrNoMetaLeader is returned when the meta group has no leader (no
	// quorum yet, or an election in progress).
	ErrNoMetaLeader = errors.New("no meta leader")

	// ErrClosed is returned once the node is shutting down.
	ErrClosed = errors.New("node closed")
)
