package fsm

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The compact record encoding of snapshot version 4. Each message and each
// dedup entry is a msgpack array whose first byte gives its field count, so
// that fields can be appended later; decoders reject counts they do not
// know. Numbers that repeat or grow slowly from one record to the next are
// written as differences, which msgpack stores in one to three bytes:
//
//	message, local form (13 fields): seq - previous seq, id, group,
//	    enqueuedAt - previous enqueuedAt, visibleAt - enqueuedAt, attempts,
//	    state, info (nil or an info array), stored size, CRC-32C,
//	    Loc.A - previous Loc.A, Loc.B - previous Loc.B, Loc.C - previous Loc.C
//	message, full form (9 fields): the first eight fields, then the payload
//	message of a priority above 0: either form with one more field at the
//	    end, the priority (14 or 10 fields); a message of priority 0 is
//	    written without it, as before priorities existed
//	info (8 fields): consumer, firstEnqueuedAt, firstDeliveredAt,
//	    lastDeliveredAt, history (array of events), deadAt, deadReason,
//	    deadText; times are nil when zero, else the difference to the
//	    record's enqueuedAt
//	event (5 fields): kind, at (as info times), attempt, consumer, reason
//	dedup entry (3 fields): the id key (16 bytes), seq - previous seq,
//	    at - previous at
//
// "Previous" is the preceding record of the same kind in the stream, zero
// for the first. Differences of unsigned fields are taken modulo 2^64 and
// written as signed integers.
const (
	snapFieldsLocal = 13
	snapFieldsFull  = 9
	snapFieldsInfo  = 8
	snapFieldsEvent = 5
	snapFieldsDedup = 3
)

// storedBytesMax bounds a stored payload: a body and headers within
// MessageBytesLimit, plus the stored form's per-header overhead.
const storedBytesMax = MessageBytesLimit + 2 + 6*HeadersMax

// snapChunkBytes is the first allocation for a payload being read.
const snapChunkBytes = 64 << 10

// snapCodec encodes or decodes the records of one compact snapshot stream,
// in order: it keeps what the previous records held.
type snapCodec struct {
	seq      uint64
	enq      int64
	loc      Loc
	dedupSeq uint64
	dedupAt  int64
}

// encodeMessage writes sm in form: the payload for the full form, the size,
// checksum and location for the local form.
func (c *snapCodec) encodeMessage(enc *msgpack.Encoder, sm *snapMessage, form snapForm) error {
	fields := snapFieldsFull
	if form == formLocal {
		fields = snapFieldsLocal
	}
	if sm.Priority != 0 {
		fields++
	}
	err := encodeAll(enc.EncodeArrayLen(fields), enc.EncodeUint(sm.Seq-c.seq), enc.EncodeString(sm.ID),
		enc.EncodeString(sm.Group), enc.EncodeInt(sm.EnqueuedAt-c.enq), enc.EncodeInt(sm.VisibleAt-sm.EnqueuedAt),
		enc.EncodeUint(uint64(sm.Attempts)), enc.EncodeUint(uint64(sm.State)))
	if err != nil {
		return err
	}
	c.seq, c.enq = sm.Seq, sm.EnqueuedAt
	if err := encodeInfo(enc, sm); err != nil {
		return err
	}
	if form == formFull {
		err = enc.EncodeBytes(sm.Payload)
	} else {
		loc := sm.loc()
		err = encodeAll(enc.EncodeUint(uint64(sm.Stored)), enc.EncodeUint(uint64(sm.CRC)),
			enc.EncodeInt(int64(loc.A-c.loc.A)), enc.EncodeInt(int64(loc.B)-int64(c.loc.B)),
			enc.EncodeInt(int64(loc.C)-int64(c.loc.C)))
		c.loc = loc
	}
	if err != nil || sm.Priority == 0 {
		return err
	}
	return enc.EncodeUint(uint64(sm.Priority))
}

