package fsm

import (
	"fmt"
	"slices"
	"strings"
)

// DeadFilter selects dead letters for listing, redrive and deletion. Zero
// fields select everything; every set field must match, Seqs included: a
// sequence number named in Seqs is selected only if the other fields match
// it too.
type DeadFilter struct {
	// Seqs, when set, selects exactly these sequence numbers.
	Seqs []uint64 `msgpack:"seqs,omitempty"`
	// Reason, when set, selects one dead-letter reason.
	Reason DeadReason `msgpack:"reason,omitempty"`
	// Group, when set, selects one group.
	Group string `msgpack:"group,omitempty"`
	// FromAt and ToAt bound the dead-lettering time to [FromAt, ToAt), Unix
	// nanoseconds; 0 leaves that side open.
	FromAt int64 `msgpack:"from,omitempty"`
	ToAt   int64 `msgpack:"to,omitempty"`
	// AfterSeq resumes a listing after this sequence number.
	AfterSeq uint64 `msgpack:"after,omitempty"`
	// Limit bounds how many are handled; 0 means DeadListMax.
	Limit int `msgpack:"limit,omitempty"`
	// Text, when set, selects dead letters whose reason text (the
	// consumer's reason for the reject or last nack, or the broker's
	// "lease expired") contains it, case-sensitively; at most
	// ReasonBytesMax bytes.
	Text string `msgpack:"text,omitempty"`
}

// DeadLetter is the operator's view of one dead-lettered message.
type DeadLetter struct {
	Seq     uint64
	ID      string
	Group   string
	Headers map[string]string // only from PeekDead
	Body    []byte            // only from PeekDead
	// Bytes is the stored size of headers and body.
	Bytes            int
	Attempts         uint32
	FirstEnqueuedAt  int64
	EnqueuedAt       int64
	FirstDeliveredAt int64
	LastDeliveredAt  int64
	DeadAt           int64
	Reason           DeadReason
	ReasonText       string
	LastConsumer     string
	History          []Event
	Priority         uint8 // 0..PriorityMax, kept through a redrive
}

func (d DeadFilter) limit() int {
	if d.Limit == 0 {
		return DeadListMax
	}
	return d.Limit
}

func (d DeadFilter) matches(m *message) bool {
	switch {
	case d.Reason != 0 && m.info.deadReason != d.Reason:
		return false
	case d.Group != "" && (m.group == nil || m.group.name != d.Group):
		return false
	case d.FromAt != 0 && m.info.deadAt < d.FromAt:
		return false
	case d.ToAt != 0 && m.info.deadAt >= d.ToAt:
		return false
	case d.Text != "" && !strings.Contains(m.info.deadText, d.Text):
		return false
	}
	return m.seq > d.AfterSeq
}

func (f *FSM) deadBySeq(seq uint64) *message {
	m, _ := f.dead.Get(&message{seq: seq})
	return m
}

// selectDead returns the dead letters the filter selects, in seq order.
func (f *FSM) selectDead(d DeadFilter) []*message {
	var out []*message
	limit := d.limit()
	if len(d.Seqs) > 0 {
		seqs := slices.Clone(d.Seqs)
		slices.Sort(seqs)
		for _, s := range slices.Compact(seqs) {
			if m := f.deadBySeq(s); m != nil && d.matches(m) && len(out) < limit {
				out = append(out, m)
			}
		}
		return out
	}
	f.dead.AscendGreaterOrEqual(&message{seq: d.AfterSeq + 1}, func(m *message) bool {
		if d.matches(m) {
			out = append(out, m)
		}
		return len(out) < limit
	})
	return out
}

// ListDead returns the dead letters the filter selects, without bodies.
func (f *FSM) ListDead(d DeadFilter) ([]DeadLetter, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	ms := f.selectDead(d)
	out := make([]DeadLetter, len(ms))
	for i, m := range ms {
		out[i] = deadView(m)
	}
	return out, nil
}

// PeekDead is ListDead with headers and bodies, within a byte budget:
// once the letters taken hold maxBytes stored bytes, the next one that
// would pass it ends the page and more is set (the caller resumes after
// the last letter returned). The first letter is returned even when it
// alone is bigger, so that paging always moves on. maxBytes 0 means no
// byte bound.
func (f *FSM) PeekDead(d DeadFilter, maxBytes int) (letters []DeadLetter, more bool, err error) {
	if err := d.Validate(); err != nil {
		return nil, false, err
	}
	if maxBytes < 0 {
		return nil, false, fmt.Errorf("%w: dead peek byte budget %d is negative", ErrInvalidArgument, maxBytes)
	}
	ms := f.selectDead(d)
	bytes := 0
	for i, m := range ms {
		if maxBytes > 0 && i > 0 && bytes+int(m.stored) > maxBytes {
			return letters, true, nil
		}
		bytes += int(m.stored)
		l := deadView(m)
		_, payload, err := f.store.Read(m.pos)
		if err != nil {
			return nil, false, fmt.Errorf("read dead letter %d: %w", m.seq, err)
		}
		if l.Headers, l.Body, err = decodePayload(payload); err != nil {
			return nil, false, fmt.Errorf("decode dead letter %d: %w", m.seq, err)
		}
		letters = append(letters, l)
	}
	return letters, false, nil
}

