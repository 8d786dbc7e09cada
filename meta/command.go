package meta

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// CommandType names a kind of command. The enum is append-only: a value, once
// written to a Raft log, keeps its meaning forever.
type CommandType uint8

// Command types. Never renumber; add new ones at the end.
const (
	// CmdRegisterNode adds a node or updates its addresses.
	CmdRegisterNode CommandType = iota + 1
	// CmdCreateQueue creates a queue and places its partitions. Placement
	// takes each partition in index order, sorts the registered nodes by
	// (partition replicas already placed on them across all queues, node
	// id) and takes the first Replicas of them; among those, the node with
	// the fewest preferred-leader roles (ties to the earlier in that order)
	// comes first, as the preferred leader, and the rest follow in that
	// order. The counts are updated after each partition, so replicas and
	// leaderships spread evenly within and across queues.
	CmdCreateQueue
	// CmdUpdateQueue replaces a queue's partition configuration.
	CmdUpdateQueue
	// CmdDeleteQueue removes a queue.
	CmdDeleteQueue
	// CmdRemoveNode unregisters a node for good and re-places its
	// partition replicas (see RemoveNodeCmd).
	CmdRemoveNode
	// CmdReplicaCaughtUp records that a joining replica caught up and
	// votes (see ReplicaCmd); proposed by the partition's leader.
	CmdReplicaCaughtUp
	// CmdReplicaLeft records that a leaving replica left its partition's
	// raft group (see ReplicaCmd); proposed by the partition's leader.
	CmdReplicaLeft
	// CmdMoveReplica starts moving one partition replica to another node
	// (see MoveReplicaCmd).
	CmdMoveReplica
	// CmdSetDraining drains a node or takes it back into placement (see
	// SetDrainingCmd).
	CmdSetDraining
	// CmdPreferLeader makes a caught-up replica its partition's preferred
	// leader (see PreferLeaderCmd).
	CmdPreferLeader
	cmdTypeEnd // one past the last valid type
)

var commandNames = [...]string{
	CmdRegisterNode: "register-node", CmdCreateQueue: "create-queue",
	CmdUpdateQueue: "update-queue", CmdDeleteQueue: "delete-queue",
	CmdRemoveNode: "remove-node", CmdReplicaCaughtUp: "replica-caught-up",
	CmdReplicaLeft: "replica-left", CmdMoveReplica: "move-replica",
	CmdSetDraining: "set-draining", CmdPreferLeader: "prefer-leader",
}

