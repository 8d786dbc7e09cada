package fsm

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"
	"unicode/utf8"
)

// applyReceiveAck checks the whole command, then acks each receipt and
// leases. A refused command changes nothing.
func (f *FSM) applyReceiveAck(c *ReceiveAckCmd) ([]error, []Delivery, error) {
	if err := ValidateReceive(&c.Receive, len(c.Receipts)); err != nil {
		return nil, nil, err
	}
	var settled []error
	if len(c.Receipts) > 0 {
		settled = make([]error, len(c.Receipts))
		for i, r := range c.Receipts {
			settled[i] = f.ackOne(r)
		}
	}
	ds, err := f.applyReceive(&c.Receive)
	return settled, ds, err
}

func (f *FSM) applyReceive(c *ReceiveCmd) ([]Delivery, error) {
	if err := ValidateReceive(c, 0); err != nil {
		return nil, err
	}
	if f.pause.Paused {
		return nil, nil // as an empty queue: the receive waits or comes back empty
	}
	most := c.Max
	if limit := f.cfg.MaxInFlight; limit > 0 {
		most = int(min(int64(most), max(0, limit-f.gauges.inFlight)))
	}
	most = f.rateRoom(most)
	visibility := c.Visibility
	if visibility == 0 {
		visibility = f.cfg.VisibilityTimeout
	}
	var leased []*message
	var answerBytes int64
	for len(leased) < most {
		next := f.nextEligible()
		m := next.m
		if m == nil {
			break
		}
		if c.MaxBytes > 0 && len(leased) > 0 && answerBytes+m.deliveryBytes() > c.MaxBytes {
			break // the rest stays ready for the next receive
		}
		f.takeEligible(next)
		if f.exhausted(m) {
			// MaxReceives was lowered below this message's attempts: it
			// gets no more deliveries.
			if m.info == nil {
				m.info = &deliveryInfo{}
			}
			f.deadLetter(m, DeadRetriesExhausted, "receive limit reached")
			continue
		}
		f.lease(m, c.Consumer, int64(visibility))
		answerBytes += m.deliveryBytes()
		leased = append(leased, m)
	}
	f.rateTake(len(leased))
	return f.deliveries(leased), nil
}

// DeliveryOverheadBytes is what a delivery costs in an answer beyond its
// stored headers and body, id and group: receipt, times and encoding.
const DeliveryOverheadBytes = 128

// DeliveryBytes is the size a delivery of a message with these parts counts
// against ReceiveCmd.MaxBytes.
func DeliveryBytes(storedBytes, idBytes, groupBytes int) int64 {
	return int64(storedBytes) + int64(idBytes) + int64(groupBytes) + DeliveryOverheadBytes
}

// deliveryBytes is m's DeliveryBytes.
func (m *message) deliveryBytes() int64 {
	groupBytes := 0
	if m.group != nil {
		groupBytes = len(m.group.name)
	}
	return DeliveryBytes(int(m.stored), m.idBytes(), groupBytes)
}

// deliveries builds what the consumer gets for each of ms, reading their
// bodies in one batch where the store can (BatchReader).
func (f *FSM) deliveries(ms []*message) []Delivery {
	if len(ms) == 0 {
		return nil
	}
	out := make([]Delivery, len(ms))
	br, batched := f.store.(BatchReader)
	if f.skipBodies || !batched || len(ms) == 1 {
		for i, m := range ms {
			out[i] = f.delivery(m)
		}
		return out
	}
	locs := make([]Loc, len(ms))
	for i, m := range ms {
		locs[i] = m.pos
	}
	payloads := make([][]byte, len(ms))
	if err := br.ReadBatch(locs, payloads); err != nil {
		panic(fmt.Sprintf("fsm: bodies of %d deliveries unreadable: %v", len(ms), err))
	}
	for i, m := range ms {
		out[i] = f.deliveryHead(m)
		var err error
		if out[i].Headers, out[i].Body, err = decodePayload(payloads[i]); err != nil {
			panic(fmt.Sprintf("fsm: body of seq %d at %v: %v", m.seq, m.pos, err))
		}
	}
	return out
}

// deliveryHead is m's delivery without its headers and body.
func (f *FSM) deliveryHead(m *message) Delivery {
	d := Delivery{
		Receipt:    Receipt{Seq: m.seq, Attempt: m.attempts},
		ID:         m.id(),
		EnqueuedAt: m.enqueuedAt,
		Deadline:   m.visibleAt,
		Priority:   m.priority(),
	}
	if m.group != nil {
		d.Group = m.group.name
	}
	return d
}

// delivery reads m's body and builds what the consumer gets. A body that
// cannot be read is local corruption: fatal, as in storeBody.
func (f *FSM) delivery(m *message) Delivery {
	d := f.deliveryHead(m)
	if f.skipBodies {
		return d
	}
	_, payload, err := f.store.Read(m.pos)
	if err != nil {
		panic(fmt.Sprintf("fsm: body of seq %d unreadable at %v: %v", m.seq, m.pos, err))
	}
	if d.Headers, d.Body, err = decodePayload(payload); err != nil {
		panic(fmt.Sprintf("fsm: body of seq %d at %v: %v", m.seq, m.pos, err))
	}
	return d
}

