package jsonview

import (
	"time"
	"unicode/utf8"

	"github.com/ferrymq/ferry/client"
)

// PeekedMessage is one live message as a peek shows it (`ferry peek
// --json`, GET /v1/queues/{name}/messages): state is "ready", "delayed"
// or "leased"; visible_at is when a delayed message becomes ready or a
// lease runs out; consumer holds a leased one. A body that is not UTF-8
// comes as body_base64 instead of body.
type PeekedMessage struct {
	Partition  int               `json:"partition"`
	Seq        uint64            `json:"seq"`
	ID         string            `json:"id"`
	Group      string            `json:"group,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       string            `json:"body"`
	BodyBase64 []byte            `json:"body_base64,omitempty"`
	EnqueuedAt string            `json:"enqueued_at"`
	Age        string            `json:"age"`
	Attempts   uint32            `json:"attempts"`
	Blocked    bool              `json:"blocked"`
	Priority   int               `json:"priority"` // 0..9
	State      string            `json:"state"`
	VisibleAt  string            `json:"visible_at,omitempty"`
	Consumer   string            `json:"consumer,omitempty"`
}

// PeekedMessageOf renders a peeked message; its age is counted to now.
func PeekedMessageOf(m client.PeekedMessage, now time.Time) PeekedMessage {
	out := PeekedMessage{Partition: m.Partition, Seq: m.Seq, ID: m.ID, Group: m.Group, Headers: m.Headers,
		EnqueuedAt: Time(m.EnqueuedAt), Age: now.Sub(m.EnqueuedAt).Round(100 * time.Millisecond).String(),
		Attempts: m.Attempts, Blocked: m.Blocked, Priority: int(m.Priority), State: m.State,
		VisibleAt: Time(m.VisibleAt), Consumer: m.Consumer}
	if utf8.Valid(m.Body) {
		out.Body = string(m.Body)
	} else {
		out.BodyBase64 = append([]byte{}, m.Body...)
	}
	return out
}

// MatchedMessage names one message a bulk delete selected.
type MatchedMessage struct {
	Partition int    `json:"partition"`
	Seq       uint64 `json:"seq"`
	ID        string `json:"id"`
	State     string `json:"state"`
}

// MessagesMatched is the answer of a bulk delete by filter (`ferry msg
// rm-matching --json`): how many messages matched, how many were deleted
// (0 on a dry run), and the first ones matched.
type MessagesMatched struct {
	DryRun  bool             `json:"dry_run"`
	Matched int              `json:"matched"`
	Deleted int              `json:"deleted"`
	Sample  []MatchedMessage `json:"sample"`
}

// MessagesMatchedOf renders a bulk delete's result.
func MessagesMatchedOf(r client.DeleteMatchingResult, dryRun bool) MessagesMatched {
	out := MessagesMatched{DryRun: dryRun, Matched: r.Matched, Deleted: r.Deleted, Sample: []MatchedMessage{}}
	for _, m := range r.Sample {
		out.Sample = append(out.Sample, MatchedMessage{Partition: m.Partition, Seq: m.Seq, ID: m.ID, State: m.State})
	}
	return out
}
