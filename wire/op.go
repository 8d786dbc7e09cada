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
	// OpPause pauses or resumes the deliveries of one partition (its
	// leader).
	OpPause Op = 25
	// OpFindMessage looks up messages of one partition by id (its leader).
	OpFindMessage Op = 26
	// OpDeleteMessage deletes one message by seq and id (its partition's
	// leader).
	OpDeleteMessage Op = 27
	// OpDeleteMessages deletes a batch of messages by seq and id within
	// a set of states (its partition's leader): the step of a bulk delete.
	OpDeleteMessages Op = 28
	// OpSetSchedule creates or replaces a recurring schedule (the leader
	// of the partition its name hashes to).
	OpSetSchedule Op = 29
	// OpListSchedules lists the schedules of one partition (its leader).
	OpListSchedules Op = 30
	// OpDeleteSchedule deletes a schedule by name (the leader of the
	// partition its name hashes to).
	OpDeleteSchedule Op = 31
)

// opEnd is one past the last known op: the length of the op table.
const opEnd = Op(len(opKinds))

// opKind is what the package knows of one op: its name and its request
// and response body types.
type opKind struct {
	name          string
	request, resp func() any
}

// opKinds is the table of ops: a new op is its constant above and one
// entry here (and its body types).
var opKinds = [...]opKind{
	OpMetadata:       {"metadata", func() any { return new(MetadataRequest) }, func() any { return new(MetadataResponse) }},
	OpCreateQueue:    {"create-queue", func() any { return new(CreateQueueRequest) }, func() any { return new(CreateQueueResponse) }},
	OpUpdateQueue:    {"update-queue", func() any { return new(UpdateQueueRequest) }, func() any { return new(UpdateQueueResponse) }},
	OpDeleteQueue:    {"delete-queue", func() any { return new(DeleteQueueRequest) }, func() any { return new(DeleteQueueResponse) }},
	OpListQueues:     {"list-queues", func() any { return new(ListQueuesRequest) }, func() any { return new(ListQueuesResponse) }},
	OpQueueStats:     {"queue-stats", func() any { return new(QueueStatsRequest) }, func() any { return new(QueueStatsResponse) }},
	OpSend:           {"send", func() any { return new(SendRequest) }, func() any { return new(SendResponse) }},
	OpReceive:        {"receive", func() any { return new(ReceiveRequest) }, func() any { return new(ReceiveResponse) }},
	OpAck:            {"ack", func() any { return new(AckRequest) }, func() any { return new(AckResponse) }},
	OpExtend:         {"extend", func() any { return new(ExtendRequest) }, func() any { return new(ExtendResponse) }},
	OpNack:           {"nack", func() any { return new(NackRequest) }, func() any { return new(NackResponse) }},
	OpReject:         {"reject", func() any { return new(RejectRequest) }, func() any { return new(RejectResponse) }},
	OpDeadList:       {"dead-list", func() any { return new(DeadListRequest) }, func() any { return new(DeadListResponse) }},
	OpDeadPeek:       {"dead-peek", func() any { return new(DeadPeekRequest) }, func() any { return new(DeadPeekResponse) }},
	OpDeadRedrive:    {"dead-redrive", func() any { return new(DeadRedriveRequest) }, func() any { return new(DeadRedriveResponse) }},
	OpDeadDelete:     {"dead-delete", func() any { return new(DeadDeleteRequest) }, func() any { return new(DeadDeleteResponse) }},
	OpPurge:          {"purge", func() any { return new(PurgeRequest) }, func() any { return new(PurgeResponse) }},
	OpPeek:           {"peek", func() any { return new(PeekRequest) }, func() any { return new(PeekResponse) }},
	OpRemoveNode:     {"remove-node", func() any { return new(RemoveNodeRequest) }, func() any { return new(RemoveNodeResponse) }},
	OpListNodes:      {"list-nodes", func() any { return new(ListNodesRequest) }, func() any { return new(ListNodesResponse) }},
	OpDrainNode:      {"drain-node", func() any { return new(DrainNodeRequest) }, func() any { return new(DrainNodeResponse) }},
	OpRebalance:      {"rebalance", func() any { return new(RebalanceRequest) }, func() any { return new(RebalanceResponse) }},
	OpSafeToStop:     {"safe-to-stop", func() any { return new(SafeToStopRequest) }, func() any { return new(SafeToStopResponse) }},
	OpQueueSettings:  {"queue-settings", func() any { return new(QueueSettingsRequest) }, func() any { return new(QueueSettingsResponse) }},
	OpPause:          {"pause", func() any { return new(PauseRequest) }, func() any { return new(PauseResponse) }},
	OpFindMessage:    {"find-message", func() any { return new(FindMessageRequest) }, func() any { return new(FindMessageResponse) }},
	OpDeleteMessage:  {"delete-message", func() any { return new(DeleteMessageRequest) }, func() any { return new(DeleteMessageResponse) }},
	OpDeleteMessages: {"delete-messages", func() any { return new(DeleteMessagesRequest) }, func() any { return new(DeleteMessagesResponse) }},
	OpSetSchedule:    {"set-schedule", func() any { return new(SetScheduleRequest) }, func() any { return new(SetScheduleResponse) }},
	OpListSchedules:  {"list-schedules", func() any { return new(ListSchedulesRequest) }, func() any { return new(ListSchedulesResponse) }},
	OpDeleteSchedule: {"delete-schedule", func() any { return new(DeleteScheduleRequest) }, func() any { return new(DeleteScheduleResponse) }},
}

// String returns the op's name, or "op(N)" for a number this version does
// not know.
func (o Op) String() string {
	if o.Valid() {
		return opKinds[o].name
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
	if !o.Valid() {
		return nil
	}
	return opKinds[o].request()
}

// NewResponseBody returns a pointer to a zero response body of the op's
// type (for example *SendResponse for OpSend); nil for an unknown op.
func NewResponseBody(o Op) any {
	if !o.Valid() {
		return nil
	}
	return opKinds[o].resp()
}
