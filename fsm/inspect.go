package fsm

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// StateSet is a set of live message states (ready, delayed, leased), as a
// peek or a bulk delete selects them. The zero set means "the default" of
// the operation that takes it (see PeekFilter.States and
// DeleteMessagesCmd.States).
type StateSet uint8

// Members of a StateSet.
const (
	StatesReady   StateSet = 1 << iota // visible and not leased
	StatesDelayed                      // invisible until a delay or backoff ends
	StatesLeased                       // held by a consumer
	// StatesLive is every live state; dead letters are never part of a
	// StateSet (they have their own filter, DeadFilter).
	StatesLive = StatesReady | StatesDelayed | StatesLeased
)

// ParseStates turns state names ("ready", "delayed", "leased" or "all")
// into a set; an empty list is the empty set. An unknown name is
// ErrInvalidArgument.
func ParseStates(names []string) (StateSet, error) {
	var s StateSet
	for _, n := range names {
		switch MessageState(n) {
		case StateReady:
			s |= StatesReady
		case StateDelayed:
			s |= StatesDelayed
		case StateLeased:
			s |= StatesLeased
		case "all":
			s |= StatesLive
		default:
			return 0, fmt.Errorf("%w: message state %q (want ready, delayed, leased or all)", ErrInvalidArgument, n)
		}
	}
	return s, nil
}

// Names lists the set's states in the order ready, delayed, leased.
func (s StateSet) Names() []string {
	var out []string
	for _, st := range []struct {
		bit  StateSet
		name MessageState
	}{{StatesReady, StateReady}, {StatesDelayed, StateDelayed}, {StatesLeased, StateLeased}} {
		if s&st.bit != 0 {
			out = append(out, string(st.name))
		}
	}
	return out
}

// String renders the set as "ready,leased".
func (s StateSet) String() string { return strings.Join(s.Names(), ",") }

// Validate refuses bits outside StatesLive.
func (s StateSet) Validate() error {
	if s&^StatesLive != 0 {
		return fmt.Errorf("%w: state set %#x (want bits of %#x)", ErrInvalidArgument, uint8(s), uint8(StatesLive))
	}
	return nil
}

// has reports whether m's state is in the set.
func (s StateSet) has(m *message) bool {
	switch m.state {
	case stateReady:
		return s&StatesReady != 0
	case stateDelayed:
		return s&StatesDelayed != 0
	case stateInFlight:
		return s&StatesLeased != 0
	}
	return false
}

// MessageRef names one live message by its seq and id.
type MessageRef struct {
	Seq uint64 `msgpack:"seq"`
	ID  string `msgpack:"id"`
}

// DeleteMessagesCmd deletes up to BatchMax live messages, each named by
// its seq and id, that are in one of States at the time the command
// applies (CmdDeleteMessages); 0 States means any live state. A message
// that is gone, holds another id at that seq, or stands in another state
// is skipped: the command never deletes a message outside its states, and
// never a dead letter. A leased message's later ack, extend, nack or
// reject gets ErrNotFound, as after CmdDeleteMessage.
//
// It is the replicated half of a bulk delete: the proposer selects the
// messages with a Peek (whose other criteria — group, headers, age — no
// longer change once true) and names them here.
type DeleteMessagesCmd struct {
	Items  []MessageRef `msgpack:"items"`
	States StateSet     `msgpack:"states,omitempty"`
}

// Validate checks the command's fields: 1..BatchMax items, each with a
// seq and an id of 1..IDBytesMax bytes of UTF-8, and a valid state set.
func (c *DeleteMessagesCmd) Validate() error {
	if err := CheckBatch(len(c.Items)); err != nil {
		return err
	}
	for i, it := range c.Items {
		if it.Seq == 0 || it.ID == "" || len(it.ID) > IDBytesMax || !utf8.ValidString(it.ID) {
			return fmt.Errorf("%w: delete item %d needs a seq and an id of 1..%d bytes of UTF-8", ErrInvalidArgument, i, IDBytesMax)
		}
	}
	return c.States.Validate()
}

// applyDeleteMessages applies a CmdDeleteMessages and counts the
// messages deleted.
func (f *FSM) applyDeleteMessages(c *DeleteMessagesCmd) (int, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	states := c.States
	if states == 0 {
		states = StatesLive
	}
	n := 0
	for _, it := range c.Items {
		m := f.table.get(it.Seq)
		if m == nil || !states.has(m) || m.id() != it.ID {
			continue
		}
		f.finish(m)
		f.counters.Purged++
		n++
	}
	return n, nil
}