// leased returns the message of a receipt whose lease is still running.
func (f *FSM) leased(r Receipt) (*message, error) {
	m := f.table.get(r.Seq)
	if m == nil {
		if f.deadBySeq(r.Seq) != nil {
			return nil, fmt.Errorf("%w: seq %d was dead-lettered", ErrLeaseLost, r.Seq)
		}
		return nil, fmt.Errorf("%w: seq %d", ErrNotFound, r.Seq)
	}
	if m.state != stateInFlight || m.attempts != r.Attempt {
		return nil, fmt.Errorf("%w: seq %d attempt %d (current attempt %d)", ErrLeaseLost, r.Seq, r.Attempt, m.attempts)
	}
	return m, nil
}

// ackOne deletes the message of r. An ack whose lease expired still works
// while nobody else got the message since, including when that expiry
// dead-lettered it: the consumer did finish the work.
func (f *FSM) ackOne(r Receipt) error {
	m := f.table.get(r.Seq)
	if m == nil {
		d := f.deadBySeq(r.Seq)
		if d == nil {
			return fmt.Errorf("%w: seq %d", ErrNotFound, r.Seq)
		}
		if d.attempts != r.Attempt || d.info.deadReason != DeadLeaseExpired {
			return fmt.Errorf("%w: seq %d was dead-lettered (%s)", ErrLeaseLost, r.Seq, d.info.deadReason)
		}
		f.detach(d)
		f.forgetBody(d)
		f.counters.Acked++
		return nil
	}
	if r.Attempt == 0 || m.attempts != r.Attempt {
		return fmt.Errorf("%w: seq %d attempt %d (current attempt %d)", ErrLeaseLost, r.Seq, r.Attempt, m.attempts)
	}
	f.finish(m)
	f.counters.Acked++
	return nil
}

func (f *FSM) extendOne(it ExtendItem) error {
	if err := it.Validate(); err != nil {
		return err
	}
	m, err := f.leased(it.Receipt)
	if err != nil {
		return err
	}
	f.mustDelete(f.timers.Delete(m))
	m.visibleAt = f.clock + int64(it.Visibility)
	f.timers.ReplaceOrInsert(m)
	return nil
}

func (f *FSM) nackOne(it NackItem) error {
	if err := it.Validate(); err != nil {
		return err
	}
	m, err := f.leased(it.Receipt)
	if err != nil {
		return err
	}
	if it.Release {
		// The delivery never reached a handler: undo it. Its receipt
		// becomes stale (a release cannot be applied twice), and the next
		// delivery reuses the attempt number.
		m.attempts--
		f.detach(m)
		f.schedule(m, f.clock, false)
		return nil
	}
	reason := cutReason(it.Reason)
	f.counters.Nacked++
	m.info.addEvent(Event{Kind: EventNacked, At: f.clock, Attempt: m.attempts, Consumer: m.info.consumer, Reason: reason})
	if f.exhausted(m) {
		f.deadLetter(m, DeadRetriesExhausted, reason)
		return nil
	}
	delay := f.backoff(m)
	if it.ExplicitDelay {
		delay = it.Delay
	}
	f.detach(m)
	f.schedule(m, f.clock+int64(delay), false)
	return nil
}

func (f *FSM) rejectOne(it RejectItem) error {
	m, err := f.leased(it.Receipt)
	if err != nil {
		return err
	}
	reason := cutReason(it.Reason)
	f.counters.Rejected++
	m.info.addEvent(Event{Kind: EventRejected, At: f.clock, Attempt: m.attempts, Consumer: m.info.consumer, Reason: reason})
	f.deadLetter(m, DeadRejected, reason)
	return nil
}

// expire ends m's lease as a failed attempt.
func (f *FSM) expire(m *message) {
	f.counters.Expired++
	m.info.addEvent(Event{Kind: EventLeaseExpired, At: f.clock, Attempt: m.attempts, Consumer: m.info.consumer})
	if f.exhausted(m) {
		f.deadLetter(m, DeadLeaseExpired, "lease expired")
		return
	}
	f.detach(m)
	f.schedule(m, f.clock+int64(f.backoff(m)), false)
}

// exhausted says whether m has used its last allowed receive.
func (f *FSM) exhausted(m *message) bool {
	return f.cfg.MaxReceives > 0 && int(m.attempts) >= f.cfg.MaxReceives
}

// backoff is the retry delay after m's latest failed attempt. The computed
// delay is d = min(BackoffMax, BackoffBase·2^(attempts-1)); the jitter only
// adds to it: the result lies in [d, min(BackoffMax, d + d/4)], chosen by a
// hash of the id and attempt, so every replica picks the same value while
// retries of different messages spread out. A retry therefore never comes
// sooner than the documented delay, and never later than BackoffMax.
func (f *FSM) backoff(m *message) time.Duration {
	base, ceiling := f.cfg.BackoffBase, f.cfg.BackoffMax
	if base <= 0 || m.attempts == 0 {
		return 0
	}
	d := base
	for i := uint32(1); i < m.attempts && d < ceiling; i++ {
		d *= 2 // cannot overflow: d < ceiling <= BackoffMaxLimit
	}
	d = min(d, ceiling)
	top := max(d, min(ceiling, d+d/4))
	var buf [ulidLen]byte
	return d + time.Duration(jitterHash(m.idInto(&buf), m.attempts)%uint64(top-d+1))
}

func jitterHash(id string, attempt uint32) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{byte(attempt), byte(attempt >> 8), byte(attempt >> 16), byte(attempt >> 24)})
	return h.Sum64()
}

// cutReason bounds a failure reason to ReasonBytesMax without splitting a
// UTF-8 sequence; invalid UTF-8 is replaced.
func cutReason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= ReasonBytesMax {
		return s
	}
	cut := ReasonBytesMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
