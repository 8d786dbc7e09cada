package fsm

import (
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
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

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (c *SendCmd) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 || n > decodeItemsMax {
		return fmt.Errorf("send batch of %d messages", n)
	}
	c.Messages = make([]NewMessage, n)
	for i := range c.Messages {
		if err := c.Messages[i].decode(dec); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return nil
}

func (m *NewMessage) encode(enc *msgpack.Encoder) error {
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

func (m *NewMessage) decode(dec *msgpack.Decoder) error {
	if err := expectArray(dec, "message", 5); err != nil {
		return err
	}
	var err error
	if m.ID, err = dec.DecodeString(); err != nil {
		return err
	}
	if m.Group, err = dec.DecodeString(); err != nil {
		return err
	}
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
	if m.Body, err = dec.DecodeBytes(); err != nil {
		return err
	}
	delay, err := dec.DecodeInt64()
	m.Delay = time.Duration(delay)
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
func (c *AckCmd) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(2 * len(c.Receipts)); err != nil {
		return err
	}
	for _, r := range c.Receipts {
		if err := encodeAll(enc.EncodeUint(r.Seq), enc.EncodeUint(uint64(r.Attempt))); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (c *AckCmd) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 || n%2 != 0 || n > decodeItemsMax {
		return fmt.Errorf("ack of %d values", n)
	}
	c.Receipts = make([]Receipt, n/2)
	for i := range c.Receipts {
		if c.Receipts[i].Seq, err = dec.DecodeUint64(); err != nil {
			return err
		}
		if c.Receipts[i].Attempt, err = dec.DecodeUint32(); err != nil {
			return err
		}
	}
	return nil
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
