package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// decodeItemsMax bounds array lengths a decoder accepts, so that garbage
// cannot make it allocate without limit. It is far above BatchMax: batch
// limits are checked by Apply, which answers with an error, not a panic.
const decodeItemsMax = 1 << 20

// Hand-written msgpack codecs for the commands on the hot path (send,
// receive, ack). They skip reflection and encode structs as arrays. Each
// array starts with its field count so that fields can be appended later;
// decoders reject counts they do not know.

func (h *commandHeader) EncodeMsgpack(enc *msgpack.Encoder) error {
	return encodeAll(enc.EncodeArrayLen(2), enc.EncodeUint8(uint8(h.Type)), enc.EncodeInt(h.At))
}

func (h *commandHeader) DecodeMsgpack(dec *msgpack.Decoder) error {
	if err := expectArray(dec, "command header", 2); err != nil {
		return err
	}
	t, err := dec.DecodeUint8()
	if err != nil {
		return err
	}
	h.Type = CommandType(t)
	h.At, err = dec.DecodeInt64()
	return err
}

// EncodeMsgpack writes the batch as an array of message arrays.
func (c *SendCmd) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(len(c.Messages)); err != nil {
		return err
	}
	for i := range c.Messages {
		if err := c.Messages[i].encode(enc); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads what EncodeMsgpack wrote. Messages of the current
// form keep their stored payload (a copy; Headers and Body unset) with no
// known offset: DecodeCommand and FSM.Apply are the decoders to use.
func (c *SendCmd) DecodeMsgpack(dec *msgpack.Decoder) error { return c.decode(dec, nil) }

// entrySource is the log entry a decoder is reading: with it, a message's
// stored payload is taken from data in place, its offset recorded.
type entrySource struct {
	r    *bytes.Reader // the decoder's reader over data; no read-ahead
	data []byte
}

func (c *SendCmd) decode(dec *msgpack.Decoder, src *entrySource) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 || n > decodeItemsMax {
		return fmt.Errorf("send batch of %d messages", n)
	}
	// Grow as messages decode: a few bytes of garbage claiming a million
	// messages must not allocate room for them.
	c.Messages = make([]NewMessage, 0, min(n, 1024))
	for i := range n {
		var m NewMessage
		if err := m.decode(dec, src); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		c.Messages = append(c.Messages, m)
	}
	return nil
}

// A message is encoded in one of two forms, told apart by the length of its
// array:
//
//	4 fields (current): id, group, payload, delay. The payload is one bin
//	    field holding the stored payload (see payload.go), canonical: header
//	    keys strictly increasing. A store may keep it where the log entry
//	    holds it.
//	5 fields (first form, still decoded): id, group, headers map, body,
//	    delay. Still written for a message whose headers the stored payload
//	    cannot represent (the FSM refuses it).
//	5 fields (current, with a priority): the 4 fields of the current form
//	    and the priority, written only when it is not 0, so a message of
//	    priority 0 keeps the bytes it always had. It is told from the first
//	    form by its third field: a bin (the payload), not a map. The
//	    priority is decoded as any uint8 and range-checked by the FSM, which
//	    refuses the message, like any other out-of-range field.

func (m *NewMessage) encode(enc *msgpack.Encoder) error {
	fields := 4
	if m.Priority != 0 {
		fields = 5
	}
	if m.stored != nil {
		err := encodeAll(enc.EncodeArrayLen(fields), enc.EncodeString(m.ID), enc.EncodeString(m.Group),
			enc.EncodeBytes(m.stored), enc.EncodeInt(int64(m.Delay)))
		if err != nil {
			return err
		}
		return m.encodePriority(enc)
	}
	if !payloadEncodable(m.Headers) {
		return m.encodeV1(enc)
	}
	head := appendPayloadHead(nil, m.Headers, 0)
	err := encodeAll(enc.EncodeArrayLen(fields), enc.EncodeString(m.ID), enc.EncodeString(m.Group),
		enc.EncodeBytesLen(len(head)+len(m.Body)))
	if err != nil {
		return err
	}
	w := enc.Writer()
	if _, err := w.Write(head); err != nil {
		return err
	}
	if _, err := w.Write(m.Body); err != nil {
		return err
	}
	if err := enc.EncodeInt(int64(m.Delay)); err != nil {
		return err
	}
	return m.encodePriority(enc)
}

