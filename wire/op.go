package wire

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Op names the operation a request asks for. The enum is append-only:
// numbers are written explicitly and never reused or renumbered. 0 is not an
// op.
type Op uint8

// Operations. Each has an XxxRequest and an XxxResponse body type.
const (
	// OpMetadata describes the cluster's nodes and queue placement.
	OpMetadata Op = 1
	// OpCreateQueue creates a queue.
	OpCreateQueue Op = 2
	// OpUpdateQueue changes some settings of a queue.
	OpUpdateQueue Op = 3
	// OpDeleteQueue deletes a queue and everything in it.
	OpDeleteQueue Op = 4
	// OpListQueues lists queues with their configuration.
	OpListQueues Op = 5
	// OpQueueStats reports per-partition gauges and counters.
	OpQueueStats Op = 6
	// OpSend enqueues a batch of messages into one partition.
	OpSend Op = 7
	// OpReceive leases messages of one partition, long-polling if asked.
	OpReceive Op = 8
	// OpAck deletes leased messages.
	OpAck Op = 9
	// OpExtend moves the deadlines of leases.
	OpExtend Op = 10
	// OpNack gives leased messages back for a retry.
	OpNack Op = 11
	// OpReject dead-letters leased messages at once.
	OpReject Op = 12
	// OpDeadList lists dead letters without their bodies.
	OpDeadList Op = 13
	// OpDeadPeek lists dead letters with headers and bodies.
	OpDeadPeek Op = 14
	// OpDeadRedrive moves dead letters back to ready.
	OpDeadRedrive Op = 15
	// OpDeadDelete deletes dead letters.
	OpDeadDelete Op = 16
	// OpPurge deletes every message of a partition that is not leased.
	OpPurge Op = 17
	// OpPeek reads ready messages of one partition without leasing them.
	OpPeek Op = 18
	// OpRemoveNode removes a node from the cluster for good and moves its
	// partition replicas to other nodes.
	OpRemoveNode Op = 19
	// OpListNodes lists every node's status (any node answers).
	OpListNodes Op = 20
	// OpDrainNode drains a node or takes it back (meta leader).
	OpDrainNode Op = 21
	// OpRebalance plans, and unless asked not to starts, the moves that
	// even out replica and leader counts (meta leader).
	OpRebalance Op = 22
	// OpSafeToStop says whether a node can be stopped now (any node).
	OpSafeToStop Op = 23
	// OpQueueSettings describes the queue settings: names, defaults,
	// ranges (any node).
	OpQueueSettings Op = 24

	opEnd Op = 25 // one past the last known op
)

var opNames = [...]string{
	OpMetadata: "metadata", OpCreateQueue: "create-queue",
	OpUpdateQueue: "update-queue", OpDeleteQueue: "delete-queue",
	OpListQueues: "list-queues", OpQueueStats: "queue-stats",
	OpSend: "send", OpReceive: "receive", OpAck: "ack", OpExtend: "extend",
	OpNack: "nack", OpReject: "reject", OpDeadList: "dead-list",
	OpDeadPeek: "dead-peek", OpDeadRedrive: "dead-redrive",
	OpDeadDelete: "dead-delete", OpPurge: "purge",
	OpPeek: "peek", OpRemoveNode: "remove-node", OpListNodes: "list-nodes",
	OpDrainNode: "drain-node", OpRebalance: "rebalance", OpSafeToStop: "safe-to-stop",
	OpQueueSettings: "queue-settings",
}

// String returns the op's name, or "op(N)" for a number this version does
// not know.
func (o Op) String() string {
	if o.Valid() {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Valid reports whether this version of the package defines the op.
func (o Op) Valid() bool { return o > 0 && o < opEnd }

// DecodeMsgpack reads an op, refusing numbers that do not fit in 8 bits
// instead of truncating them. Unknown but representable numbers decode; the
// server answers them with CodeMalformed.
func (o *Op) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeUint64()
	if err != nil {
		return err
	}
	if n > 0xff {
		return fmt.Errorf("wire: op %d out of range", n)
	}
	*o = Op(n)
	return nil
}

// NewRequestBody returns a pointer to a zero request body of the op's type
// (for example *SendRequest for OpSend), ready for DecodeBody; nil for an
// unknown op.
func NewRequestBody(o Op) any {
	switch o {
	case OpMetadata:
		return new(MetadataRequest)
	case OpCreateQueue:
		return new(CreateQueueRequest)
	case OpUpdateQueue:
		return new(UpdateQueueRequest)
	case OpDeleteQueue:
		return new(DeleteQueueRequest)
	case OpListQueues:
		return new(ListQueuesRequest)
	case OpQueueStats:
		return new(QueueStatsRequest)
	case OpSend:
		return new(SendRequest)
	case OpReceive:
		return new(ReceiveRequest)
	case OpAck:
		return new(AckRequest)
	case OpExtend:
		return new(ExtendRequest)
	case OpNack:
		return new(NackRequest)
	case OpReject:
		return new(RejectRequest)
	case OpDeadList:
		return new(DeadListRequest)
	case OpDeadPeek:
		return new(DeadPeekRequest)
	case OpDeadRedrive:
		return new(DeadRedriveRequest)
	case OpDeadDelete:
		return new(DeadDeleteRequest)
	case OpPurge:
		return new(PurgeRequest)
	case OpPeek:
		return new(PeekRequest)
	case OpRemoveNode:
		return new(RemoveNodeRequest)
	case OpListNodes:
		return new(ListNodesRequest)
	case OpDrainNode:
		return new(DrainNodeRequest)
	case OpRebalance:
		return new(RebalanceRequest)
	case OpSafeToStop:
		return new(SafeToStopRequest)
	case OpQueueSettings:
		return new(QueueSettingsRequest)
	}
	return nil
}

// NewResponseBody returns a pointer to a zero response body of the op's
// type (for example *SendResponse for OpSend); nil for an unknown op.
func NewResponseBody(o Op) any {
	switch o {
	case OpMetadata:
		return new(MetadataResponse)
	case OpCreateQueue:
		return new(CreateQueueResponse)
	case OpUpdateQueue:
		return new(UpdateQueueResponse)
	case OpDeleteQueue:
		return new(DeleteQueueResponse)
	case OpListQueues:
		return new(ListQueuesResponse)
	case OpQueueStats:
		return new(QueueStatsResponse)
	case OpSend:
		return new(SendResponse)
	case OpReceive:
		return new(ReceiveResponse)
	case OpAck:
		return new(AckResponse)
	case OpExtend:
		return new(ExtendResponse)
	case OpNack:
		return new(NackResponse)
	case OpReject:
		return new(RejectResponse)
	case OpDeadList:
		return new(DeadListResponse)
	case OpDeadPeek:
		return new(DeadPeekResponse)
	case OpDeadRedrive:
		return new(DeadRedriveResponse)
	case OpDeadDelete:
		return new(DeadDeleteResponse)
	case OpPurge:
		return new(PurgeResponse)
	case OpPeek:
		return new(PeekResponse)
	case OpRemoveNode:
		return new(RemoveNodeResponse)
	case OpListNodes:
		return new(ListNodesResponse)
	case OpDrainNode:
		return new(DrainNodeResponse)
	case OpRebalance:
		return new(RebalanceResponse)
	case OpSafeToStop:
		return new(SafeToStopResponse)
	case OpQueueSettings:
		return new(QueueSettingsResponse)
	}
	return nil
}
