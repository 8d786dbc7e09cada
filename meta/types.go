package meta

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ferrymq/ferry/fsm"
)

// MetaGroupID is the Raft group id of the meta group itself. It cannot
// collide with a partition's group id, which always starts with 'q'.
const MetaGroupID = "meta"

// Node is a registered cluster member and the addresses it advertises.
type Node struct {
	// ID is the node's stable identity (its Raft server id).
	ID string `msgpack:"id"`
	// RaftAddr carries the Raft traffic of every group the node hosts.
	RaftAddr string `msgpack:"raft_addr"`
	// ClientAddr serves the client protocol.
	ClientAddr string `msgpack:"client_addr,omitempty"`
	// HTTPAddr serves the admin API and metrics.
	HTTPAddr string `msgpack:"http_addr,omitempty"`
	// RegisteredAt is when the node first registered, Unix nanoseconds. The
	// state machine sets it; a command's value is ignored.
	RegisteredAt int64 `msgpack:"registered_at"`
	// Incarnation identifies the node's data directory: a random number
	// the node draws when it starts with an empty one. A registration
	// with another incarnation than the recorded one means the node lost
	// its data (a wiped or replaced disk): every replica it holds rejoins
	// as a joining replica (see markRejoining). 0 is unknown (a node
	// that predates incarnations), never a change.
	Incarnation uint64 `msgpack:"incarnation,omitempty"`
	// Draining is set by CmdSetDraining: the node gets no new replicas
	// and the planner moves its replicas away. The state machine keeps
	// it across registrations; a registration's value is ignored.
	Draining bool `msgpack:"draining,omitempty"`
}

// Partition is the placement of one partition of a queue.
type Partition struct {
	// Index is the partition's number, 0..Partitions-1.
	Index int `msgpack:"index"`
	// Replicas are the ids of the nodes hosting the partition, all distinct
	// and registered. The first is the preferred leader.
	Replicas []string `msgpack:"replicas"`
	// Joining lists the replicas that are not yet caught-up voters: placed
	// after the partition was created (a move, a removed node's
	// replacement) or on a node that lost its data. They start without
	// bootstrapping and abstain from elections; the partition's leader
	// adds each as a non-voter, promotes it once it has caught up, and
	// records that with CmdReplicaCaughtUp. Always a subset of Replicas.
	Joining []string `msgpack:"joining,omitempty"`
	// Leaving lists the nodes a move takes the partition away from: they
	// are no longer placed (never in Replicas) but keep running their
	// replica until the partition's leader has removed them from its raft
	// group, once every Joining replica caught up, and recorded so with
	// CmdReplicaLeft.
	Leaving []string `msgpack:"leaving,omitempty"`
	// MoveEpoch counts the changes that added a replica to Joining or
	// Leaving. A move report names the epoch it was made under, and the
	// catalog records it only in that epoch: a report outliving its move
	// (a node that left, came back, and leaves again) never finishes a
	// later one.
	MoveEpoch uint64 `msgpack:"move_epoch,omitempty"`
}

// newMoveEpoch records that a change added to p's Joining or Leaving.
func (p *Partition) newMoveEpoch() { p.MoveEpoch++ }

// Moving reports whether a move of the partition is in progress.
func (p Partition) Moving() bool { return len(p.Joining) > 0 || len(p.Leaving) > 0 }

// Queue is a queue of the catalog.
type Queue struct {
	// Name is the queue's user-facing name.
	Name string `msgpack:"name"`
	// ID is assigned at creation from an increasing counter and never
	// reused, so a queue deleted and created again gets fresh Raft groups.
	ID uint64 `msgpack:"id"`
	// Config is the queue's configuration; Replicas is always resolved
	// (never 0).
	Config QueueConfig `msgpack:"config"`
	// Partitions holds one entry per partition, in index order.
	Partitions []Partition `msgpack:"partitions"`
	// CreatedAt is when the queue was created, Unix nanoseconds of the
	// state machine's clock.
	CreatedAt int64 `msgpack:"created_at"`
	// UpdatedAt is when the queue was last created or updated.
	UpdatedAt int64 `msgpack:"updated_at"`
	// Version is 1 at creation and bumped by every update.
	Version uint64 `msgpack:"version"`
}

// GroupID returns the Raft group id of the queue's partition index.
func (q Queue) GroupID(index int) string { return GroupID(q.ID, index) }

// clone returns a deep copy of q.
func (q Queue) clone() Queue {
	q.Partitions = slices.Clone(q.Partitions)
	for i := range q.Partitions {
		q.Partitions[i].Replicas = slices.Clone(q.Partitions[i].Replicas)
		q.Partitions[i].Joining = slices.Clone(q.Partitions[i].Joining)
		q.Partitions[i].Leaving = slices.Clone(q.Partitions[i].Leaving)
	}
	return q
}

// GroupID returns the Raft group id of partition index of the queue with id
// queueID: "q<queueID>-<index>" in decimal, e.g. "q7-0". It is printable
// ASCII without spaces, at most 24 bytes, and unique forever because queue
// ids are never reused.
func GroupID(queueID uint64, index int) string {
	b := make([]byte, 0, 24)
	b = append(b, 'q')
	b = strconv.AppendUint(b, queueID, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(index), 10)
	return string(b)
}

// ParseGroupID is the inverse of GroupID. It reports false for any string
// GroupID does not produce, MetaGroupID included.
func ParseGroupID(s string) (queueID uint64, index int, ok bool) {
	rest, found := strings.CutPrefix(s, "q")
	if !found {
		return 0, 0, false
	}
	qs, is, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	id, err := strconv.ParseUint(qs, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	i, err := strconv.Atoi(is)
	if err != nil || i < 0 || i >= PartitionsMax || GroupID(id, i) != s {
		return 0, 0, false
	}
	return id, i, true
}

// Assignment is one partition replica a node must host.
type Assignment struct {
	// Queue is the queue's name.
	Queue string
	// QueueID is the queue's id.
	QueueID uint64
	// Index is the partition number.
	Index int
	// GroupID is the partition's Raft group id.
	GroupID string
	// Replicas are the partition's nodes, preferred leader first.
	Replicas []string
	// Join says this node's replica is joining (see Partition.Joining):
	// it must start without bootstrapping, abstain from elections, and
	// wait for the leader to add it.
	Join bool
	// Leave says this node's replica is leaving (see Partition.Leaving):
	// it keeps running until the leader removed it from the group.
	Leave bool
	// Joining and Leaving are the partition's (see Partition); its
	// leader drives the raft group from them.
	Joining, Leaving []string
	// MoveEpoch is the partition's (see Partition.MoveEpoch): the leader's
	// move reports carry it.
	MoveEpoch uint64
	// Config is the partition configuration in force.
	Config fsm.QueueConfig
	// Version is the queue's version, bumped by every config update.
	Version uint64
}