func encodeInfo(enc *msgpack.Encoder, sm *snapMessage) error {
	if !sm.HasInfo {
		return enc.EncodeNil()
	}
	in, base := &sm.Info, sm.EnqueuedAt
	err := encodeAll(enc.EncodeArrayLen(snapFieldsInfo), enc.EncodeString(in.Consumer),
		encodeSnapTime(enc, in.FirstEnqueuedAt, base), encodeSnapTime(enc, in.FirstDeliveredAt, base),
		encodeSnapTime(enc, in.LastDeliveredAt, base), enc.EncodeArrayLen(len(in.History)))
	if err != nil {
		return err
	}
	for _, e := range in.History {
		err := encodeAll(enc.EncodeArrayLen(snapFieldsEvent), enc.EncodeUint(uint64(e.Kind)),
			encodeSnapTime(enc, e.At, base), enc.EncodeUint(uint64(e.Attempt)), enc.EncodeString(e.Consumer),
			enc.EncodeString(e.Reason))
		if err != nil {
			return err
		}
	}
	return encodeAll(encodeSnapTime(enc, in.DeadAt, base), enc.EncodeUint(uint64(in.DeadReason)),
		enc.EncodeString(in.DeadText))
}

// encodeSnapTime writes t as nil when zero, else as its difference to base.
func encodeSnapTime(enc *msgpack.Encoder, t, base int64) error {
	if t == 0 {
		return enc.EncodeNil()
	}
	return enc.EncodeInt(t - base)
}

