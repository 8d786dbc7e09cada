package fsm

import "fmt"

// Limits of a peek. A peek reads state without changing it, so they bound
// the work and the answer of one read, not the replicated contract.
const (
	// PeekMax is the most messages one peek returns.
	PeekMax = 1000
	// PeekScanMax is the most live messages one peek looks at; a partition
	// with many leased or delayed messages ahead of the ready ones answers
	// in pages (see PeekResult.Next).
	PeekScanMax = 100_000
)

// PeekFilter selects the ready messages a peek returns.
type PeekFilter struct {
	// Max is the most messages to return, 1..PeekMax.
	Max int
	// MaxBytes bounds the stored bytes (headers and body) of the messages
	// returned; the first message is returned even when it alone is
	// bigger, so that paging always moves on. 0 means no byte bound.
	MaxBytes int
	// AfterSeq resumes a peek after this sequence number (the Next of the
	// previous page).
	AfterSeq uint64
}

// Peeked is one ready message as a peek shows it.
type Peeked struct {
	Seq        uint64
	ID         string
	Group      string
	Headers    map[string]string
	Body       []byte
	EnqueuedAt int64 // Unix nanoseconds
	// Attempts counts the deliveries so far (0 for a message never
	// received).
	Attempts uint32
	// Blocked is set for a message of a group that waits behind an
	// earlier message of its group: a receive does not get it yet.
	Blocked bool
	// Priority is the message's priority, 0..PriorityMax.
	Priority uint8
}

// PeekResult is the answer of a peek.
type PeekResult struct {
	// Messages are the ready messages, oldest (lowest seq) first. A
	// receive leases the ones not Blocked in this order within a
	// priority, higher priorities first (see priority.go).
	Messages []Peeked
	// Next, when not 0, is the AfterSeq that continues the listing: the
	// peek stopped at a count, byte or scan bound before the end of the
	// partition.
	Next uint64
}

// Peek returns ready messages with their headers and bodies, oldest
// first, without leasing them: it changes nothing. Delayed, leased and
// dead-lettered messages are not shown.
func (f *FSM) Peek(pf PeekFilter) (PeekResult, error) {
	if err := pf.Validate(); err != nil {
		return PeekResult{}, err
	}
	var out PeekResult
	var readErr error
	scanned, bytes := 0, 0
	f.table.ascendFrom(pf.AfterSeq+1, func(m *message) bool {
		if len(out.Messages) == pf.Max || scanned == PeekScanMax ||
			(pf.MaxBytes > 0 && len(out.Messages) > 0 && bytes+int(m.stored) > pf.MaxBytes) {
			out.Next = m.seq - 1
			return false
		}
		scanned++
		if m.state != stateReady {
			return true
		}
		p, err := f.peeked(m)
		if err != nil {
			readErr = err
			return false
		}
		bytes += int(m.stored)
		out.Messages = append(out.Messages, p)
		return true
	})
	if readErr != nil {
		return PeekResult{}, readErr
	}
	return out, nil
}

// peeked reads m's headers and body.
func (f *FSM) peeked(m *message) (Peeked, error) {
	p := Peeked{Seq: m.seq, ID: m.id(), EnqueuedAt: m.enqueuedAt, Attempts: m.attempts, Priority: m.priority()}
	if m.group != nil {
		p.Group = m.group.name
		p.Blocked = m.group.first() != m
	}
	_, payload, err := f.store.Read(m.pos)
	if err != nil {
		return Peeked{}, fmt.Errorf("read message %d: %w", m.seq, err)
	}
	if p.Headers, p.Body, err = decodePayload(payload); err != nil {
		return Peeked{}, fmt.Errorf("decode message %d: %w", m.seq, err)
	}
	return p, nil
}
