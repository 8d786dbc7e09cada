package wire

import "time"

// Bounds of a peek answer.
const (
	// PeekMax is the most messages one peek request may ask for.
	PeekMax = 1000
	// PeekBytesMax is the largest byte budget of one peek answer (headers
	// and bodies of the messages, as stored); also the budget when a
	// request names none. A message bigger than the budget alone is still
	// returned when it comes first, so the answer stays far below the
	// frame limit.
	PeekBytesMax = 4 << 20
)

// PeekRequest reads live messages of one partition, oldest first, with
// headers and bodies, without leasing them. It is served by the
// partition's leader after it confirmed its leadership. Ready messages
// only, unless States names others; the optional filters narrow the
// answer further (every one set must match). A request without the
// filter fields reads as it always did.
type PeekRequest struct {
	Queue     string `msgpack:"queue"`
	Partition int    `msgpack:"partition"`
	// Max is the most messages to return, 1..PeekMax.
	Max int `msgpack:"max"`
	// MaxBytes bounds the stored size of the messages returned, 0..
	// PeekBytesMax; 0 means PeekBytesMax.
	MaxBytes int `msgpack:"max_bytes,omitempty"`
	// AfterSeq resumes after this sequence number (the Next of the
	// previous answer).
	AfterSeq uint64 `msgpack:"after,omitempty"`
	// States lists the states to show: "ready", "delayed", "leased" or
	// "all" (at most PeekStatesMax names); none means ready only.
	States []string `msgpack:"states,omitempty"`
	// Group, when set, shows only the messages of this group (exact).
	Group string `msgpack:"group,omitempty"`
	// HeaderKey, when set, shows only the messages whose header
	// HeaderKey is exactly HeaderValue.
	HeaderKey   string `msgpack:"header_key,omitempty"`
	HeaderValue string `msgpack:"header_value,omitempty"`
	// OlderThan, when set, shows only the messages enqueued at least this
	// long before the partition clock.
	OlderThan time.Duration `msgpack:"older_than,omitempty"`
	// NoBodies leaves headers and bodies out of the answer (a listing of
	// ids, as a bulk delete pages through); MaxBytes then bounds nothing.
	NoBodies bool `msgpack:"no_bodies,omitempty"`
}

// PeekStatesMax is the most state names one peek or bulk delete request
// may carry.
const PeekStatesMax = 4

// Peek states, as PeekRequest.States and PeekedMessage.State name them.
const (
	StateReady   = "ready"
	StateDelayed = "delayed"
	StateLeased  = "leased"
	// StateAll names every live state in a request.
	StateAll = "all"
)

// CheckBounds refuses, with CodeInvalidArgument, a Max outside 1..PeekMax,
// a MaxBytes outside 0..PeekBytesMax or more than PeekStatesMax states. The server checks it before it
// looks for the partition.
func (r *PeekRequest) CheckBounds() error {
	if r.Max < 1 || r.Max > PeekMax || r.MaxBytes < 0 || r.MaxBytes > PeekBytesMax {
		return Errorf(CodeInvalidArgument, "peek max %d (want 1..%d), max bytes %d (want 0..%d)",
			r.Max, PeekMax, r.MaxBytes, PeekBytesMax)
	}
	if len(r.States) > PeekStatesMax {
		return Errorf(CodeInvalidArgument, "peek of %d states (at most %d)", len(r.States), PeekStatesMax)
	}
	return nil
}

// PeekedMessage is one live message as a peek shows it. State is
// "ready", "delayed" or "leased" (absent from servers that show ready
// messages only: read it as ready). VisibleAt is when a delayed message
// becomes ready or a leased one's lease runs out (Unix nanoseconds, the
// partition clock); Consumer holds a leased one.
type PeekedMessage struct {
	Partition int               `msgpack:"partition"`
	Seq       uint64            `msgpack:"seq"`
	ID        string            `msgpack:"id"`
	Group     string            `msgpack:"group,omitempty"`
	Headers   map[string]string `msgpack:"headers,omitempty"`
	Body      []byte            `msgpack:"body"`
	// EnqueuedAt is when the message was accepted, Unix nanoseconds.
	EnqueuedAt int64 `msgpack:"enqueued_at"`
	// Attempts counts the deliveries so far; 0 for a message never
	// received.
	Attempts uint32 `msgpack:"attempts,omitempty"`
	// Blocked is set for a group message waiting behind an earlier
	// message of its group.
	Blocked bool `msgpack:"blocked,omitempty"`
	// Priority is the message's priority (absent: 0).
	Priority  Priority `msgpack:"priority,omitempty"`
	State     string   `msgpack:"state,omitempty"`
	VisibleAt int64    `msgpack:"visible_at,omitempty"`
	Consumer  string   `msgpack:"consumer,omitempty"`
}

// PeekResponse holds the messages, oldest first. Next, when not 0,
// continues the listing (as the AfterSeq of the next request): a bound was
// reached before the end of the partition.
type PeekResponse struct {
	Messages []PeekedMessage `msgpack:"messages,omitempty"`
	Next     uint64          `msgpack:"next,omitempty"`
}

// MessageRef names one message of a partition by its seq and id.
type MessageRef struct {
	Seq uint64 `msgpack:"seq"`
	ID  string `msgpack:"id"`
}

// DeleteMessagesMax is the most messages one DeleteMessagesRequest names.
const DeleteMessagesMax = 1000

// DeleteMessagesRequest deletes up to DeleteMessagesMax messages of one
// partition, each named by seq and id (from a peek), that are in one of
// States when the partition applies the request ("ready", "delayed",
// "leased" or "all"; none means any live state); served by the
// partition's leader. A message gone, or in another state, is skipped:
// nothing outside States is deleted, and never a dead letter. A leased
// message's consumer then gets "message not found" for its ack, extend,
// nack or reject. It is the step of a bulk delete by filter.
type DeleteMessagesRequest struct {
	Queue     string       `msgpack:"queue"`
	Partition int          `msgpack:"partition"`
	Items     []MessageRef `msgpack:"items"`
	States    []string     `msgpack:"states,omitempty"`
}

// CheckBounds refuses, with CodeInvalidArgument, an empty request, more
// than DeleteMessagesMax items or more than PeekStatesMax states.
func (r *DeleteMessagesRequest) CheckBounds() error {
	if len(r.Items) < 1 || len(r.Items) > DeleteMessagesMax || len(r.States) > PeekStatesMax {
		return Errorf(CodeInvalidArgument, "delete of %d messages (want 1..%d) in %d states (at most %d)",
			len(r.Items), DeleteMessagesMax, len(r.States), PeekStatesMax)
	}
	return nil
}

// DeleteMessagesResponse says how many of the named messages were
// deleted.
type DeleteMessagesResponse struct {
	Deleted int `msgpack:"deleted"`
}
