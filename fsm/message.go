package fsm

import "unsafe"

// msgState is where a message is in its life.
type msgState uint8

const (
	stateReady    msgState = iota + 1 // visible and not leased
	stateDelayed                      // invisible until visibleAt
	stateInFlight                     // leased until visibleAt
	stateDead                         // dead-lettered
)

// eligibility says which eligible index holds a message, if any.
type eligibility uint8

const (
	notEligible  eligibility = iota
	eligibleFIFO             // sent and eligible at once: found by the FSM's fresh cursor
	eligibleTree             // in returned: back from a retry, delay or group wait
)

// message is the RAM part of a message; its headers and body (the stored
// payload) are in the body store at pos, a location only the store
// interprets. The struct is kept small on purpose: a partition may hold
// millions of them (see BenchmarkFSM_MemoryPerMessage). It fits the 80-byte
// allocation class; a field more spills it into the 96-byte one.
type message struct {
	seq        uint64
	idData     *byte // the id's bytes; see id
	group      *group
	enqueuedAt int64
	visibleAt  int64 // delayed: when it becomes ready; in flight: the deadline
	pos        Loc
	stored     uint32 // bytes in the body store
	crc        uint32 // CRC-32C of the stored bytes, for digests
	attempts   uint32
	idLen      uint16 // the id's length (at most IDBytesMax)
	state      msgState
	eligible   eligibility
	info       *deliveryInfo // nil until first delivery
}

// id returns the message id. The id is held as a pointer to the bytes of
// an immutable string and a length rather than as a string header, which
// saves the 6 bytes that keep the struct in the 80-byte class.
func (m *message) id() string { return unsafe.String(m.idData, int(m.idLen)) }

// setID sets the message id; id must be at most IDBytesMax bytes.
func (m *message) setID(id string) {
	if len(id) > IDBytesMax {
		panic("fsm: message id longer than IDBytesMax")
	}
	m.idData, m.idLen = unsafe.StringData(id), uint16(len(id))
}

// DeadReason says why a message was dead-lettered.
type DeadReason uint8

// Dead-letter reasons. Append-only.
const (
	DeadRejected         DeadReason = iota + 1 // a consumer rejected it
	DeadRetriesExhausted                       // nacked on its last allowed receive
	DeadLeaseExpired                           // its last allowed lease expired
)

// String names the reason.
func (r DeadReason) String() string {
	switch r {
	case DeadRejected:
		return "rejected"
	case DeadRetriesExhausted:
		return "retries exhausted"
	case DeadLeaseExpired:
		return "lease expired"
	}
	return "unknown"
}

// EventKind names an entry of a message's failure history.
type EventKind uint8

// Event kinds. Append-only.
const (
	EventNacked       EventKind = iota + 1 // a consumer asked for a retry
	EventLeaseExpired                      // the lease ran out
	EventRejected                          // a consumer rejected it
	EventRedriven                          // an operator moved it back from the dead letters
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
	Kind     EventKind `msgpack:"kind"`
	At       int64     `msgpack:"at"`
	Attempt  uint32    `msgpack:"attempt"`
	Consumer string    `msgpack:"consumer,omitempty"`
	Reason   string    `msgpack:"reason,omitempty"`
}

// deliveryInfo is what a message gathers once delivered. The history slice
// is never modified in place, so a snapshot may share it.
type deliveryInfo struct {
	consumer         string
	firstEnqueuedAt  int64 // set on redrive: when the message was first sent
	firstDeliveredAt int64
	lastDeliveredAt  int64
	history          []Event
	deadAt           int64
	deadReason       DeadReason
	deadText         string
}

// addEvent appends e, keeping the newest HistoryMax events. It always builds
// a new slice so that snapshots sharing the old one stay unchanged.
func (in *deliveryInfo) addEvent(e Event) {
	keep := in.history
	if len(keep) >= HistoryMax {
		keep = keep[len(keep)-HistoryMax+1:]
	}
	h := make([]Event, len(keep), len(keep)+1)
	copy(h, keep)
	in.history = append(h, e)
}

// group is the FIFO of a message group's unfinished messages in seq order.
// Only members[0], the head, may ever be leased.
type group struct {
	name    string
	members []*message
	head    int // index of the first member in members
}

func (g *group) first() *message {
	if g.head < len(g.members) {
		return g.members[g.head]
	}
	return nil
}

func (g *group) size() int { return len(g.members) - g.head }

func (g *group) push(m *message) { g.members = append(g.members, m) }

// popHead drops the head, compacting the slice when half of it is spent.
func (g *group) popHead() {
	g.members[g.head] = nil
	g.head++
	if g.head == len(g.members) {
		g.members, g.head = g.members[:0], 0
	} else if g.head >= 32 && g.head*2 >= len(g.members) {
		n := copy(g.members, g.members[g.head:])
		clear(g.members[n:])
		g.members, g.head = g.members[:n], 0
	}
}

// remove deletes m from anywhere in the group (purge, retention).
func (g *group) remove(m *message) {
	for i := g.head; i < len(g.members); i++ {
		if g.members[i] == m {
			if i == g.head {
				g.popHead()
				return
			}
			copy(g.members[i:], g.members[i+1:])
			g.members[len(g.members)-1] = nil
			g.members = g.members[:len(g.members)-1]
			return
		}
	}
	panic("fsm: message " + m.id() + " missing from its group " + g.name)
}
