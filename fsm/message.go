package fsm

import (
	"encoding/binary"
	"unsafe"
)

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
	idData     *byte // the id's bytes, or its 16 packed bytes; see id
	group      *group
	enqueuedAt int64
	visibleAt  int64 // delayed: when it becomes ready; in flight: the deadline
	pos        Loc
	stored     uint32 // bytes in the body store
	crc        uint32 // CRC-32C of the stored bytes, for digests
	attempts   uint32
	idLen      uint16 // the id's length (at most IDBytesMax) or idPacked|26, and the priority (see priority)
	state      msgState
	eligible   eligibility
	info       *deliveryInfo // nil until first delivery
}

// idLen holds, besides the id's length and the idPacked flag, the
// message's priority in bits 11-14: a priority is set once, with the id,
// and a field of its own would spill the struct into the next allocation
// class.
const (
	idLenMask     = 1<<idPrioShift - 1 // the length bits (IDBytesMax < 2048)
	idPrioShift   = 11
	idPrioMask    = 0xf << idPrioShift
	_             = uint(idLenMask - IDBytesMax)
	_             = uint(15 - PriorityMax) // a priority fits in four bits
	idLenAndFlags = idLenMask | idPacked
)

// priority returns the message's priority, 0..PriorityMax.
func (m *message) priority() uint8 { return uint8((m.idLen & idPrioMask) >> idPrioShift) }

// setPriority sets the message's priority; p must be at most PriorityMax.
func (m *message) setPriority(p uint8) {
	if p > PriorityMax {
		panic("fsm: priority above PriorityMax")
	}
	m.idLen = m.idLen&idLenAndFlags | uint16(p)<<idPrioShift
}

// Ids in the layout the Ferry client makes (a ULID: 26 characters of
// Crockford base32, upper case, carrying 128 bits) are held as those 16
// bytes, in the 16-byte allocation class instead of the 32-byte one that
// the string takes; idLen then has idPacked set. Any other id is held as
// the bytes of its string.
const (
	idPacked   = 1 << 15
	ulidLen    = 26
	ulidBytes  = 16
	ulidDigits = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)

// ulidValue maps a byte to its value as an upper-case Crockford digit, or
// 0xff.
var ulidValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for v, c := range []byte(ulidDigits) {
		t[c] = byte(v)
	}
	return t
}()

// packULID returns the 128 bits that id spells, if id is exactly how
// unpackULID would spell them.
func packULID(id string) (b [ulidBytes]byte, ok bool) {
	if len(id) != ulidLen || ulidValue[id[0]] > 7 { // the first digit holds 3 bits
		return b, false
	}
	var hi, lo uint64
	for i := 0; i < ulidLen; i++ {
		v := ulidValue[id[i]]
		if v == 0xff {
			return b, false
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(v)
	}
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return b, true
}

// unpackULID writes the 26 digits of b into out.
func unpackULID(b *[ulidBytes]byte, out *[ulidLen]byte) {
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	for i := ulidLen - 1; i >= 0; i-- {
		out[i] = ulidDigits[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
}

// id returns the message id. A packed id is spelled out into a new string.
func (m *message) id() string {
	if m.idLen&idPacked == 0 {
		return unsafe.String(m.idData, int(m.idLen&idLenMask))
	}
	var buf [ulidLen]byte
	return string(m.idInto(&buf))
}

// idInto returns the message id without allocating: a packed id is spelled
// into buf, and the string returned then shares buf's memory, so it is
// valid only while buf is neither changed nor gone.
func (m *message) idInto(buf *[ulidLen]byte) string {
	if m.idLen&idPacked == 0 {
		return unsafe.String(m.idData, int(m.idLen&idLenMask))
	}
	unpackULID((*[ulidBytes]byte)(unsafe.Pointer(m.idData)), buf)
	return unsafe.String(&buf[0], ulidLen)
}

// idBytes returns the length of the message id.
func (m *message) idBytes() int {
	if m.idLen&idPacked != 0 {
		return ulidLen
	}
	return int(m.idLen & idLenMask)
}

// setID sets the message id; id must be at most IDBytesMax bytes. The id
// is held as a pointer and a length rather than as a string header, which
// saves the 6 bytes that keep the struct in the 80-byte class.
func (m *message) setID(id string) {
	if len(id) > IDBytesMax {
		panic("fsm: message id longer than IDBytesMax")
	}
	prio := m.idLen & idPrioMask
	if b, ok := packULID(id); ok {
		p := new([ulidBytes]byte)
		*p = b
		m.idData, m.idLen = &p[0], idPacked|ulidLen|prio
		return
	}
	m.idData, m.idLen = unsafe.StringData(id), uint16(len(id))|prio
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
	// served is the group's lane stamp (fair.go): when it last got a
	// delivery, or was created, while delivery was fair.
	served uint64
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
