package wire

// FindMessageRequest looks up the messages of one partition with an id,
// in any state; served by the partition's leader. To find a message
// anywhere in a queue, ask every partition.
type FindMessageRequest struct {
	Queue     string `msgpack:"queue"`
	Partition int    `msgpack:"partition"`
	ID        string `msgpack:"id"`
}

// FindMessageResponse holds the messages found (at most 16), live ones
// first, each in seq order.
type FindMessageResponse struct {
	Messages []MessageInfo `msgpack:"messages,omitempty"`
}

// MessageInfo is one message as a find reports it, without headers or
// body. State is "ready", "delayed", "leased" or "dead". VisibleAt is when
// a delayed message becomes ready or a leased one's lease runs out (Unix
// nanoseconds, the partition clock). Consumer is the consumer that
// received it last (holding it, when leased). Dead is set for a dead
// letter. History holds the newest failure events, oldest first.
type MessageInfo struct {
	Partition  int         `msgpack:"partition"`
	Seq        uint64      `msgpack:"seq"`
	ID         string      `msgpack:"id"`
	Group      string      `msgpack:"group,omitempty"`
	State      string      `msgpack:"state"`
	Attempts   uint32      `msgpack:"attempts"`
	EnqueuedAt int64       `msgpack:"enqueued_at"`
	VisibleAt  int64       `msgpack:"visible_at,omitempty"`
	Consumer   string      `msgpack:"consumer,omitempty"`
	Dead       *DeadLetter `msgpack:"dead,omitempty"`
	History    []Event     `msgpack:"history,omitempty"`
	Priority   Priority    `msgpack:"priority,omitempty"` // absent: 0
}

// DeleteMessageRequest deletes one message of a partition, named by its
// seq and id (from a find), in any state; served by the partition's
// leader. A leased message's consumer then gets "message not found" for
// its ack, extend, nack or reject. Undelivered deletes only a message never
// delivered (a cancel); a delivered one answers "message not found".
type DeleteMessageRequest struct {
	Queue       string `msgpack:"queue"`
	Partition   int    `msgpack:"partition"`
	Seq         uint64 `msgpack:"seq"`
	ID          string `msgpack:"id"`
	Undelivered bool   `msgpack:"undelivered,omitempty"`
}

// DeleteMessageResponse confirms a delete.
type DeleteMessageResponse struct {
	Deleted int `msgpack:"deleted"`
}
