package fsm

import (
	"bytes"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// CommandType names a kind of command. The enum is append-only: a value, once
// written to a Raft log, keeps its meaning forever.
type CommandType uint8

// Command types. Never renumber; add new ones at the end.
const (
	CmdSend CommandType = iota + 1
	CmdReceive
	CmdAck
	CmdExtend
	CmdNack
	CmdReject
	CmdTick
	CmdRedrive
	CmdDeleteDead
	CmdPurge
	CmdSetConfig
	// CmdClockResync moves the clock to its stamp however far ahead that
	// is (see FSM.SetMaxClockStep); it carries no payload.
	CmdClockResync
	// CmdReceiveAck acks receipts and then leases messages, in one entry.
	CmdReceiveAck
	// CmdPause pauses or resumes deliveries (see PauseCmd).
	CmdPause
	// CmdDeleteMessage deletes one message by seq and id (see
	// DeleteMessageCmd).
	CmdDeleteMessage
	// CmdPurgeAll deletes every live message, leased ones included; it
	// carries no payload (CmdPurge keeps the leased ones).
	CmdPurgeAll
	// CmdDeleteMessages deletes a batch of messages by seq and id, within
	// a set of states (see DeleteMessagesCmd).
	CmdDeleteMessages
	// CmdSetSchedule creates or replaces a recurring schedule (see
	// ScheduleSpec).
	CmdSetSchedule
	// CmdDeleteSchedule deletes a schedule by name (see DeleteScheduleCmd).
	CmdDeleteSchedule
	// CmdFireSchedule fires one tick of a schedule (see FireScheduleCmd).
	CmdFireSchedule
	cmdTypeEnd // one past the last valid type
)

var commandNames = [...]string{
	CmdSend: "send", CmdReceive: "receive", CmdAck: "ack", CmdExtend: "extend",
	CmdNack: "nack", CmdReject: "reject", CmdTick: "tick", CmdRedrive: "redrive",
	CmdDeleteDead: "delete-dead", CmdPurge: "purge", CmdSetConfig: "set-config",
	CmdClockResync: "clock-resync",
	CmdReceiveAck:  "receive-ack", CmdPause: "pause",
	CmdDeleteMessage: "delete-message",
	CmdPurgeAll:      "purge-all", CmdDeleteMessages: "delete-messages",
	CmdSetSchedule: "set-schedule", CmdDeleteSchedule: "delete-schedule", CmdFireSchedule: "fire-schedule",
}

// String returns the command's name, or "command(N)" for an unknown value.
func (t CommandType) String() string {
	if t > 0 && t < cmdTypeEnd {
		return commandNames[t]
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// Command is one entry of a partition's log. At is the proposing leader's
// clock in Unix nanoseconds; exactly the payload field matching Type is set.
type Command struct {
	Type CommandType
	At   int64

	Send       *SendCmd
	Receive    *ReceiveCmd
	Ack        *AckCmd
	Extend     *ExtendCmd
	Nack       *NackCmd
	Reject     *RejectCmd
	Redrive    *DeadFilter // CmdRedrive
	DeleteDead *DeadFilter // CmdDeleteDead
	SetConfig  *QueueConfig
	ReceiveAck *ReceiveAckCmd
	Pause      *PauseCmd
	Delete     *DeleteMessageCmd  // CmdDeleteMessage
	DeleteMany *DeleteMessagesCmd // CmdDeleteMessages
	Schedule   *ScheduleSpec      // CmdSetSchedule
	Unschedule *DeleteScheduleCmd // CmdDeleteSchedule
	Fire       *FireScheduleCmd   // CmdFireSchedule
}

// NewMessage is one message of a send.
type NewMessage struct {
	ID      string            `msgpack:"id"`
	Group   string            `msgpack:"group,omitempty"`
	Headers map[string]string `msgpack:"headers,omitempty"`
	Body    []byte            `msgpack:"body"`
	// Delay keeps the message invisible this long after it is accepted.
	Delay time.Duration `msgpack:"delay,omitempty"`
	// Priority is 0 (the default) to PriorityMax (the most urgent); see
	// priority.go.
	Priority uint8 `msgpack:"priority,omitempty"`

	// stored is set instead of Headers and Body by the FSM's own decoding:
	// the message's stored payload (payload.go), usually aliasing the log
	// entry's data. storedAt is its offset in that data, -1 when unknown.
	stored   []byte
	storedAt int
}

// SendCmd enqueues a batch of messages.
type SendCmd struct {
	Messages []NewMessage `msgpack:"messages"`
}

// ReceiveCmd leases up to Max eligible messages to Consumer.
type ReceiveCmd struct {
	Consumer string `msgpack:"consumer"`
	Max      int    `msgpack:"max"`
	// Visibility is the lease length; 0 means the queue's VisibilityTimeout.
	Visibility time.Duration `msgpack:"visibility,omitempty"`
	// MaxBytes bounds the deliveries' size (DeliveryBytes summed): a
	// message that would take the answer past it stays ready for the next
	// receive, so no lease is granted that cannot be delivered in one
	// answer. The first message is always leased (the proposer's budget
	// must exceed the largest message plus DeliveryOverheadBytes). 0 means
	// no byte bound (entries written before the bound existed).
	MaxBytes int64 `msgpack:"max_bytes,omitempty"`
}

// Receipt names one delivery attempt of one message.
type Receipt struct {
	Seq     uint64 `msgpack:"seq"`
	Attempt uint32 `msgpack:"attempt"`
}

// AckCmd deletes the messages of current receipts.
type AckCmd struct {
	Receipts []Receipt `msgpack:"receipts"`
}

// ReceiveAckCmd acks the messages of Receipts (each fenced like an
// AckCmd's, answered per receipt) and then leases as Receive does, so a
// consumer settles what it handled and fetches more in one raft entry.
// Receipts may be empty (then it is a receive); a Receive the FSM would
// refuse refuses the whole command before any ack takes effect.
type ReceiveAckCmd struct {
	Receipts []Receipt  `msgpack:"receipts"`
	Receive  ReceiveCmd `msgpack:"receive"`
}

// ExtendItem moves one lease's deadline to now + Visibility.
type ExtendItem struct {
	Receipt    Receipt       `msgpack:"receipt"`
	Visibility time.Duration `msgpack:"visibility"`
}

// ExtendCmd extends leases.
type ExtendCmd struct {
	Items []ExtendItem `msgpack:"items"`
}

// NackItem gives one leased message back for a retry.
type NackItem struct {
	Receipt Receipt `msgpack:"receipt"`
	// ExplicitDelay selects Delay; otherwise the queue's backoff applies.
	ExplicitDelay bool          `msgpack:"explicit,omitempty"`
	Delay         time.Duration `msgpack:"delay,omitempty"`
	Reason        string        `msgpack:"reason,omitempty"`
	// Release gives back a delivery its consumer never used: the message
	// is ready again at once and the attempt is taken back (attempts goes
	// down by one, so the next delivery carries the same attempt number);
	// no backoff, no history entry, no dead-lettering, Reason ignored.
	// ExplicitDelay must be false.
	Release bool `msgpack:"release,omitempty"`
}

// NackCmd gives leased messages back for retries.
type NackCmd struct {
	Items []NackItem `msgpack:"items"`
}

// RejectItem dead-letters one leased message at once.
type RejectItem struct {
	Receipt Receipt `msgpack:"receipt"`
	Reason  string  `msgpack:"reason,omitempty"`
}

// RejectCmd dead-letters leased messages.
type RejectCmd struct {
	Items []RejectItem `msgpack:"items"`
}

// commandHeader is what precedes the payload in an encoded command.
type commandHeader struct {
	Type CommandType `msgpack:"t"`
	At   int64       `msgpack:"at"`
}

// EncodeCommand turns a command into log bytes: a header and the payload
// matching its type.
func EncodeCommand(c Command) ([]byte, error) {
	payload, err := c.payload()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(c.encodedBytesHint())
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(&commandHeader{Type: c.Type, At: c.At}); err != nil {
		return nil, fmt.Errorf("encode %s header: %w", c.Type, err)
	}
	if payload != nil {
		if err := enc.Encode(payload); err != nil {
			return nil, fmt.Errorf("encode %s payload: %w", c.Type, err)
		}
	}
	return buf.Bytes(), nil
}

// encodedBytesHint is at least the encoded size of a send command (a few
// bytes per message more; up to three times it for empty messages), so
// that its buffer is allocated once rather than doubled and copied on the
// way; 0 for other commands, which are small.
func (c Command) encodedBytesHint() int {
	if c.Type != CmdSend || c.Send == nil {
		return 0
	}
	const headBytes, perMessageBytes = 32, 24 // header, array lengths; field and length prefixes
	n := headBytes
	for i := range c.Send.Messages {
		m := &c.Send.Messages[i]
		n += perMessageBytes + len(m.ID) + len(m.Group) + len(m.Body) + len(m.stored)
		for k, v := range m.Headers {
			n += len(k) + len(v) + 10
		}
	}
	return n
}

func (c Command) payload() (any, error) {
	var p any
	var ok bool
	switch c.Type {
	case CmdSend:
		p, ok = c.Send, c.Send != nil
	case CmdReceive:
		p, ok = c.Receive, c.Receive != nil
	case CmdAck:
		p, ok = c.Ack, c.Ack != nil
	case CmdExtend:
		p, ok = c.Extend, c.Extend != nil
	case CmdNack:
		p, ok = c.Nack, c.Nack != nil
	case CmdReject:
		p, ok = c.Reject, c.Reject != nil
	case CmdRedrive:
		p, ok = c.Redrive, c.Redrive != nil
	case CmdDeleteDead:
		p, ok = c.DeleteDead, c.DeleteDead != nil
	case CmdSetConfig:
		p, ok = c.SetConfig, c.SetConfig != nil
	case CmdReceiveAck:
		p, ok = c.ReceiveAck, c.ReceiveAck != nil
	case CmdPause:
		p, ok = c.Pause, c.Pause != nil
	case CmdDeleteMessage:
		p, ok = c.Delete, c.Delete != nil
	case CmdDeleteMessages:
		p, ok = c.DeleteMany, c.DeleteMany != nil
	case CmdSetSchedule:
		p, ok = c.Schedule, c.Schedule != nil
	case CmdDeleteSchedule:
		p, ok = c.Unschedule, c.Unschedule != nil
	case CmdFireSchedule:
		p, ok = c.Fire, c.Fire != nil
	case CmdTick, CmdPurge, CmdClockResync, CmdPurgeAll:
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: unknown command type %d", ErrInvalidArgument, c.Type)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s command without its payload", ErrInvalidArgument, c.Type)
	}
	return p, nil
}

// DecodeCommand is the inverse of EncodeCommand. It fails on unknown types,
// malformed bytes and trailing garbage. The command shares no memory with
// data.
func DecodeCommand(data []byte) (Command, error) {
	c, err := decodeCommand(data)
	if err != nil {
		return Command{}, err
	}
	if c.Send != nil {
		for i := range c.Send.Messages {
			if err := c.Send.Messages[i].unpack(); err != nil {
				return Command{}, fmt.Errorf("decode send: message %d: %w", i, err)
			}
		}
	}
	return c, nil
}

// unpack turns a stored payload into Headers and Body (copies).
func (m *NewMessage) unpack() error {
	if m.stored == nil {
		return nil
	}
	h, body, err := decodePayload(m.stored)
	if err != nil {
		return err
	}
	m.Headers, m.Body, m.stored, m.storedAt = h, bytes.Clone(body), nil, 0
	return nil
}

// decodeCommand is DecodeCommand leaving each message of a send in its
// stored form, taken in place from data: the messages alias data.
func decodeCommand(data []byte) (Command, error) {
	r := bytes.NewReader(data)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(r)
	var h commandHeader
	if err := dec.Decode(&h); err != nil {
		return Command{}, fmt.Errorf("decode command header: %w", err)
	}
	c := Command{Type: h.Type, At: h.At}
	var target any
	switch h.Type {
	case CmdSend:
		c.Send = new(SendCmd)
		if err := c.Send.decode(dec, &entrySource{r: r, data: data}); err != nil {
			return Command{}, fmt.Errorf("decode %s payload: %w", h.Type, err)
		}
	case CmdReceive:
		c.Receive = new(ReceiveCmd)
		target = c.Receive
	case CmdAck:
		c.Ack = new(AckCmd)
		target = c.Ack
	case CmdExtend:
		c.Extend = new(ExtendCmd)
		target = c.Extend
	case CmdNack:
		c.Nack = new(NackCmd)
		target = c.Nack
	case CmdReject:
		c.Reject = new(RejectCmd)
		target = c.Reject
	case CmdRedrive:
		c.Redrive = new(DeadFilter)
		target = c.Redrive
	case CmdDeleteDead:
		c.DeleteDead = new(DeadFilter)
		target = c.DeleteDead
	case CmdSetConfig:
		c.SetConfig = new(QueueConfig)
		target = c.SetConfig
	case CmdReceiveAck:
		c.ReceiveAck = new(ReceiveAckCmd)
		if err := c.ReceiveAck.decode(dec, &entrySource{r: r, data: data}); err != nil {
			return Command{}, fmt.Errorf("decode %s payload: %w", h.Type, err)
		}
	case CmdPause:
		c.Pause = new(PauseCmd)
		target = c.Pause
	case CmdDeleteMessage:
		c.Delete = new(DeleteMessageCmd)
		target = c.Delete
	case CmdDeleteMessages:
		c.DeleteMany = new(DeleteMessagesCmd)
		target = c.DeleteMany
	case CmdSetSchedule:
		c.Schedule = new(ScheduleSpec)
		target = c.Schedule
	case CmdDeleteSchedule:
		c.Unschedule = new(DeleteScheduleCmd)
		target = c.Unschedule
	case CmdFireSchedule:
		c.Fire = new(FireScheduleCmd)
		target = c.Fire
	case CmdTick, CmdPurge, CmdClockResync, CmdPurgeAll:
	default:
		return Command{}, fmt.Errorf("decode command: unknown type %d", h.Type)
	}
	if target != nil {
		if err := checkMsgpackCounts(data[len(data)-r.Len():]); err != nil {
			return Command{}, fmt.Errorf("decode %s payload: %w", h.Type, err)
		}
		if err := dec.Decode(target); err != nil {
			return Command{}, fmt.Errorf("decode %s payload: %w", h.Type, err)
		}
	}
	if r.Len() != 0 {
		return Command{}, fmt.Errorf("decode %s: %d trailing bytes", h.Type, r.Len())
	}
	return c, nil
}
