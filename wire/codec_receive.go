package wire

import "github.com/vmihailenco/msgpack/v5"

// The receive and ack bodies are encoded by hand, as the send bodies are
// (codec_send.go): after sends they are the most frequent requests and
// answers, and a receive's answer carries every leased message. The
// encodings are the ones reflection produces (same keys, order and omitted
// fields), so peers that decode by reflection read them unchanged.

// EncodeMsgpack writes the request without reflection.
func (r ReceiveRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	n := 3
	for _, set := range []bool{r.Consumer != "", r.Visibility != 0, r.Wait != 0, len(r.Acks) > 0} {
		if set {
			n++
		}
	}
	err := encodeAll(e.EncodeMapLen(n), e.EncodeString("queue"), e.EncodeString(r.Queue),
		e.EncodeString("partition"), e.EncodeInt(int64(r.Partition)))
	if err != nil {
		return err
	}
	if err := encodeStringField(e, "consumer", r.Consumer); err != nil {
		return err
	}
	if err := encodeAll(e.EncodeString("max"), e.EncodeInt(int64(r.Max))); err != nil {
		return err
	}
	if err := encodeIntField(e, "visibility", int64(r.Visibility)); err != nil {
		return err
	}
	if err := encodeIntField(e, "wait", int64(r.Wait)); err != nil {
		return err
	}
	if len(r.Acks) == 0 {
		return nil
	}
	if err := e.EncodeString("acks"); err != nil {
		return err
	}
	return encodeReceipts(e, r.Acks)
}

// EncodeMsgpack writes the response without reflection.
func (r ReceiveResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	n := 0
	for _, set := range []bool{len(r.Messages) > 0, len(r.AckResults) > 0} {
		if set {
			n++
		}
	}
	if err := e.EncodeMapLen(n); err != nil {
		return err
	}
	if len(r.Messages) > 0 {
		if err := encodeAll(e.EncodeString("messages"), e.EncodeArrayLen(len(r.Messages))); err != nil {
			return err
		}
		for i := range r.Messages {
			if err := r.Messages[i].encode(e); err != nil {
				return err
			}
		}
	}
	if len(r.AckResults) == 0 {
		return nil
	}
	if err := e.EncodeString("ack_results"); err != nil {
		return err
	}
	return encodeItemResults(e, r.AckResults)
}

// encode writes one delivery of a receive's answer.
func (d *Delivery) encode(e *msgpack.Encoder) error {
	n := 7
	for _, set := range []bool{d.Group != "", len(d.Headers) > 0, d.Priority != 0} {
		if set {
			n++
		}
	}
	err := encodeAll(e.EncodeMapLen(n), e.EncodeString("partition"), e.EncodeInt(int64(d.Partition)),
		e.EncodeString("seq"), e.EncodeUint(d.Seq), e.EncodeString("attempt"), e.EncodeUint(uint64(d.Attempt)),
		e.EncodeString("id"), e.EncodeString(d.ID))
	if err != nil {
		return err
	}
	if err := encodeStringField(e, "group", d.Group); err != nil {
		return err
	}
	if len(d.Headers) > 0 {
		if err := encodeAll(e.EncodeString("headers"), e.EncodeMapLen(len(d.Headers))); err != nil {
			return err
		}
		for k, v := range d.Headers {
			if err := encodeAll(e.EncodeString(k), e.EncodeString(v)); err != nil {
				return err
			}
		}
	}
	err = encodeAll(e.EncodeString("body"), e.EncodeBytes(d.Body),
		e.EncodeString("enqueued_at"), e.EncodeInt(d.EnqueuedAt), e.EncodeString("deadline"), e.EncodeInt(d.Deadline))
	if err != nil || d.Priority == 0 {
		return err
	}
	return encodeAll(e.EncodeString("priority"), e.EncodeUint(uint64(d.Priority)))
}

// EncodeMsgpack writes the request without reflection.
func (r AckRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	err := encodeAll(e.EncodeMapLen(3), e.EncodeString("queue"), e.EncodeString(r.Queue),
		e.EncodeString("partition"), e.EncodeInt(int64(r.Partition)), e.EncodeString("receipts"))
	if err != nil {
		return err
	}
	if r.Receipts == nil {
		return e.EncodeNil()
	}
	return encodeReceipts(e, r.Receipts)
}

// EncodeMsgpack writes the response without reflection.
func (r AckResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := encodeAll(e.EncodeMapLen(1), e.EncodeString("results")); err != nil {
		return err
	}
	if r.Results == nil {
		return e.EncodeNil()
	}
	return encodeItemResults(e, r.Results)
}

// encodeReceipts writes an array of receipts.
func encodeReceipts(e *msgpack.Encoder, rs []Receipt) error {
	if err := e.EncodeArrayLen(len(rs)); err != nil {
		return err
	}
	for _, r := range rs {
		err := encodeAll(e.EncodeMapLen(3), e.EncodeString("partition"), e.EncodeInt(int64(r.Partition)),
			e.EncodeString("seq"), e.EncodeUint(r.Seq), e.EncodeString("attempt"), e.EncodeUint(uint64(r.Attempt)))
		if err != nil {
			return err
		}
	}
	return nil
}

// encodeItemResults writes an array of item results.
func encodeItemResults(e *msgpack.Encoder, rs []ItemResult) error {
	if err := e.EncodeArrayLen(len(rs)); err != nil {
		return err
	}
	for _, r := range rs {
		n := 0
		for _, set := range []bool{r.Code != CodeOK, r.Error != ""} {
			if set {
				n++
			}
		}
		if err := e.EncodeMapLen(n); err != nil {
			return err
		}
		if r.Code != CodeOK {
			if err := encodeUintField(e, "code", uint64(r.Code)); err != nil {
				return err
			}
		}
		if err := encodeStringField(e, "error", r.Error); err != nil {
			return err
		}
	}
	return nil
}

// encodeIntField writes key and v unless v is 0 (omitempty).
func encodeIntField(e *msgpack.Encoder, key string, v int64) error {
	if v == 0 {
		return nil
	}
	return encodeAll(e.EncodeString(key), e.EncodeInt(v))
}
