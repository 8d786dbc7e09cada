package fsm

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// FindMax is the most messages Find returns for one id: ids are unique
// within the dedup window, but an id sent again after it, or redriven
// copies, may share one.
const FindMax = 16

// MessageState names where a message stands, for Find.
type MessageState string

// Message states as Find reports them.
const (
	StateReady   MessageState = "ready"
	StateDelayed MessageState = "delayed"
	StateLeased  MessageState = "leased"
	StateDead    MessageState = "dead"
)

// MessageInfo is one message as Find reports it: where it stands, its
// delivery attempts, its lease (leased: the consumer and the deadline),
// when it becomes visible (delayed), why it died (dead), and its failure
// history. Times are Unix nanoseconds of the partition clock.
type MessageInfo struct {
	Seq        uint64
	ID         string
	Group      string
	State      MessageState
	Attempts   uint32
	EnqueuedAt int64
	// VisibleAt is when a delayed message becomes ready, or when a leased
	// one's lease runs out; 0 otherwise.
	VisibleAt int64
	// Consumer is the consumer that received it last (leased: holds it).
	Consumer string
	// Dead is set for a dead letter.
	Dead    *DeadLetter
	History []Event
	// Priority is the message's priority, 0..PriorityMax.
	Priority uint8
}

// Find returns the messages with this id in any state, live ones first,
// each in seq order, at most FindMax. It walks every message of the
// partition: an operator's lookup, not a request path.
func (f *FSM) Find(id string) []MessageInfo {
	var out []MessageInfo
	var buf [ulidLen]byte
	f.table.ascend(func(m *message) bool {
		if m.idInto(&buf) == id {
			out = append(out, f.infoOf(m))
		}
		return len(out) < FindMax
	})
	f.dead.Ascend(func(m *message) bool {
		if len(out) >= FindMax {
			return false
		}
		if m.idInto(&buf) == id {
			d := deadView(m)
			out = append(out, MessageInfo{Seq: m.seq, ID: d.ID, Group: d.Group, State: StateDead, Attempts: m.attempts,
				EnqueuedAt: m.enqueuedAt, Consumer: d.LastConsumer, Dead: &d, History: d.History, Priority: d.Priority})
		}
		return true
	})
	return out
}

func (f *FSM) infoOf(m *message) MessageInfo {
	in := MessageInfo{Seq: m.seq, ID: m.id(), Attempts: m.attempts, EnqueuedAt: m.enqueuedAt, Priority: m.priority()}
	if m.group != nil {
		in.Group = m.group.name
	}
	in.State, in.VisibleAt = liveState(m)
	if m.info != nil {
		in.Consumer, in.History = m.info.consumer, slices.Clone(m.info.history)
	}
	return in
}

// liveState names a live m's state, with when a delayed one becomes
// ready or a leased one's lease runs out (0 for a ready one).
func liveState(m *message) (MessageState, int64) {
	switch m.state {
	case stateDelayed:
		return StateDelayed, m.visibleAt
	case stateInFlight:
		return StateLeased, m.visibleAt
	}
	return StateReady, 0
}

// DeleteMessageCmd deletes one message, named by its seq and id, in any
// state (CmdDeleteMessage): a leased one's later ack, extend, nack or
// reject gets ErrNotFound. With Undelivered it deletes only a message
// never delivered (a cancel): ready or delayed at attempt 0.
type DeleteMessageCmd struct {
	Seq         uint64 `msgpack:"seq"`
	ID          string `msgpack:"id"`
	Undelivered bool   `msgpack:"undelivered,omitempty"`
}

// Validate checks the command's fields.
func (c *DeleteMessageCmd) Validate() error {
	if c.Seq == 0 || c.ID == "" || len(c.ID) > IDBytesMax || !utf8.ValidString(c.ID) {
		return fmt.Errorf("%w: delete needs a seq and an id of 1..%d bytes of UTF-8", ErrInvalidArgument, IDBytesMax)
	}
	return nil
}

// applyDeleteMessage applies a CmdDeleteMessage; it changes nothing when
// the seq does not hold that id, or (Undelivered) the message was
// delivered already.
func (f *FSM) applyDeleteMessage(c *DeleteMessageCmd) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if m := f.table.get(c.Seq); m != nil && m.id() == c.ID {
		if c.Undelivered && (m.attempts > 0 || m.state == stateInFlight) {
			return fmt.Errorf("%w: message %s was delivered already (attempt %d): not cancelled", ErrNotFound, c.ID, m.attempts)
		}
		f.finish(m)
		f.counters.Purged++
		return nil
	}
	if d := f.deadBySeq(c.Seq); d != nil && d.id() == c.ID && !c.Undelivered {
		f.detach(d)
		f.forgetBody(d)
		f.counters.DeadDeleted++
		return nil
	}
	return fmt.Errorf("%w: no message %s at seq %d", ErrNotFound, c.ID, c.Seq)
}
