package fsm

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Limits of a peek. A peek reads state without changing it, so they bound
// the work and the answer of one read, not the replicated contract.
const (
	// PeekMax is the most messages one peek returns.
	PeekMax = 1000
	// PeekScanMax is the most live messages one peek looks at; a partition
	// with many leased or delayed messages ahead of the ready ones answers
	// in pages (see PeekResult.Next).
	PeekScanMax = 100_000
	// PeekReadMax is the most stored payloads one peek with a header
	// filter reads to test them; past it the peek answers in pages.
	PeekReadMax = 2_000
	// PeekAgeMax is the largest minimum age a peek accepts.
	PeekAgeMax = 10 * 365 * 24 * time.Hour
)

// PeekFilter selects the live messages a peek returns: those in States
// that match every criterion set.
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
	// States selects the states shown; 0 means StatesReady only.
	States StateSet
	// Group, when set, selects the messages of this group (exact).
	Group string
	// HeaderKey, when set, selects the messages whose header HeaderKey
	// is exactly HeaderValue (which may be empty).
	HeaderKey, HeaderValue string
	// MinAge, when set, selects the messages enqueued at least this long
	// before the partition clock (the time of the last command applied).
	MinAge time.Duration
	// NoBodies leaves Headers and Body out of the answer; MaxBytes then
	// bounds nothing (the count does).
	NoBodies bool
}

// Peeked is one live message as a peek shows it.
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
	// State is where the message stands: ready, delayed or leased.
	State MessageState
	// VisibleAt is when a delayed message becomes ready, or when a leased
	// one's lease runs out (Unix nanoseconds); 0 for a ready one.
	VisibleAt int64
	// Consumer holds a leased message (the one that received it last,
	// for others that were delivered before).
	Consumer string
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

// Peek returns live messages in the filter's states (ready only by
// default) that match its criteria, with their headers and bodies, oldest
// first, without leasing them: it changes nothing. Dead letters are never
// shown (see PeekDead).
func (f *FSM) Peek(pf PeekFilter) (PeekResult, error) {
	if err := pf.Validate(); err != nil {
		return PeekResult{}, err
	}
	if pf.States == 0 {
		pf.States = StatesReady
	}
	cutoff := int64(math.MaxInt64)
	if pf.MinAge > 0 {
		cutoff = f.clock - int64(pf.MinAge)
	}
	var out PeekResult
	var readErr error
	scanned, reads, bytes := 0, 0, 0
	f.table.ascendFrom(pf.AfterSeq+1, func(m *message) bool {
		if len(out.Messages) == pf.Max || scanned == PeekScanMax || reads == PeekReadMax {
			out.Next = m.seq - 1
			return false
		}
		scanned++
		if !pf.States.has(m) || m.enqueuedAt > cutoff || (pf.Group != "" && (m.group == nil || m.group.name != pf.Group)) {
			return true
		}
		p, err := f.peeked(m, pf.HeaderKey != "" || !pf.NoBodies)
		if err != nil {
			readErr = err
			return false
		}
		if pf.HeaderKey != "" {
			if v, ok := p.Headers[pf.HeaderKey]; !ok || v != pf.HeaderValue {
				reads++ // read for nothing: bounded apart from the answer
				return true
			}
		}
		if pf.NoBodies {
			p.Headers, p.Body = nil, nil
		} else {
			if pf.MaxBytes > 0 && len(out.Messages) > 0 && bytes+int(m.stored) > pf.MaxBytes {
				out.Next = m.seq - 1 // the byte bound: m starts the next page
				return false
			}
			bytes += int(m.stored)
		}
		out.Messages = append(out.Messages, p)
		return true
	})
	if readErr != nil {
		return PeekResult{}, readErr
	}
	return out, nil
}

// peeked describes m, reading its headers and body when read is set.
func (f *FSM) peeked(m *message, read bool) (Peeked, error) {
	p := Peeked{Seq: m.seq, ID: m.id(), EnqueuedAt: m.enqueuedAt, Attempts: m.attempts, Priority: m.priority()}
	p.State, p.VisibleAt = liveState(m)
	if m.state == stateInFlight && m.info != nil {
		p.Consumer = m.info.consumer
	}
	if m.group != nil {
		p.Group, p.Blocked = m.group.name, m.group.first() != m
	}
	if !read {
		return p, nil
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

// Validate checks a peek's bounds and criteria: 1 <= Max <= PeekMax,
// MaxBytes >= 0, a valid state set, a group of at most GroupBytesMax and
// a header key and value of at most 65535 bytes of UTF-8 (a value only
// with a key), and 0 <= MinAge <= PeekAgeMax.
func (pf PeekFilter) Validate() error {
	switch {
	case pf.Max < 1 || pf.Max > PeekMax || pf.MaxBytes < 0:
		return fmt.Errorf("%w: peek max %d (want 1..%d), max bytes %d", ErrInvalidArgument, pf.Max, PeekMax, pf.MaxBytes)
	case len(pf.Group) > GroupBytesMax || !utf8.ValidString(pf.Group):
		return fmt.Errorf("%w: peek group filter must be at most %d bytes of UTF-8", ErrInvalidArgument, GroupBytesMax)
	case len(pf.HeaderKey) > 0xffff || len(pf.HeaderValue) > 0xffff ||
		!utf8.ValidString(pf.HeaderKey) || !utf8.ValidString(pf.HeaderValue):
		return fmt.Errorf("%w: peek header filter must be at most 65535 bytes of UTF-8 per key and value", ErrInvalidArgument)
	case pf.HeaderKey == "" && pf.HeaderValue != "":
		return fmt.Errorf("%w: peek header filter has a value but no key", ErrInvalidArgument)
	case pf.MinAge < 0 || pf.MinAge > PeekAgeMax:
		return fmt.Errorf("%w: peek minimum age %v (want 0..%v)", ErrInvalidArgument, pf.MinAge, PeekAgeMax)
	}
	return pf.States.Validate()
}