// encodePriority writes the priority field, present only when not 0.
func (m *NewMessage) encodePriority(enc *msgpack.Encoder) error {
	if m.Priority == 0 {
		return nil
	}
	return enc.EncodeUint(uint64(m.Priority))
}

// encodeV1 writes the 5-field form.
func (m *NewMessage) encodeV1(enc *msgpack.Encoder) error {
	err := encodeAll(enc.EncodeArrayLen(5), enc.EncodeString(m.ID), enc.EncodeString(m.Group))
	if err != nil {
		return err
	}
	if err := enc.EncodeMapLen(len(m.Headers)); err != nil {
		return err
	}
	for k, v := range m.Headers {
		if err := encodeAll(enc.EncodeString(k), enc.EncodeString(v)); err != nil {
			return err
		}
	}
	return encodeAll(enc.EncodeBytes(m.Body), enc.EncodeInt(int64(m.Delay)))
}

func (m *NewMessage) decode(dec *msgpack.Decoder, src *entrySource) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != 4 && n != 5 {
		return fmt.Errorf("message with %d fields (want 4 or 5)", n)
	}
	if m.ID, err = dec.DecodeString(); err != nil {
		return err
	}
	if m.Group, err = dec.DecodeString(); err != nil {
		return err
	}
	stored := n == 4
	if n == 5 {
		code, err := dec.PeekCode()
		if err != nil {
			return err
		}
		stored = msgpcode.IsBin(code)
	}
	if stored {
		err = m.decodeStored(dec, src)
	} else {
		err = m.decodeV1(dec)
	}
	if err != nil {
		return err
	}
	delay, err := dec.DecodeInt64()
	if err != nil {
		return err
	}
	m.Delay = time.Duration(delay)
	if stored && n == 5 {
		p, err := dec.DecodeUint64()
		if err != nil {
			return err
		}
		if p > math.MaxUint8 {
			return fmt.Errorf("priority %d", p)
		}
		m.Priority = uint8(p)
	}
	return nil
}

// decodeStored reads the payload field of the 4-field form: in place from
// src when given, else a copy.
func (m *NewMessage) decodeStored(dec *msgpack.Decoder, src *entrySource) error {
	m.storedAt = -1
	if src == nil {
		p, err := dec.DecodeBytes()
		if err != nil {
			return err
		}
		m.stored = p
	} else {
		n, err := dec.DecodeBytesLen()
		if err != nil {
			return err
		}
		if n < 0 || n > src.r.Len() {
			return fmt.Errorf("payload of %d bytes with %d left", n, src.r.Len())
		}
		off := len(src.data) - src.r.Len()
		m.stored, m.storedAt = src.data[off:off+n:off+n], off
		if _, err := src.r.Seek(int64(n), io.SeekCurrent); err != nil {
			return err
		}
	}
	if m.stored == nil {
		return errors.New("message without payload")
	}
	if _, _, err := scanPayload(m.stored); err != nil {
		return err
	}
	return nil
}

// decodeV1 reads the headers and body of the 5-field form.
func (m *NewMessage) decodeV1(dec *msgpack.Decoder) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	if n > 0 {
		if n > decodeItemsMax {
			return fmt.Errorf("%d headers", n)
		}
		m.Headers = make(map[string]string, n)
		for range n {
			k, err := dec.DecodeString()
			if err != nil {
				return err
			}
			if m.Headers[k], err = dec.DecodeString(); err != nil {
				return err
			}
		}
	}
	m.Body, err = dec.DecodeBytes()
	return err
}

