package auth

import "github.com/ferrymq/ferry/wire"

// Need is what an operation needs of a token on the queue it acts on.
type Need uint8

// Needs of the permission table.
const (
	// NeedNothing: the operation names no queue. Listings pass and show
	// only the queues the token sees.
	NeedNothing Need = iota
	// NeedSee: any permission on the queue (its stats and metadata).
	NeedSee
	// NeedSend: send on the queue.
	NeedSend
	// NeedReceive: receive on the queue.
	NeedReceive
	// NeedAdmin: admin on the queue (for a create, on a pattern matching
	// the new name).
	NeedAdmin
	// NeedReceiveOrAdmin: receive or admin on the queue (peek).
	NeedReceiveOrAdmin
	// NeedCluster: cluster admin.
	NeedCluster
)

var needNames = [...]string{
	NeedNothing: "nothing", NeedSee: "any permission", NeedSend: "send", NeedReceive: "receive",
	NeedAdmin: "admin", NeedReceiveOrAdmin: "receive or admin", NeedCluster: "cluster admin",
}

// String names the need.
func (n Need) String() string {
	if int(n) < len(needNames) {
		return needNames[n]
	}
	return "cluster admin"
}

// opNeeds is the permission table: what each operation of the client
// protocol needs on the queue it names. It is the only one: the client
// port checks every request against it, and the SQS endpoint checks each
// action against the native operations the action performs.
var opNeeds = map[wire.Op]Need{
	wire.OpMetadata:       NeedSee, // without a queue it is a listing: see OpListQueues
	wire.OpListQueues:     NeedNothing,
	wire.OpQueueStats:     NeedSee,
	wire.OpCreateQueue:    NeedAdmin,
	wire.OpUpdateQueue:    NeedAdmin,
	wire.OpDeleteQueue:    NeedAdmin,
	wire.OpSend:           NeedSend,
	wire.OpReceive:        NeedReceive,
	wire.OpAck:            NeedReceive,
	wire.OpExtend:         NeedReceive,
	wire.OpNack:           NeedReceive,
	wire.OpReject:         NeedReceive,
	wire.OpPeek:           NeedReceiveOrAdmin,
	wire.OpDeadList:       NeedAdmin,
	wire.OpDeadPeek:       NeedAdmin,
	wire.OpDeadRedrive:    NeedAdmin,
	wire.OpDeadDelete:     NeedAdmin,
	wire.OpPurge:          NeedAdmin,
	wire.OpPause:          NeedAdmin,
	wire.OpFindMessage:    NeedReceiveOrAdmin,
	wire.OpDeleteMessage:  NeedAdmin,
	wire.OpDeleteMessages: NeedAdmin,
	wire.OpSetSchedule:    NeedAdmin,
	wire.OpListSchedules:  NeedAdmin,
	wire.OpDeleteSchedule: NeedAdmin,
	wire.OpRemoveNode:     NeedCluster,
	wire.OpListNodes:      NeedCluster,
	wire.OpDrainNode:      NeedCluster,
	wire.OpRebalance:      NeedCluster,
	wire.OpSafeToStop:     NeedCluster,
	wire.OpQueueSettings:  NeedNothing, // the defaults and ranges every client may read
}

// OpNeed returns what op needs on the queue it names; an op the table does
// not know needs cluster admin (deny by default).
func OpNeed(op wire.Op) Need {
	if n, ok := opNeeds[op]; ok {
		return n
	}
	return NeedCluster
}

// Allows reports whether the token may run op on queue. A nil token (auth
// off) may run everything.
func (t *Token) Allows(op wire.Op, queue string) bool {
	return t.Meets(OpNeed(op), queue)
}

// Meets reports whether the token has what need asks on queue. A nil
// token (auth off) meets every need. Reserved queues meet no need but
// NeedNothing unless the token is the cluster's internal identity.
func (t *Token) Meets(need Need, queue string) bool {
	if t == nil {
		return true
	}
	have := t.actions(queue)
	switch need {
	case NeedNothing:
		return true
	case NeedSee:
		return have != 0
	case NeedSend:
		return have&Send != 0
	case NeedReceive:
		return have&Receive != 0
	case NeedAdmin:
		return have&Admin != 0
	case NeedReceiveOrAdmin:
		return have&(Receive|Admin) != 0
	}
	return t.ClusterAdmin || t.Internal
}

// SQSMetaQueue is the queue where the SQS endpoints keep the SQS
// attributes of every queue (package sqs).
const SQSMetaQueue = "sqs.meta"

// reservedQueues are the queues the cluster keeps for its own use.
var reservedQueues = map[string]bool{SQSMetaQueue: true}

// Reserved reports whether queue is one the cluster keeps for its own
// use. No token pattern matches it ("*" included) and cluster admin grants
// nothing on it: only the cluster's internal identity (Token.Internal,
// the identity of a node certificate) may read, write, create or see it.
func Reserved(queue string) bool { return reservedQueues[queue] }
