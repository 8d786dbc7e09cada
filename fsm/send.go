package fsm

import (
	"fmt"
	"hash/crc32"
	"unicode/utf8"
)

// applySend enqueues a batch. index is the log entry being applied, 0 when
// unknown: with it, an entry store keeps accepted payloads in place.
func (f *FSM) applySend(c *SendCmd, index uint64) ([]SendOutcome, error) {
	if err := CheckBatch(len(c.Messages)); err != nil {
		return nil, err
	}
	out := make([]SendOutcome, len(c.Messages))
	for i := range c.Messages {
		out[i] = f.sendOne(&c.Messages[i], index)
	}
	return out, nil
}

// ValidateNew reports whether a message would be refused for its own shape
// or size under the current config, whatever the partition's state. It
// changes nothing: the leader uses it to refuse a message before proposing
// it, so that a message the FSM would refuse never costs a raft entry.
// Apply still checks every message (the config may change in between).
func (f *FSM) ValidateNew(nm *NewMessage) error { return f.validateNew(nm) }

// EncodedBytes approximates the bytes nm takes in an encoded send command:
// id, group, headers, body and a fixed allowance for framing.
func (nm *NewMessage) EncodedBytes() int {
	if nm.stored != nil {
		return len(nm.ID) + len(nm.Group) + len(nm.stored) + 16
	}
	return len(nm.ID) + len(nm.Group) + messageBytes(nm.Headers, nm.Body) + 16
}

// shape returns what the limits look at: the header count, whether a
// header key is empty or too long, and the size MaxMessageBytes limits.
func (nm *NewMessage) shape() (headers int, badKey bool, size int, err error) {
	if nm.stored != nil {
		n, empty, err := scanPayload(nm.stored)
		return n, empty, len(nm.stored) - 2 - 6*n, err
	}
	for k := range nm.Headers {
		badKey = badKey || k == "" || len(k) > 0xffff
	}
	return len(nm.Headers), badKey, messageBytes(nm.Headers, nm.Body), nil
}

// validateNew checks one message against the limits that do not depend on
// the partition's state.
func (f *FSM) validateNew(nm *NewMessage) error {
	switch {
	case nm.ID == "" || len(nm.ID) > IDBytesMax || !utf8.ValidString(nm.ID):
		return fmt.Errorf("%w: message id must be 1..%d bytes of UTF-8", ErrInvalidArgument, IDBytesMax)
	case len(nm.Group) > GroupBytesMax || !utf8.ValidString(nm.Group):
		return fmt.Errorf("%w: group must be at most %d bytes of UTF-8", ErrInvalidArgument, GroupBytesMax)
	case nm.Delay < 0 || nm.Delay > SendDelayMax:
		return fmt.Errorf("%w: delay %v (want 0..%v)", ErrInvalidArgument, nm.Delay, SendDelayMax)
	case nm.Priority > PriorityMax:
		return ValidatePriority(int(nm.Priority))
	}
	headers, badKey, size, err := nm.shape()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	case headers > HeadersMax:
		return fmt.Errorf("%w: %d headers (at most %d)", ErrInvalidArgument, headers, HeadersMax)
	case badKey:
		return fmt.Errorf("%w: header keys must be 1..65535 bytes", ErrInvalidArgument)
	case size > f.cfg.MaxMessageBytes:
		return fmt.Errorf("%w: %d bytes (limit %d)", ErrMessageTooLarge, size, f.cfg.MaxMessageBytes)
	}
	return nil
}

func (f *FSM) sendOne(nm *NewMessage, index uint64) SendOutcome {
	if err := f.validateNew(nm); err != nil {
		return SendOutcome{Err: err}
	}
	key := keyOf(nm.ID) // hashed once: looked up here, remembered below
	if seq, ok := f.dedup.get(key); ok {
		f.counters.Duplicates++
		return SendOutcome{Seq: seq, Duplicate: true}
	}
	payload := nm.stored
	if payload == nil {
		payload = encodePayload(nm.Headers, nm.Body)
	}
	if err := f.admit(len(payload)); err != nil {
		return SendOutcome{Err: err}
	}
	f.lastSeq++
	m := &message{seq: f.lastSeq, enqueuedAt: f.clock}
	m.setID(nm.ID)
	m.setPriority(nm.Priority)
	if index > 0 && f.entries != nil && nm.stored != nil && nm.storedAt >= 0 {
		f.refBody(m, index, nm.storedAt, payload)
	} else {
		f.storeBody(m, payload)
	}
	f.table.put(m)
	f.gauges.bytes += int64(m.stored)
	if nm.Group != "" {
		m.group = f.joinGroup(nm.Group, m)
	}
	f.remember(key, m.seq)
	f.schedule(m, f.clock+int64(nm.Delay), true)
	f.counters.Sent++
	return SendOutcome{Seq: m.seq}
}

