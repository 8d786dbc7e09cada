package wire

import (
	"hash/fnv"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// ReceiveWaitMax is the longest long-poll a receive may ask for; the server
// treats a longer Wait as ReceiveWaitMax.
const ReceiveWaitMax = 20 * time.Second

// PartitionFor is the partition of a message group: FNV-1a (32 bit) of the
// group key modulo the partition count. Clients use it so that every
// message of a group lands in one partition; the server answers a message
// sent with a group to another partition with CodeInvalidArgument. It
// returns 0 for an empty group or a count below 2. The mapping is part of
// the protocol and never changes.
func PartitionFor(group string, partitions int) int {
	if group == "" || partitions < 2 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(group))
	return int(h.Sum32() % uint32(partitions))
}

// Message is one message of a send.
type Message struct {
	// ID is the producer's idempotency key, unique within the queue's
	// dedup window. Required: clients assign one when the caller gives
	// none and reuse it on every retry.
	ID string `msgpack:"id"`
	// Group, when set, orders the message within its group; see
	// PartitionFor.
	Group string `msgpack:"group,omitempty"`
	// Headers are free-form string pairs delivered with the message.
	Headers map[string]string `msgpack:"headers,omitempty"`
	// Body is the payload.
	Body []byte `msgpack:"body"`
	// Delay keeps the message invisible this long after it is accepted.
	Delay time.Duration `msgpack:"delay,omitempty"`
	// Priority is 0 (the default, left out of the encoding) to
	// PriorityMax, the most urgent: a receive takes the highest priority
	// ready first. A send naming a priority out of range is refused whole
	// with CodeInvalidArgument.
	Priority Priority `msgpack:"priority,omitempty"`
}

// PriorityMax is the highest message priority.
const PriorityMax = 9

// Priority is a message's priority, 0..PriorityMax (see Message.Priority).
type Priority uint8

// DecodeMsgpack reads a priority, refusing one out of 0..PriorityMax with
// CodeInvalidArgument.
func (p *Priority) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := decodeUintMax(d, "priority", PriorityMax)
	*p = Priority(n)
	return err
}

// SendRequest enqueues messages into one partition, whose leader must
// receive it. The reply comes only after the messages are committed on a
// majority of the partition's replicas.
type SendRequest struct {
	Queue     string    `msgpack:"queue"`
	Partition int       `msgpack:"partition"`
	Messages  []Message `msgpack:"messages"`
}

// SendResult is the outcome for one message of a send.
type SendResult struct {
	// Seq is the message's sequence number in its partition; for a
	// duplicate, the original message's.
	Seq uint64 `msgpack:"seq,omitempty"`
	// Duplicate is set when the id was already accepted within the dedup
	// window; the message was not enqueued again.
	Duplicate bool `msgpack:"dup,omitempty"`
	// Code and Error are set when this message was refused (for example
	// CodeMessageTooLarge or CodeQueueFull); nothing was stored for it.
	Code  Code   `msgpack:"code,omitempty"`
	Error string `msgpack:"error,omitempty"`
}

// Err returns the message's failure, or nil.
func (r SendResult) Err() error { return AsError(r.Code, r.Error) }

// SendResponse holds one result per message, in request order.
type SendResponse struct {
	Results []SendResult `msgpack:"results"`
}

// ReceiveRequest leases up to Max eligible messages of one partition,
// the highest priority first and the oldest first within a priority, to
// Consumer.
type ReceiveRequest struct {
	Queue     string `msgpack:"queue"`
	Partition int    `msgpack:"partition"`
	// Consumer identifies the receiver in lease records and dead-letter
	// history.
	Consumer string `msgpack:"consumer,omitempty"`
	// Max is the most messages to lease (at least 1).
	Max int `msgpack:"max"`
	// Visibility is the lease length; 0 means the queue's
	// visibility_timeout.
	Visibility time.Duration `msgpack:"visibility,omitempty"`
	// Wait is how long to wait for a message when none is eligible; 0
	// answers at once. At most ReceiveWaitMax. A client's own request
	// timeout must exceed it.
	Wait time.Duration `msgpack:"wait,omitempty"`
	// Acks are receipts of this partition to ack before leasing, in the
	// same raft entry as the lease (at most the server's batch limit).
	// Each is answered in ReceiveResponse.AckResults as an AckRequest's
	// receipt would be; a receipt of another partition fails alone with
	// CodeInvalidArgument. A server that predates the field ignores it and
	// answers no AckResults: then none of the acks was applied.
	Acks []Receipt `msgpack:"acks,omitempty"`
}

// CheckWait refuses a negative Wait with CodeInvalidArgument (a Wait over
// ReceiveWaitMax is served as ReceiveWaitMax). The server checks it before
// it looks for the partition.
func (r *ReceiveRequest) CheckWait() error {
	if r.Wait < 0 {
		return Errorf(CodeInvalidArgument, "wait %v is negative", r.Wait)
	}
	return nil
}

