package sqs

import (
	"encoding/json"

	"github.com/ferrymq/ferry/internal/auth"
)

// actionNeeds is the Ferry permission each action needs on the queue it
// names. needSee is any permission on the queue; needCluster is cluster
// admin (message move tasks may touch every queue whose RedrivePolicy
// names their source); needNothing is checked by the action itself
// (ListQueues shows only the queues the caller sees).
var actionNeeds = map[string]auth.Action{
	"CreateQueue":                  auth.Admin,
	"GetQueueUrl":                  needSee,
	"ListQueues":                   needNothing,
	"GetQueueAttributes":           needSee,
	"SetQueueAttributes":           auth.Admin,
	"DeleteQueue":                  auth.Admin,
	"PurgeQueue":                   auth.Admin,
	"TagQueue":                     auth.Admin,
	"UntagQueue":                   auth.Admin,
	"ListQueueTags":                needSee,
	"SendMessage":                  auth.Send,
	"SendMessageBatch":             auth.Send,
	"ReceiveMessage":               auth.Receive,
	"DeleteMessage":                auth.Receive,
	"DeleteMessageBatch":           auth.Receive,
	"ChangeMessageVisibility":      auth.Receive,
	"ChangeMessageVisibilityBatch": auth.Receive,
	"ListDeadLetterSourceQueues":   auth.Admin,
	"StartMessageMoveTask":         needCluster,
	"ListMessageMoveTasks":         needCluster,
	"CancelMessageMoveTask":        needCluster,
	"AddPermission":                needNothing,
	"RemovePermission":             needNothing,
}

// Pseudo-actions of actionNeeds beside auth's action bits.
const (
	needNothing auth.Action = 0
	needSee     auth.Action = 1 << 6
	needCluster auth.Action = 1 << 7
)

// authorize checks that tok may run the action on the queue its input
// names, before the action runs; a nil tok (signatures not verified) may
// do everything. body is the action's JSON input.
func authorize(tok *auth.Token, action string, body []byte) error {
	if tok == nil || tok.ClusterAdmin {
		return nil
	}
	need, known := actionNeeds[action]
	if !known || need == needCluster {
		return fail(ErrAccessDenied, "access key %q: %s needs the cluster admin permission", tok.Name, action)
	}
	if need == needNothing {
		return nil
	}
	var in struct {
		QueueURL  string `json:"QueueUrl"`
		QueueName string `json:"QueueName"`
	}
	_ = json.Unmarshal(body, &in) // a malformed body fails in the action
	name := in.QueueName
	if in.QueueURL != "" {
		name = lastSegment(in.QueueURL)
	}
	allowed := tok.Can(need, name)
	if need == needSee {
		allowed = tok.Sees(name)
	}
	if !allowed {
		return fail(ErrAccessDenied, "access key %q may not %s on queue %q", tok.Name, action, truncate(name, 80))
	}
	return nil
}