// EncodeMsgpack writes the receive as an array.
// The fourth field, MaxBytes, was appended later: entries with three fields
// still decode (MaxBytes 0).
func (c *ReceiveCmd) EncodeMsgpack(enc *msgpack.Encoder) error {
	return encodeAll(enc.EncodeArrayLen(4), enc.EncodeString(c.Consumer), enc.EncodeInt(int64(c.Max)),
		enc.EncodeInt(int64(c.Visibility)), enc.EncodeInt(c.MaxBytes))
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (c *ReceiveCmd) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != 3 && n != 4 {
		return fmt.Errorf("receive with %d fields (want 3 or 4)", n)
	}
	if c.Consumer, err = dec.DecodeString(); err != nil {
		return err
	}
	if c.Max, err = dec.DecodeInt(); err != nil {
		return err
	}
	vis, err := dec.DecodeInt64()
	c.Visibility = time.Duration(vis)
	if err != nil || n == 3 {
		return err
	}
	c.MaxBytes, err = dec.DecodeInt64()
	return err
}

// EncodeMsgpack writes the receipts as a flat array of seq, attempt pairs.
func (c *AckCmd) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeReceipts(enc, c.Receipts) }

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (c *AckCmd) DecodeMsgpack(dec *msgpack.Decoder) error {
	rs, err := decodeReceipts(dec)
	if rs == nil && err == nil {
		rs = []Receipt{}
	}
	c.Receipts = rs
	return err
}

// A receive-ack keeps the form the reflection-based encoder gave it: a map
// of the struct's fields by name ("receipts", "receive"), the receipts nil
// or an array of maps ("seq", "attempt"), the receive as ReceiveCmd
// writes it. Every build reads it, so a cluster being upgraded node by node
// never meets an entry an older node cannot decode. The codec below writes
// that form by hand, byte for byte what reflection wrote, and reads it
// without reflection or allocations for the keys; keys may come in any
// order, and keys it does not know are skipped, as reflection did.

const (
	receiveAckKeyReceipts = "receipts"
	receiveAckKeyReceive  = "receive"
	receiptKeySeq         = "seq"
	receiptKeyAttempt     = "attempt"
)

// EncodeMsgpack writes the map form.
func (c *ReceiveAckCmd) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := encodeAll(enc.EncodeMapLen(2), enc.EncodeString(receiveAckKeyReceipts)); err != nil {
		return err
	}
	if err := encodeReceiptMaps(enc, c.Receipts); err != nil {
		return err
	}
	if err := enc.EncodeString(receiveAckKeyReceive); err != nil {
		return err
	}
	return c.Receive.EncodeMsgpack(enc)
}

