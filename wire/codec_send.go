package wire

import "github.com/vmihailenco/msgpack/v5"

// The send path's bodies are encoded by hand: they are the most frequent
// request and answer, and reflection over their fields cost the client
// and the leader several percent of their CPU. The encodings are the ones
// reflection produces (same keys, order and omitted fields), so peers that
// decode by reflection read them unchanged.

// EncodeMsgpack writes the request without reflection.
func (r SendRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	err := encodeAll(e.EncodeMapLen(3), e.EncodeString("queue"), e.EncodeString(r.Queue),
		e.EncodeString("partition"), e.EncodeInt(int64(r.Partition)), e.EncodeString("messages"))
	if err != nil {
		return err
	}
	if r.Messages == nil {
		return e.EncodeNil()
	}
	if err := e.EncodeArrayLen(len(r.Messages)); err != nil {
		return err
	}
	for i := range r.Messages {
		if err := r.Messages[i].encode(e); err != nil {
			return err
		}
	}
	return nil
}

// encode writes one message of a send.
func (m *Message) encode(e *msgpack.Encoder) error {
	n := 2
	for _, set := range []bool{m.Group != "", len(m.Headers) > 0, m.Delay != 0, m.Priority != 0} {
		if set {
			n++
		}
	}
	if err := encodeAll(e.EncodeMapLen(n), e.EncodeString("id"), e.EncodeString(m.ID)); err != nil {
		return err
	}
	if err := encodeStringField(e, "group", m.Group); err != nil {
		return err
	}
	if len(m.Headers) > 0 {
		if err := encodeAll(e.EncodeString("headers"), e.EncodeMapLen(len(m.Headers))); err != nil {
			return err
		}
		for k, v := range m.Headers {
			if err := encodeAll(e.EncodeString(k), e.EncodeString(v)); err != nil {
				return err
			}
		}
	}
	if err := encodeAll(e.EncodeString("body"), e.EncodeBytes(m.Body)); err != nil {
		return err
	}
	if m.Delay != 0 {
		if err := encodeAll(e.EncodeString("delay"), e.EncodeInt(int64(m.Delay))); err != nil {
			return err
		}
	}
	if m.Priority != 0 {
		return encodeUintField(e, "priority", uint64(m.Priority))
	}
	return nil
}

// EncodeMsgpack writes the response without reflection.
func (r SendResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := encodeAll(e.EncodeMapLen(1), e.EncodeString("results")); err != nil {
		return err
	}
	if r.Results == nil {
		return e.EncodeNil()
	}
	if err := e.EncodeArrayLen(len(r.Results)); err != nil {
		return err
	}
	for i := range r.Results {
		if err := r.Results[i].encode(e); err != nil {
			return err
		}
	}
	return nil
}

// encode writes one result of a send.
func (r *SendResult) encode(e *msgpack.Encoder) error {
	n := 0
	for _, set := range []bool{r.Seq != 0, r.Duplicate, r.Code != CodeOK, r.Error != ""} {
		if set {
			n++
		}
	}
	if err := e.EncodeMapLen(n); err != nil {
		return err
	}
	if r.Seq != 0 {
		if err := encodeUintField(e, "seq", r.Seq); err != nil {
			return err
		}
	}
	if r.Duplicate {
		if err := encodeAll(e.EncodeString("dup"), e.EncodeBool(true)); err != nil {
			return err
		}
	}
	if r.Code != CodeOK {
		if err := encodeUintField(e, "code", uint64(r.Code)); err != nil {
			return err
		}
	}
	return encodeStringField(e, "error", r.Error)
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