// decodeMessage reads one message record of form into sm, checking every
// field's range; a declared length is checked against its limit before
// anything is allocated for it.
func (c *snapCodec) decodeMessage(dec *msgpack.Decoder, sm *snapMessage, form snapForm) error {
	want := snapFieldsFull
	if form == formLocal {
		want = snapFieldsLocal
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != want && n != want+1 {
		return fmt.Errorf("snapshot message with %d fields (want %d or %d)", n, want, want+1)
	}
	dseq, err := decodeSnapUint(dec, "seq step", math.MaxUint64-c.seq)
	if err != nil {
		return err
	}
	if dseq == 0 {
		return fmt.Errorf("seq %d after %d", c.seq+dseq, c.seq)
	}
	*sm = snapMessage{Seq: c.seq + dseq}
	if sm.ID, err = decodeSnapString(dec, "id", IDBytesMax); err != nil {
		return err
	}
	if sm.Group, err = decodeSnapString(dec, "group", GroupBytesMax); err != nil {
		return err
	}
	if err := c.decodeTimes(dec, sm); err != nil {
		return err
	}
	attempts, err := decodeSnapUint(dec, "attempts", math.MaxUint32)
	if err != nil {
		return err
	}
	state, err := decodeSnapUint(dec, "state", uint64(stateDead))
	if err != nil {
		return err
	}
	if sm.Attempts, sm.State = uint32(attempts), msgState(state); sm.State < stateReady {
		return fmt.Errorf("state %d", state)
	}
	if err := decodeInfo(dec, sm); err != nil {
		return fmt.Errorf("seq %d info: %w", sm.Seq, err)
	}
	c.seq, c.enq = sm.Seq, sm.EnqueuedAt
	if form == formFull {
		err = decodeSnapPayload(dec, sm)
	} else {
		err = c.decodeLocation(dec, sm)
	}
	if err != nil || n == want {
		return err
	}
	prio, err := decodeSnapUint(dec, "priority", PriorityMax)
	if err != nil {
		return err
	}
	if prio == 0 {
		return fmt.Errorf("seq %d: priority 0 written", sm.Seq)
	}
	sm.Priority = uint8(prio)
	return nil
}

// decodeTimes reads enqueuedAt and visibleAt.
func (c *snapCodec) decodeTimes(dec *msgpack.Decoder, sm *snapMessage) error {
	denq, err := dec.DecodeInt64()
	if err != nil {
		return err
	}
	sm.EnqueuedAt = c.enq + denq
	dvis, err := dec.DecodeInt64()
	sm.VisibleAt = sm.EnqueuedAt + dvis
	return err
}

func decodeSnapPayload(dec *msgpack.Decoder, sm *snapMessage) error {
	n, err := decodeSnapBinLen(dec, "payload")
	if err != nil {
		return err
	}
	if n > storedBytesMax {
		return fmt.Errorf("seq %d: payload of %d bytes (at most %d)", sm.Seq, n, storedBytesMax)
	}
	// Read in chunks: a record cut short after claiming megabytes must not
	// allocate them. What is allocated stays within twice the bytes read.
	p := make([]byte, 0, min(n, snapChunkBytes))
	for len(p) < n {
		k := min(n-len(p), max(len(p), snapChunkBytes))
		p = slices.Grow(p, k)
		if err := dec.ReadFull(p[len(p) : len(p)+k]); err != nil {
			return err
		}
		p = p[:len(p)+k]
	}
	sm.Payload = p
	if _, _, err := scanPayload(sm.Payload); err != nil {
		return fmt.Errorf("seq %d: %w", sm.Seq, err)
	}
	return nil
}

func (c *snapCodec) decodeLocation(dec *msgpack.Decoder, sm *snapMessage) error {
	stored, err := decodeSnapUint(dec, "stored size", storedBytesMax)
	if err != nil {
		return err
	}
	if stored < 2 {
		return fmt.Errorf("seq %d: stored size %d", sm.Seq, stored)
	}
	crc, err := decodeSnapUint(dec, "checksum", math.MaxUint32)
	if err != nil {
		return err
	}
	sm.Stored, sm.CRC = uint32(stored), uint32(crc)
	var d [3]int64
	for i := range d {
		if d[i], err = dec.DecodeInt64(); err != nil {
			return err
		}
	}
	b, cc := int64(c.loc.B)+d[1], int64(c.loc.C)+d[2]
	if b < 0 || b > math.MaxUint32 || cc < 0 || cc > math.MaxUint32 {
		return fmt.Errorf("seq %d: location out of range", sm.Seq)
	}
	c.loc = Loc{A: c.loc.A + uint64(d[0]), B: uint32(b), C: uint32(cc)}
	sm.LocA, sm.LocB, sm.LocC = c.loc.A, c.loc.B, c.loc.C
	return nil
}

func decodeInfo(dec *msgpack.Decoder, sm *snapMessage) error {
	if isNil, err := decodeSnapNil(dec); err != nil || isNil {
		return err
	}
	if err := expectArray(dec, "info", snapFieldsInfo); err != nil {
		return err
	}
	sm.HasInfo = true
	in, base := &sm.Info, sm.EnqueuedAt
	var err error
	if in.Consumer, err = decodeSnapString(dec, "consumer", ConsumerBytesMax); err != nil {
		return err
	}
	for _, t := range []*int64{&in.FirstEnqueuedAt, &in.FirstDeliveredAt, &in.LastDeliveredAt} {
		if *t, err = decodeSnapTime(dec, base); err != nil {
			return err
		}
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 || n > HistoryMax {
		return fmt.Errorf("history of %d events (at most %d)", n, HistoryMax)
	}
	if n > 0 {
		in.History = make([]Event, n)
		for i := range in.History {
			if err := decodeEvent(dec, &in.History[i], base); err != nil {
				return fmt.Errorf("event %d: %w", i, err)
			}
		}
	}
	if in.DeadAt, err = decodeSnapTime(dec, base); err != nil {
		return err
	}
	reason, err := decodeSnapUint(dec, "dead reason", uint64(DeadLeaseExpired))
	if err != nil {
		return err
	}
	in.DeadReason = DeadReason(reason)
	in.DeadText, err = decodeSnapString(dec, "dead text", ReasonBytesMax)
	return err
}

func decodeEvent(dec *msgpack.Decoder, e *Event, base int64) error {
	if err := expectArray(dec, "event", snapFieldsEvent); err != nil {
		return err
	}
	kind, err := decodeSnapUint(dec, "event kind", uint64(EventRedriven))
	if err != nil {
		return err
	}
	if e.Kind = EventKind(kind); e.Kind < EventNacked {
		return fmt.Errorf("event kind %d", kind)
	}
	if e.At, err = decodeSnapTime(dec, base); err != nil {
		return err
	}
	attempt, err := decodeSnapUint(dec, "attempt", math.MaxUint32)
	if err != nil {
		return err
	}
	e.Attempt = uint32(attempt)
	if e.Consumer, err = decodeSnapString(dec, "consumer", ConsumerBytesMax); err != nil {
		return err
	}
	e.Reason, err = decodeSnapString(dec, "reason", ReasonBytesMax)
	return err
}

func decodeSnapTime(dec *msgpack.Decoder, base int64) (int64, error) {
	if isNil, err := decodeSnapNil(dec); err != nil || isNil {
		return 0, err
	}
	d, err := dec.DecodeInt64()
	return base + d, err
}

// decodeSnapUint reads an unsigned integer of at most max.
func decodeSnapUint(dec *msgpack.Decoder, what string, max uint64) (uint64, error) {
	code, err := dec.PeekCode()
	if err != nil {
		return 0, err
	}
	if code > msgpcode.PosFixedNumHigh && code != msgpcode.Uint8 && code != msgpcode.Uint16 &&
		code != msgpcode.Uint32 && code != msgpcode.Uint64 {
		return 0, fmt.Errorf("%s: msgpack code 0x%02x is not an unsigned integer", what, code)
	}
	v, err := dec.DecodeUint64()
	if err != nil {
		return 0, err
	}
	if v > max {
		return 0, fmt.Errorf("%s %d (at most %d)", what, v, max)
	}
	return v, nil
}

// decodeSnapNil consumes a nil and reports true, or reports false and
// leaves the next value unread.
func decodeSnapNil(dec *msgpack.Decoder) (bool, error) {
	code, err := dec.PeekCode()
	if err != nil {
		return false, err
	}
	if code != msgpcode.Nil {
		return false, nil
	}
	return true, dec.DecodeNil()
}

// decodeSnapBinLen reads the head of a binary value and returns its length.
func decodeSnapBinLen(dec *msgpack.Decoder, what string) (int, error) {
	code, err := dec.PeekCode()
	if err != nil {
		return 0, err
	}
	if !msgpcode.IsBin(code) {
		return 0, fmt.Errorf("%s: msgpack code 0x%02x is not binary", what, code)
	}
	return dec.DecodeBytesLen()
}

// decodeSnapString reads a string of at most max bytes, refusing a longer
// declared length before reading it.
func decodeSnapString(dec *msgpack.Decoder, what string, max int) (string, error) {
	code, err := dec.PeekCode()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(code) {
		return "", fmt.Errorf("%s: msgpack code 0x%02x is not a string", what, code)
	}
	n, err := dec.DecodeBytesLen()
	if err != nil {
		return "", err
	}
	if n < 0 || n > max {
		return "", fmt.Errorf("%s of %d bytes (at most %d)", what, n, max)
	}
	if n == 0 {
		return "", nil
	}
	b := make([]byte, n)
	if err := dec.ReadFull(b); err != nil {
		return "", err
	}
	return string(b), nil
}

// encodeDedup writes one dedup entry.
func (c *snapCodec) encodeDedup(enc *msgpack.Encoder, d *snapDedup) error {
	var key [16]byte
	putKey(key[:], d.ID)
	err := encodeAll(enc.EncodeArrayLen(snapFieldsDedup), enc.EncodeBytes(key[:]),
		enc.EncodeInt(int64(d.Seq-c.dedupSeq)), enc.EncodeInt(d.At-c.dedupAt))
	c.dedupSeq, c.dedupAt = d.Seq, d.At
	return err
}

var errDedupKey = errors.New("dedup key is not 16 bytes")

// decodeDedup reads one dedup entry.
func (c *snapCodec) decodeDedup(dec *msgpack.Decoder, d *snapDedup) error {
	if err := expectArray(dec, "dedup entry", snapFieldsDedup); err != nil {
		return err
	}
	n, err := decodeSnapBinLen(dec, "dedup key")
	if err != nil {
		return err
	}
	if n != 16 {
		return errDedupKey
	}
	var key [16]byte
	if err := dec.ReadFull(key[:]); err != nil {
		return err
	}
	d.ID = keyFrom(key[:])
	dseq, err := dec.DecodeInt64()
	if err != nil {
		return err
	}
	dat, err := dec.DecodeInt64()
	if err != nil {
		return err
	}
	d.Seq, d.At = c.dedupSeq+uint64(dseq), c.dedupAt+dat
	c.dedupSeq, c.dedupAt = d.Seq, d.At
	return nil
}