// encodeReceiptMaps writes rs as reflection did: nil as nil, else an array
// of two-key maps.
func encodeReceiptMaps(enc *msgpack.Encoder, rs []Receipt) error {
	if rs == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(len(rs)); err != nil {
		return err
	}
	for _, r := range rs {
		err := encodeAll(enc.EncodeMapLen(2), enc.EncodeString(receiptKeySeq), enc.EncodeUint(r.Seq),
			enc.EncodeString(receiptKeyAttempt), enc.EncodeUint(uint64(r.Attempt)))
		if err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (c *ReceiveAckCmd) DecodeMsgpack(dec *msgpack.Decoder) error { return c.decode(dec, nil) }

// decode reads the map form; with src, keys are compared where the entry
// holds them instead of being decoded into strings.
func (c *ReceiveAckCmd) decode(dec *msgpack.Decoder, src *entrySource) error {
	n, err := dec.DecodeMapLen()
	if err != nil || n == -1 {
		return err // a nil map is the zero command, as for reflection
	}
	if n > decodeItemsMax {
		return fmt.Errorf("receive-ack with %d fields", n)
	}
	*c = ReceiveAckCmd{}
	for range n {
		key, err := decodeKey(dec, src)
		if err != nil {
			return err
		}
		switch key {
		case receiveAckKeyReceipts:
			c.Receipts, err = decodeReceiptMaps(dec, src)
		case receiveAckKeyReceive:
			err = c.Receive.DecodeMsgpack(dec)
		default:
			err = dec.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeReceiptMaps reads what encodeReceiptMaps wrote. The slice grows as
// receipts decode, so a few bytes claiming a million receipts allocate
// nothing for them.
func decodeReceiptMaps(dec *msgpack.Decoder, src *entrySource) ([]Receipt, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n == -1 {
		return nil, err
	}
	if n > decodeItemsMax {
		return nil, fmt.Errorf("%d receipts", n)
	}
	rs := make([]Receipt, 0, min(n, 1024))
	for range n {
		var r Receipt
		if err := r.decodeMap(dec, src); err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// decodeMap reads one receipt's map.
func (r *Receipt) decodeMap(dec *msgpack.Decoder, src *entrySource) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	if n > decodeItemsMax {
		return fmt.Errorf("receipt with %d fields", n)
	}
	for range n {
		key, err := decodeKey(dec, src)
		if err != nil {
			return err
		}
		switch key {
		case receiptKeySeq:
			r.Seq, err = dec.DecodeUint64()
		case receiptKeyAttempt:
			r.Attempt, err = dec.DecodeUint32()
		default:
			err = dec.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeKey reads a map key of the receive-ack form. With src it returns
// one of the known keys, compared in place, or "" for any other string (the
// key's bytes are passed over); without src it decodes the string.
func decodeKey(dec *msgpack.Decoder, src *entrySource) (string, error) {
	if src == nil {
		return dec.DecodeString()
	}
	code, err := dec.PeekCode()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsFixedString(code) {
		return dec.DecodeString() // not one of ours: any string form
	}
	if _, err := src.r.ReadByte(); err != nil {
		return "", err
	}
	size := int(code & msgpcode.FixedStrMask)
	if size > src.r.Len() {
		return "", fmt.Errorf("key of %d bytes with %d left", size, src.r.Len())
	}
	off := len(src.data) - src.r.Len()
	key := src.data[off : off+size]
	if _, err := src.r.Seek(int64(size), io.SeekCurrent); err != nil {
		return "", err
	}
	for _, known := range [...]string{receiptKeySeq, receiptKeyAttempt, receiveAckKeyReceipts, receiveAckKeyReceive} {
		if string(key) == known {
			return known, nil
		}
	}
	return "", nil
}

// encodeReceipts writes rs as a flat array of seq, attempt pairs.
func encodeReceipts(enc *msgpack.Encoder, rs []Receipt) error {
	if err := enc.EncodeArrayLen(2 * len(rs)); err != nil {
		return err
	}
	for _, r := range rs {
		if err := encodeAll(enc.EncodeUint(r.Seq), enc.EncodeUint(uint64(r.Attempt))); err != nil {
			return err
		}
	}
	return nil
}

// decodeReceipts reads what encodeReceipts wrote; nil when it holds none.
// The slice grows as pairs decode, so a few bytes claiming a million
// receipts allocate nothing for them.
func decodeReceipts(dec *msgpack.Decoder) ([]Receipt, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n < 0 || n%2 != 0 || n > decodeItemsMax {
		return nil, fmt.Errorf("receipts of %d values", n)
	}
	if n == 0 {
		return nil, nil
	}
	rs := make([]Receipt, 0, min(n/2, 1024))
	for range n / 2 {
		var r Receipt
		if r.Seq, err = dec.DecodeUint64(); err != nil {
			return nil, err
		}
		if r.Attempt, err = dec.DecodeUint32(); err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func expectArray(dec *msgpack.Decoder, what string, fields int) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != fields {
		return fmt.Errorf("%s with %d fields (want %d)", what, n, fields)
	}
	return nil
}

// encodeAll returns the first error of a sequence of encoder calls.
func encodeAll(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
