package wire

// DeadReason says why a message was dead-lettered. The numbers are those of
// the partition state machine (the server converts them by number, and its
// tests check that both definitions agree); the enum is append-only.
type DeadReason uint8

// Dead-letter reasons.
const (
	// DeadAny selects every reason in a DeadFilter.
	DeadAny DeadReason = 0
	// DeadRejected: a consumer rejected the message.
	DeadRejected DeadReason = 1
	// DeadRetriesExhausted: it was nacked on its last allowed receive.
	DeadRetriesExhausted DeadReason = 2
	// DeadLeaseExpired: its last allowed lease expired.
	DeadLeaseExpired DeadReason = 3
)

// String names the reason.
func (r DeadReason) String() string {
	switch r {
	case DeadAny:
		return "any"
	case DeadRejected:
		return "rejected"
	case DeadRetriesExhausted:
		return "retries exhausted"
	case DeadLeaseExpired:
		return "lease expired"
	}
	return "unknown"
}

// EventKind names an entry of a message's failure history. The numbers are
// those of the partition state machine (checked like DeadReason's); the
// enum is append-only.
type EventKind uint8

// Event kinds.
const (
	// EventNacked: a consumer asked for a retry.
	EventNacked EventKind = 1
	// EventLeaseExpired: the lease ran out.
	EventLeaseExpired EventKind = 2
	// EventRejected: a consumer rejected the message.
	EventRejected EventKind = 3
	// EventRedriven: an operator moved it back from the dead letters.
	EventRedriven EventKind = 4
)

// String names the event kind.
func (k EventKind) String() string {
	switch k {
	case EventNacked:
		return "nacked"
	case EventLeaseExpired:
		return "lease expired"
	case EventRejected:
		return "rejected"
	case EventRedriven:
		return "redriven"
	}
	return "unknown"
}

// Event is one entry of a message's history.
type Event struct {
	// Kind says what happened.
	Kind EventKind `msgpack:"kind"`
	// At is when it happened, Unix nanoseconds.
	At int64 `msgpack:"at"`
	// Attempt is the delivery attempt the event ended.
	Attempt uint32 `msgpack:"attempt"`
	// Consumer is the consumer holding that delivery, if any.
	Consumer string `msgpack:"consumer,omitempty"`
	// Reason is the consumer's reason text, if any.
	Reason string `msgpack:"reason,omitempty"`
}

// DeadFilter selects dead letters of a partition. Zero fields select
// everything; set fields must all match, Seqs included (a sequence number
// in Seqs is selected only when the other set fields match it too).
type DeadFilter struct {
	// Seqs, when set, selects exactly these sequence numbers.
	Seqs []uint64 `msgpack:"seqs,omitempty"`
	// Reason, when set, selects one reason.
	Reason DeadReason `msgpack:"reason,omitempty"`
	// Group, when set, selects one group.
	Group string `msgpack:"group,omitempty"`
	// FromAt and ToAt bound the dead-lettering time to [FromAt, ToAt), Unix
	// nanoseconds; 0 leaves that side open.
	FromAt int64 `msgpack:"from,omitempty"`
	ToAt   int64 `msgpack:"to,omitempty"`
	// AfterSeq resumes a listing after this sequence number (the last Seq
	// of the previous page).
	AfterSeq uint64 `msgpack:"after,omitempty"`
	// Limit bounds how many are handled; 0 means the server's maximum
	// (10000).
	Limit int `msgpack:"limit,omitempty"`
	// Text, when set, selects dead letters whose ReasonText contains it
	// (case-sensitive substring; at most 256 bytes).
	Text string `msgpack:"text,omitempty"`
}

// DeadLetter is one dead-lettered message with its history. Times are
// Unix nanoseconds; 0 means "never".
type DeadLetter struct {
	Partition int    `msgpack:"partition"`
	Seq       uint64 `msgpack:"seq"`
	ID        string `msgpack:"id"`
	Group     string `msgpack:"group,omitempty"`
	// Headers and Body are set by DeadPeek only.
	Headers map[string]string `msgpack:"headers,omitempty"`
	Body    []byte            `msgpack:"body,omitempty"`
	// Bytes is the stored size of headers and body.
	Bytes    int    `msgpack:"bytes"`
	Attempts uint32 `msgpack:"attempts"`
	// FirstEnqueuedAt is when the message was first sent; it differs from
	// EnqueuedAt for a message redriven before.
	FirstEnqueuedAt  int64      `msgpack:"first_enqueued_at"`
	EnqueuedAt       int64      `msgpack:"enqueued_at"`
	FirstDeliveredAt int64      `msgpack:"first_delivered_at,omitempty"`
	LastDeliveredAt  int64      `msgpack:"last_delivered_at,omitempty"`
	DeadAt           int64      `msgpack:"dead_at"`
	Reason           DeadReason `msgpack:"reason"`
	// ReasonText is the consumer's reason for a reject or last nack.
	ReasonText   string `msgpack:"reason_text,omitempty"`
	LastConsumer string `msgpack:"last_consumer,omitempty"`
	// History holds the newest failure events, oldest first.
	History []Event `msgpack:"history,omitempty"`
	// Priority is the message's priority (absent: 0); a redrive keeps it.
	Priority Priority `msgpack:"priority,omitempty"`
}

// DeadListRequest lists dead letters of one partition, in sequence order,
// without headers and bodies.
type DeadListRequest struct {
	Queue     string     `msgpack:"queue"`
	Partition int        `msgpack:"partition"`
	Filter    DeadFilter `msgpack:"filter"`
}

// DeadListResponse holds the selected dead letters, in sequence order. A
// page shorter than the filter's limit is the last one.
type DeadListResponse struct {
	Letters []DeadLetter `msgpack:"letters,omitempty"`
}

// DeadPeekRequest is DeadListRequest with headers and bodies.
type DeadPeekRequest struct {
	Queue     string     `msgpack:"queue"`
	Partition int        `msgpack:"partition"`
	Filter    DeadFilter `msgpack:"filter"`
}

// DeadPeekResponse holds the selected dead letters with headers and
// bodies, at most about PeekBytesMax of them (the first letter is returned
// even when it alone is bigger).
type DeadPeekResponse struct {
	Letters []DeadLetter `msgpack:"letters,omitempty"`
	// Next, when not 0, says the byte budget ended the page before the
	// filter's limit: the listing goes on with AfterSeq = Next (a page
	// shorter than the limit is the last one only when Next is 0).
	Next uint64 `msgpack:"next,omitempty"`
}

// DeadRedriveRequest moves the selected dead letters of one partition back
// to ready, attempts reset, id and group kept.
type DeadRedriveRequest struct {
	Queue     string     `msgpack:"queue"`
	Partition int        `msgpack:"partition"`
	Filter    DeadFilter `msgpack:"filter"`
}

// DeadRedriveResponse says how many dead letters were moved.
type DeadRedriveResponse struct {
	Count int `msgpack:"count"`
}

// DeadDeleteRequest deletes the selected dead letters of one partition.
type DeadDeleteRequest struct {
	Queue     string     `msgpack:"queue"`
	Partition int        `msgpack:"partition"`
	Filter    DeadFilter `msgpack:"filter"`
}

// DeadDeleteResponse says how many dead letters were deleted.
type DeadDeleteResponse struct {
	Count int `msgpack:"count"`
}
