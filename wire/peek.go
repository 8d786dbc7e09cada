package wire

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

// PeekRequest reads ready messages of one partition, oldest first, with
// headers and bodies, without leasing them. It is served by the
// partition's leader after it confirmed its leadership.
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
}

// CheckBounds refuses, with CodeInvalidArgument, a Max outside 1..PeekMax
// or a MaxBytes outside 0..PeekBytesMax. The server checks it before it
// looks for the partition.
func (r *PeekRequest) CheckBounds() error {
	if r.Max < 1 || r.Max > PeekMax || r.MaxBytes < 0 || r.MaxBytes > PeekBytesMax {
		return Errorf(CodeInvalidArgument, "peek max %d (want 1..%d), max bytes %d (want 0..%d)",
			r.Max, PeekMax, r.MaxBytes, PeekBytesMax)
	}
	return nil
}

// PeekedMessage is one ready message as a peek shows it.
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
	Priority Priority `msgpack:"priority,omitempty"`
}

// PeekResponse holds the ready messages, oldest first. Next, when not 0,
// continues the listing (as the AfterSeq of the next request): a bound was
// reached before the end of the partition.
type PeekResponse struct {
	Messages []PeekedMessage `msgpack:"messages,omitempty"`
	Next     uint64          `msgpack:"next,omitempty"`
}
