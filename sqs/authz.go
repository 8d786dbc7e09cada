package sqs

import (
	"slices"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/wire"
)

// Authorization. Every action is checked, before it runs, against the
// caller's token: on each queue the action acts on, the token needs what
// the native operation doing that work needs in auth's permission table
// (auth.OpNeed), the same table the client port checks its requests
// against. The queue checked is the one the action acts on: QueueName for
// CreateQueue and GetQueueUrl, QueueUrl (or, in the query protocol, the
// request path when QueueUrl is absent) for the others, SourceArn and
// DestinationArn for message move tasks. Batch entries act on their
// request's queue: a receipt handle of another queue is refused per
// entry. The handlers resolve their queue through request.queue, which
// refuses a name that was not checked, so an action cannot act on a queue
// other than the one authorized.
//
// A refusal changes nothing. It never tells a token whether a queue it may
// not see (no permission at all on it, or a reserved queue) exists: the
// decision is made from the token and the names alone, before any lookup,
// and such a token gets the answer SQS gives for a queue that does not
// exist, per action:
//
//   - actions naming a QueueUrl, and GetQueueUrl: QueueDoesNotExist
//     (AWS.SimpleQueueService.NonExistentQueue), as for a missing queue;
//   - CreateQueue: AccessDenied, whether the queue exists or not (a
//     create of a missing queue would create it, so "does not exist" is
//     no answer; AccessDenied comes before any lookup and is the same
//     either way);
//   - message move tasks: ResourceNotFoundException, as for a missing
//     source or destination queue.
//
// A token that sees the queue but lacks the permission gets AccessDenied.

// actionOps is the native operation each action performs on the queues
// it names, and where its input names them. It holds no permissions: those
// are auth.OpNeed's.
var actionOps = map[string]actionRule{
	"CreateQueue":                  {wire.OpCreateQueue, byName},
	"GetQueueUrl":                  {wire.OpQueueStats, byName},
	"ListQueues":                   {wire.OpListQueues, byNothing},
	"GetQueueAttributes":           {wire.OpQueueStats, byURL},
	"SetQueueAttributes":           {wire.OpUpdateQueue, byURL},
	"DeleteQueue":                  {wire.OpDeleteQueue, byURL},
	"PurgeQueue":                   {wire.OpPurge, byURL},
	"TagQueue":                     {wire.OpUpdateQueue, byURL},
	"UntagQueue":                   {wire.OpUpdateQueue, byURL},
	"ListQueueTags":                {wire.OpQueueStats, byURL},
	"SendMessage":                  {wire.OpSend, byURL},
	"SendMessageBatch":             {wire.OpSend, byURL},
	"ReceiveMessage":               {wire.OpReceive, byURL},
	"DeleteMessage":                {wire.OpAck, byURL},
	"DeleteMessageBatch":           {wire.OpAck, byURL},
	"ChangeMessageVisibility":      {wire.OpExtend, byURL}, // a timeout of 0 is a nack: same permission
	"ChangeMessageVisibilityBatch": {wire.OpExtend, byURL},
	"ListDeadLetterSourceQueues":   {wire.OpQueueStats, byURL}, // the list shows only queues the caller sees
	"StartMessageMoveTask":         {wire.OpDeadRedrive, byARNs},
	"ListMessageMoveTasks":         {wire.OpDeadList, bySourceARN},
	"CancelMessageMoveTask":        {wire.OpListQueues, byNothing}, // names no queue; tasks end before their start answers
	"AddPermission":                {wire.OpUpdateQueue, byURL},
	"RemovePermission":             {wire.OpUpdateQueue, byURL},
}

// actionRule is an action's native op and where its queues are named.
type actionRule struct {
	op    wire.Op
	names nameSource
}

// nameSource says where an action's input names its queues.
type nameSource uint8

const (
	byNothing   nameSource = iota // no queue: a listing, filtered by what the caller sees
	byName                        // QueueName
	byURL                         // QueueUrl
	byARNs                        // SourceArn, and DestinationArn when given
	bySourceARN                   // SourceArn
)

// target is one queue an action acts on, and how it is named.
type target struct {
	queue string
	arn   bool
}

// targets returns the queues the action's JSON input names. A missing or
// malformed name is the action's own error (the same for every caller).
func targets(src nameSource, body []byte) ([]target, error) {
	var in struct {
		QueueURL       string `json:"QueueUrl"`
		QueueName      string `json:"QueueName"`
		SourceArn      string `json:"SourceArn"`
		DestinationArn string `json:"DestinationArn"`
	}
	if src != byNothing {
		if err := (&request{body: body}).decode(&in); err != nil {
			return nil, err
		}
	}
	switch src {
	case byName:
		if in.QueueName == "" {
			return nil, fail(ErrMissingParameter, "the request must contain the parameter QueueName")
		}
		return []target{{queue: in.QueueName}}, nil
	case byURL:
		name, err := nameOfURL(in.QueueURL)
		if err != nil {
			return nil, err
		}
		return []target{{queue: name}}, nil
	case byARNs, bySourceARN:
		if in.SourceArn == "" {
			return nil, fail(ErrMissingParameter, "the request must contain the parameter SourceArn")
		}
		out := []target{{queue: nameOfARN(in.SourceArn), arn: true}}
		if src == byARNs && in.DestinationArn != "" {
			out = append(out, target{queue: nameOfARN(in.DestinationArn), arn: true})
		}
		return out, nil
	}
	return nil, nil
}

// authorize checks that tok may run the action on every queue its JSON
// input names, before the action runs, and returns those queues (the only
// ones request.queue lets the action act on). A nil tok (signatures not
// verified) may do everything.
func authorize(tok *auth.Token, action string, body []byte) ([]string, error) {
	rule, known := actionOps[action]
	if !known {
		return nil, fail(ErrInvalidAction, "the action %q is not valid for this endpoint", truncate(action, 64))
	}
	ts, err := targets(rule.names, body)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		if !tok.Allows(rule.op, t.queue) {
			return nil, refusal(tok, action, rule.op, t)
		}
		names = append(names, t.queue)
	}
	return names, nil
}

// refusal is the answer to a token that may not run op on t: the answer
// for a queue that does not exist when the token may not see the queue
// (see the package's authorization rule), AccessDenied otherwise.
func refusal(tok *auth.Token, action string, op wire.Op, t target) error {
	denied := fail(ErrAccessDenied, "access key %q may not %s on queue %s (needs %s)", tok.Name, action, truncate(t.queue, 80), auth.OpNeed(op))
	if tok.Sees(t.queue) || op == wire.OpCreateQueue {
		return denied
	}
	if t.arn {
		return fail(ErrResourceNotFound, "the queue %s does not exist", truncate(t.queue, 80))
	}
	return fail(ErrQueueDoesNotExist, "the specified queue does not exist")
}

// queue returns name when the action was authorized on it (or runs
// without a token); any other name is refused, so that an action acts
// only on the queues checked for it.
func (r *request) queue(name string) (string, error) {
	if r.tok != nil && !slices.Contains(r.checked, name) {
		return "", fail(ErrAccessDenied, "queue %s was not authorized for this request", truncate(name, 80))
	}
	return name, nil
}

// may reports whether the caller may run op on queue (for queues an
// action finds as it runs, such as the sources of a dead-letter queue).
func (r *request) may(op wire.Op, queue string) bool { return r.tok.Allows(op, queue) }