// Delivery is one leased message.
type Delivery struct {
	Partition int    `msgpack:"partition"`
	Seq       uint64 `msgpack:"seq"`
	// Attempt counts deliveries of this message, 1 for the first; with
	// Partition and Seq it forms the Receipt.
	Attempt uint32            `msgpack:"attempt"`
	ID      string            `msgpack:"id"`
	Group   string            `msgpack:"group,omitempty"`
	Headers map[string]string `msgpack:"headers,omitempty"`
	Body    []byte            `msgpack:"body"`
	// EnqueuedAt is when the message was accepted, Unix nanoseconds.
	EnqueuedAt int64 `msgpack:"enqueued_at"`
	// Deadline is when the lease ends, Unix nanoseconds by the leader's
	// clock.
	Deadline int64 `msgpack:"deadline"`
	// Priority is the message's priority (absent: 0).
	Priority Priority `msgpack:"priority,omitempty"`
}

// Receipt returns the handle that acks, extends, nacks or rejects this
// delivery.
func (d Delivery) Receipt() Receipt {
	return Receipt{Partition: d.Partition, Seq: d.Seq, Attempt: d.Attempt}
}

// ReceiveResponse holds the leased messages in the order leased (the
// highest priority, then the oldest, first); it is empty when Wait ran out
// with nothing eligible.
type ReceiveResponse struct {
	Messages []Delivery `msgpack:"messages,omitempty"`
	// AckResults holds one result per receipt of ReceiveRequest.Acks, in
	// request order; it is empty when the request carried none.
	AckResults []ItemResult `msgpack:"ack_results,omitempty"`
}

// Receipt names one delivery attempt of one message. A receipt whose
// attempt is not the current one fails with CodeLeaseLost.
type Receipt struct {
	Partition int    `msgpack:"partition"`
	Seq       uint64 `msgpack:"seq"`
	Attempt   uint32 `msgpack:"attempt"`
}

// ItemResult is the outcome of one item of an ack, extend, nack or reject:
// CodeOK, or for example CodeLeaseLost or CodeMessageNotFound.
type ItemResult struct {
	Code  Code   `msgpack:"code,omitempty"`
	Error string `msgpack:"error,omitempty"`
}

// Err returns the item's failure, or nil.
func (r ItemResult) Err() error { return AsError(r.Code, r.Error) }

// AckRequest deletes the messages of current receipts. Every receipt's
// Partition must equal the request's; another is CodeInvalidArgument for
// that item.
type AckRequest struct {
	Queue     string    `msgpack:"queue"`
	Partition int       `msgpack:"partition"`
	Receipts  []Receipt `msgpack:"receipts"`
}

// AckResponse holds one result per receipt, in request order.
type AckResponse struct {
	Results []ItemResult `msgpack:"results"`
}

// ExtendItem moves one lease's deadline to now plus Visibility.
type ExtendItem struct {
	Receipt    Receipt       `msgpack:"receipt"`
	Visibility time.Duration `msgpack:"visibility"`
}

// ExtendRequest extends leases of one partition; receipts
// must name the request's partition, as in AckRequest.
type ExtendRequest struct {
	Queue     string       `msgpack:"queue"`
	Partition int          `msgpack:"partition"`
	Items     []ExtendItem `msgpack:"items"`
}

// ExtendResponse holds one result per item, in request order.
type ExtendResponse struct {
	Results []ItemResult `msgpack:"results"`
}

// NackItem gives one leased message back for a retry.
type NackItem struct {
	Receipt Receipt `msgpack:"receipt"`
	// ExplicitDelay selects Delay (0 included: retry at once); otherwise
	// the queue's backoff decides.
	ExplicitDelay bool          `msgpack:"explicit,omitempty"`
	Delay         time.Duration `msgpack:"delay,omitempty"`
	// Reason is kept in the message's failure history.
	Reason string `msgpack:"reason,omitempty"`
	// Release gives back a delivery its consumer never used: the message
	// is ready again at once and the attempt does not count (no backoff,
	// no history entry, no step towards max_receives; the next delivery
	// has the same attempt number). ExplicitDelay must be false. A server
	// that predates the field treats the item as a plain nack.
	Release bool `msgpack:"release,omitempty"`
}

// NackRequest gives leased messages of one partition back for retries;
// receipts must name the request's partition, as in AckRequest.
type NackRequest struct {
	Queue     string     `msgpack:"queue"`
	Partition int        `msgpack:"partition"`
	Items     []NackItem `msgpack:"items"`
}

// NackResponse holds one result per item, in request order.
type NackResponse struct {
	Results []ItemResult `msgpack:"results"`
}

// RejectItem dead-letters one leased message at once.
type RejectItem struct {
	Receipt Receipt `msgpack:"receipt"`
	Reason  string  `msgpack:"reason,omitempty"`
}

// RejectRequest dead-letters leased messages of one partition; receipts
// must name the request's partition, as in AckRequest.
type RejectRequest struct {
	Queue     string       `msgpack:"queue"`
	Partition int          `msgpack:"partition"`
	Items     []RejectItem `msgpack:"items"`
}

// RejectResponse holds one result per item, in request order.
type RejectResponse struct {
	Results []ItemResult `msgpack:"results"`
}