// String returns the command's name, or "command(N)" for an unknown value.
func (t CommandType) String() string {
	if t > 0 && t < cmdTypeEnd {
		return commandNames[t]
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// Command is one entry of the meta log. At is the proposing leader's clock
// in Unix nanoseconds; exactly the payload field matching Type is set.
type Command struct {
	Type CommandType
	At   int64

	RegisterNode *RegisterNodeCmd
	CreateQueue  *CreateQueueCmd
	UpdateQueue  *UpdateQueueCmd
	DeleteQueue  *DeleteQueueCmd
	RemoveNode   *RemoveNodeCmd
	// ReplicaCaughtUp, ReplicaLeft and PreferLeader share their payload
	// type.
	ReplicaCaughtUp *ReplicaCmd
	ReplicaLeft     *ReplicaCmd
	MoveReplica     *MoveReplicaCmd
	SetDraining     *SetDrainingCmd
	PreferLeader    *ReplicaCmd
}

// RegisterNodeCmd adds Node to the catalog, or replaces the addresses of the
// node with its id. Registering the same addresses again changes nothing.
type RegisterNodeCmd struct {
	Node Node `msgpack:"node"`
}

// CreateQueueCmd creates queue Name with Config. MaxQueues and
// MaxPartitions are the proposer's limits on the whole catalog: the create
// fails with ErrLimitExceeded when the catalog already holds MaxQueues
// queues, or when its partitions plus Config.Partitions would exceed
// MaxPartitions. 0 leaves only the fixed QueuesMax (entries written before
// these limits existed).
type CreateQueueCmd struct {
	Name          string      `msgpack:"name"`
	Config        QueueConfig `msgpack:"config"`
	MaxQueues     int         `msgpack:"max_queues,omitempty"`
	MaxPartitions int         `msgpack:"max_partitions,omitempty"`
}

// UpdateQueueCmd replaces the partition configuration (Config.Queue) of
// queue Name. Config.Partitions and Config.Replicas must be 0 ("unchanged")
// or equal to the queue's.
type UpdateQueueCmd struct {
	Name   string      `msgpack:"name"`
	Config QueueConfig `msgpack:"config"`
}

// DeleteQueueCmd removes queue Name.
type DeleteQueueCmd struct {
	Name string `msgpack:"name"`
}

// commandHeader is what precedes the payload in an encoded command.
type commandHeader struct {
	Type CommandType `msgpack:"t"`
	At   int64       `msgpack:"at"`
}

// EncodeCommand turns a command into log bytes: a header and the payload
// matching its type.
func EncodeCommand(c Command) ([]byte, error) {
	payload, err := c.payload()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(&commandHeader{Type: c.Type, At: c.At}); err != nil {
		return nil, fmt.Errorf("encode %s header: %w", c.Type, err)
	}
	if err := enc.Encode(payload); err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", c.Type, err)
	}
	return buf.Bytes(), nil
}

// payload returns the payload matching c.Type, or an error wrapping
// ErrInvalidArgument for an unknown type or a missing payload.
func (c Command) payload() (any, error) {
	var p any
	var ok bool
	switch c.Type {
	case CmdRegisterNode:
		p, ok = c.RegisterNode, c.RegisterNode != nil
	case CmdCreateQueue:
		p, ok = c.CreateQueue, c.CreateQueue != nil
	case CmdUpdateQueue:
		p, ok = c.UpdateQueue, c.UpdateQueue != nil
	case CmdDeleteQueue:
		p, ok = c.DeleteQueue, c.DeleteQueue != nil
	case CmdRemoveNode:
		p, ok = c.RemoveNode, c.RemoveNode != nil
	case CmdReplicaCaughtUp:
		p, ok = c.ReplicaCaughtUp, c.ReplicaCaughtUp != nil
	case CmdReplicaLeft:
		p, ok = c.ReplicaLeft, c.ReplicaLeft != nil
	case CmdMoveReplica:
		p, ok = c.MoveReplica, c.MoveReplica != nil
	case CmdSetDraining:
		p, ok = c.SetDraining, c.SetDraining != nil
	case CmdPreferLeader:
		p, ok = c.PreferLeader, c.PreferLeader != nil
	default:
		return nil, fmt.Errorf("%w: unknown command type %d", ErrInvalidArgument, c.Type)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s command without its payload", ErrInvalidArgument, c.Type)
	}
	return p, nil
}

// DecodeCommand is the inverse of EncodeCommand. It fails on unknown types,
// malformed bytes and trailing garbage.
func DecodeCommand(data []byte) (Command, error) {
	r := bytes.NewReader(data)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(r)
	var h commandHeader
	if err := dec.Decode(&h); err != nil {
		return Command{}, fmt.Errorf("decode command header: %w", err)
	}
	c := Command{Type: h.Type, At: h.At}
	var target any
	switch h.Type {
	case CmdRegisterNode:
		c.RegisterNode = new(RegisterNodeCmd)
		target = c.RegisterNode
	case CmdCreateQueue:
		c.CreateQueue = new(CreateQueueCmd)
		target = c.CreateQueue
	case CmdUpdateQueue:
		c.UpdateQueue = new(UpdateQueueCmd)
		target = c.UpdateQueue
	case CmdDeleteQueue:
		c.DeleteQueue = new(DeleteQueueCmd)
		target = c.DeleteQueue
	case CmdRemoveNode:
		c.RemoveNode = new(RemoveNodeCmd)
		target = c.RemoveNode
	case CmdReplicaCaughtUp:
		c.ReplicaCaughtUp = new(ReplicaCmd)
		target = c.ReplicaCaughtUp
	case CmdReplicaLeft:
		c.ReplicaLeft = new(ReplicaCmd)
		target = c.ReplicaLeft
	case CmdMoveReplica:
		c.MoveReplica = new(MoveReplicaCmd)
		target = c.MoveReplica
	case CmdSetDraining:
		c.SetDraining = new(SetDrainingCmd)
		target = c.SetDraining
	case CmdPreferLeader:
		c.PreferLeader = new(ReplicaCmd)
		target = c.PreferLeader
	default:
		return Command{}, fmt.Errorf("decode command: unknown type %d", h.Type)
	}
	if err := dec.Decode(target); err != nil {
		return Command{}, fmt.Errorf("decode %s payload: %w", h.Type, err)
	}
	if r.Len() != 0 {
		return Command{}, fmt.Errorf("decode %s: %d trailing bytes", h.Type, r.Len())
	}
	return c, nil
}