// admit applies MaxDepth and MaxBytes to one more message of size bytes.
func (f *FSM) admit(size int) error {
	if f.cfg.MaxDepth > 0 && int64(f.table.len())+1 > f.cfg.MaxDepth {
		return fmt.Errorf("%w: %d messages (limit %d)", ErrQueueFull, f.table.len(), f.cfg.MaxDepth)
	}
	if f.cfg.MaxBytes > 0 && f.gauges.bytes+int64(size) > f.cfg.MaxBytes {
		return fmt.Errorf("%w: %d bytes stored (limit %d)", ErrQueueFull, f.gauges.bytes, f.cfg.MaxBytes)
	}
	return nil
}

// storeBody writes payload to the body store under m's seq. A store failure
// is fatal: the replica could not hold what its peers hold, and going on
// would make it diverge.
func (f *FSM) storeBody(m *message, payload []byte) {
	if err := f.tryStoreBody(m, payload); err != nil {
		panic("fsm: " + err.Error())
	}
}

// tryStoreBody is storeBody returning the store's failure.
func (f *FSM) tryStoreBody(m *message, payload []byte) error {
	loc, err := f.store.Append(m.seq, payload)
	if err != nil {
		return fmt.Errorf("body store append failed for seq %d: %w", m.seq, err)
	}
	m.pos = loc
	m.stored = uint32(len(payload))
	m.crc = crc32.Checksum(payload, castagnoli)
	return nil
}

// refBody has the entry store keep m's payload where log entry index holds
// it, at offset off of the entry's data. Failure is fatal, as in storeBody.
func (f *FSM) refBody(m *message, index uint64, off int, payload []byte) {
	loc, err := f.entries.Ref(index, off, len(payload), m.seq)
	if err != nil {
		panic(fmt.Sprintf("fsm: body store ref failed for seq %d (entry %d): %v", m.seq, index, err))
	}
	m.pos = loc
	m.stored = uint32(len(payload))
	m.crc = crc32.Checksum(payload, castagnoli)
}

// joinGroup appends m to the named group, creating it when needed.
func (f *FSM) joinGroup(name string, m *message) *group {
	g := f.groups[name]
	if g == nil {
		g = &group{name: name}
		f.groups[name] = g
		f.stampNew(g)
	}
	g.push(m)
	return g
}

// remember records the id whose key is key as accepted now, when
// deduplication is on.
func (f *FSM) remember(key idKey, seq uint64) {
	if f.cfg.DedupWindow > 0 {
		f.evictDedup()
		f.rememberAt(key, seq, f.clock)
	}
}

// evictDedup makes room for one more id under DedupMaxIDs (or the table's
// own bound, dedupIDsMax, when there is no cap): the oldest ids leave the
// window early, counted in DedupEvicted.
func (f *FSM) evictDedup() {
	limit := f.cfg.DedupMaxIDs
	if limit <= 0 || limit > dedupIDsMax {
		limit = dedupIDsMax
	}
	for int64(f.dedup.len()) >= limit {
		f.dedup.pop()
		f.counters.DedupEvicted++
	}
	for f.marks.len() > 1 && f.marks.at(1).index <= f.dedup.front() {
		f.marks.pop() // its ids are all gone
	}
	if f.dedup.len() == 0 {
		f.marks.reset()
	}
}

// rememberAt records id, which the window must not hold, as accepted at
// time at, which must not be earlier than the newest mark.
func (f *FSM) rememberAt(id idKey, seq uint64, at int64) {
	if f.marks.len() == 0 || f.lastMark != at {
		f.marks.push(dedupMark{index: f.dedup.front() + uint64(f.dedup.len()), at: at})
		f.lastMark = at
	}
	f.dedup.push(id, seq)
}

// pruneDedup forgets ids accepted DedupWindow or longer ago.
func (f *FSM) pruneDedup() {
	for f.marks.len() > 0 && f.marks.front().at+int64(f.cfg.DedupWindow) <= f.clock {
		f.marks.pop()
		end := f.dedup.front() + uint64(f.dedup.len())
		if f.marks.len() > 0 {
			end = f.marks.front().index
		}
		for f.dedup.front() < end {
			f.dedup.pop()
		}
	}
}