func deadView(m *message) DeadLetter {
	in := m.info
	d := DeadLetter{
		Seq: m.seq, ID: m.id(), Bytes: int(m.stored), Attempts: m.attempts,
		FirstEnqueuedAt: m.enqueuedAt, EnqueuedAt: m.enqueuedAt,
		FirstDeliveredAt: in.firstDeliveredAt, LastDeliveredAt: in.lastDeliveredAt,
		DeadAt: in.deadAt, Reason: in.deadReason, ReasonText: in.deadText,
		LastConsumer: in.consumer, History: slices.Clone(in.history), Priority: m.priority(),
	}
	if in.firstEnqueuedAt != 0 {
		d.FirstEnqueuedAt = in.firstEnqueuedAt
	}
	if m.group != nil {
		d.Group = m.group.name
	}
	return d
}

// applyRedrive moves selected dead letters back to ready as new messages at
// the end of the queue (and of their group): new seq, attempts reset, id,
// group, headers, body and history kept. Limits on depth do not apply: an
// operator's redrive is never refused half-way.
//
// A redrive writes nothing to the body store: the new message takes over
// the dead letter's stored payload (its location, size and checksum) as it
// is, since the bytes do not change. Applying it therefore cannot fail on a
// full disk, on any replica. The store keeps the payload under the dead
// letter's seq; f.keys maps that key to the new message for compaction.
func (f *FSM) applyRedrive(d DeadFilter) (int, error) {
	if err := d.Validate(); err != nil {
		return 0, err
	}
	victims := f.selectDead(d)
	for _, old := range victims {
		f.redriveOne(old)
	}
	return len(victims), nil
}

func (f *FSM) redriveOne(old *message) {
	f.detach(old)
	key := f.keys.key(old.seq)
	f.keys.drop(old.seq)
	f.lastSeq++
	in := *old.info
	if in.firstEnqueuedAt == 0 {
		in.firstEnqueuedAt = old.enqueuedAt
	}
	in.deadAt, in.deadReason, in.deadText = 0, 0, ""
	in.addEvent(Event{Kind: EventRedriven, At: f.clock, Attempt: old.attempts})
	// idLen carries the priority: the redriven message keeps it.
	m := &message{seq: f.lastSeq, idData: old.idData, idLen: old.idLen, enqueuedAt: f.clock, info: &in,
		pos: old.pos, stored: old.stored, crc: old.crc}
	f.keys.set(m.seq, key)
	f.table.put(m)
	f.gauges.bytes += int64(m.stored)
	if old.group != nil {
		m.group = f.joinGroup(old.group.name, m)
	}
	f.dedup.setSeq(keyOf(m.id()), old.seq, m.seq)
	f.schedule(m, f.clock, true)
	f.counters.Redriven++
}

// applyDeleteDead discards selected dead letters for good.
func (f *FSM) applyDeleteDead(d DeadFilter) (int, error) {
	if err := d.Validate(); err != nil {
		return 0, err
	}
	victims := f.selectDead(d)
	for _, m := range victims {
		f.detach(m)
		f.forgetBody(m)
		f.counters.DeadDeleted++
	}
	return len(victims), nil
}

// applyPurge deletes every message that is ready or delayed, and with
// leased the leased ones too (CmdPurgeAll: their consumers' later acks,
// extends, nacks and rejects get ErrNotFound). Otherwise leased messages
// stay (their consumers may still ack them). Dead letters stay.
func (f *FSM) applyPurge(leased bool) int {
	var victims []*message
	f.table.ascend(func(m *message) bool {
		if leased || m.state != stateInFlight {
			victims = append(victims, m)
		}
		return true
	})
	for _, m := range victims {
		f.detach(m)
		f.table.remove(m.seq)
		f.gauges.bytes -= int64(m.stored)
		f.forgetBody(m)
		f.counters.Purged++
	}
	for name, g := range f.groups {
		kept := g.members[:0]
		for _, m := range g.members[g.head:] {
			if !leased && m.state == stateInFlight {
				kept = append(kept, m)
			}
		}
		clear(g.members[len(kept):])
		g.members, g.head = kept, 0
		if len(kept) == 0 {
			delete(f.groups, name)
		}
	}
	f.freshFrom = f.lastSeq + 1 // nothing ready is left
	return len(victims)
}
