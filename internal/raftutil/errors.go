package raftutil

import (
	"errors"
	"fmt"
)

// Errors shared by the node's raft groups (the partitions and the meta
// group).
var (
	// ErrNotLeader is returned when this replica does not lead its raft
	// group. The error is a *NotLeaderError naming the leader if known.
	// partition.ErrNotLeader is this same value.
	ErrNotLeader = errors.New("not the partition leader")
)

// NotLeaderError is the detail of ErrNotLeader: the leader's raft server id
// and address, empty when no leader is known. partition.NotLeaderError is
// an alias of it, so errors.As finds it under either name.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

// Error describes the error.
func (e *NotLeaderError) Error() string {
	switch {
	case e.LeaderID == "":
		return ErrNotLeader.Error() + " (no leader known)"
	case e.LeaderAddr == "":
		return fmt.Sprintf("%s (leader is %s)", ErrNotLeader, e.LeaderID)
	}
	return fmt.Sprintf("%s (leader is %s at %s)", ErrNotLeader, e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
