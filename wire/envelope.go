package wire

import "github.com/vmihailenco/msgpack/v5"

// Request is the envelope of every frame a client sends after the
// handshake. ID is chosen by the client, unique among its requests in flight
// on the connection, and never 0 (0 marks connection-level responses). Body
// holds the op's XxxRequest, encoded with EncodeBody; it may be empty when
// every field of that type is optional.
type Request struct {
	ID   uint64             `msgpack:"id"`
	Op   Op                 `msgpack:"op"`
	Body msgpack.RawMessage `msgpack:"body,omitempty"`
}

// Response is the envelope of every frame a server sends after the
// handshake. ID repeats the request's; responses may arrive in any order.
// When Code is not CodeOK, Error holds the detail, Leader (for CodeNotLeader)
// the client address of the leader, and Body is usually empty. A Response
// with ID 0 reports a connection-level failure (a frame that could not be
// read); the server closes the connection after sending it.
type Response struct {
	ID     uint64             `msgpack:"id"`
	Code   Code               `msgpack:"code,omitempty"`
	Error  string             `msgpack:"error,omitempty"`
	Leader string             `msgpack:"leader,omitempty"`
	Body   msgpack.RawMessage `msgpack:"body,omitempty"`
}

// NewRequest builds a request whose body is the encoding of body (which may
// be nil for an empty body).
func NewRequest(id uint64, op Op, body any) (Request, error) {
	req := Request{ID: id, Op: op}
	if body == nil {
		return req, nil
	}
	raw, err := EncodeBody(body)
	if err != nil {
		return Request{}, err
	}
	req.Body = raw
	return req, nil
}

// Decode decodes the request's body into v (see DecodeBody). The message
// bodies of a *SendRequest share r.Body's storage instead of being copied
// (a Request read from a connection owns its Body), so r.Body must not be
// changed while they are in use.
func (r Request) Decode(v any) error {
	if s, ok := v.(*SendRequest); ok && len(r.Body) > 0 {
		if err := checkValue(r.Body); err != nil {
			return malformed(err)
		}
		return malformed(parseSendRequest(r.Body, s, true))
	}
	return DecodeBody(r.Body, v)
}

// NewResponse builds a successful response whose body is the encoding of
// body (which may be nil for an empty body).
func NewResponse(id uint64, body any) (Response, error) {
	resp := Response{ID: id}
	if body == nil {
		return resp, nil
	}
	raw, err := EncodeBody(body)
	if err != nil {
		return Response{}, err
	}
	resp.Body = raw
	return resp, nil
}

// ErrorResponse builds the failure response for err: its code is
// CodeOf(err), its Error the message (without the "ferry: <code>" prefix
// an *Error adds), its Leader that of an *Error in err's chain. A nil err
// gives an empty successful response.
func ErrorResponse(id uint64, err error) Response {
	code, msg, leader := splitError(err)
	return Response{ID: id, Code: code, Error: msg, Leader: leader}
}

// Err returns the response's failure as an *Error, or nil when Code is
// CodeOK.
func (r Response) Err() error {
	if r.Code == CodeOK {
		return nil
	}
	return &Error{Code: r.Code, Message: r.Error, Leader: r.Leader}
}

// Decode returns r.Err() for a failed response and otherwise decodes the
// body into v (see DecodeBody).
func (r Response) Decode(v any) error {
	if err := r.Err(); err != nil {
		return err
	}
	return DecodeBody(r.Body, v)
}

// EncodeMsgpack writes the envelope without reflection.
func (r Request) EncodeMsgpack(e *msgpack.Encoder) error {
	n := 2
	if len(r.Body) > 0 {
		n++
	}
	if err := e.EncodeMapLen(n); err != nil {
		return err
	}
	if err := encodeUintField(e, "id", r.ID); err != nil {
		return err
	}
	if err := encodeUintField(e, "op", uint64(r.Op)); err != nil {
		return err
	}
	return encodeRawField(e, "body", r.Body)
}

// DecodeMsgpack reads the envelope (see parseRequest).
func (r *Request) DecodeMsgpack(d *msgpack.Decoder) error {
	raw, err := d.DecodeRaw()
	if err != nil {
		return err
	}
	if err := checkValue(raw); err != nil {
		return err
	}
	return parseRequest(raw, r)
}

// EncodeMsgpack writes the envelope without reflection.
func (r Response) EncodeMsgpack(e *msgpack.Encoder) error {
	n := 1
	for _, set := range []bool{r.Code != CodeOK, r.Error != "", r.Leader != "", len(r.Body) > 0} {
		if set {
			n++
		}
	}
	if err := e.EncodeMapLen(n); err != nil {
		return err
	}
	if err := encodeUintField(e, "id", r.ID); err != nil {
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
	if err := encodeStringField(e, "leader", r.Leader); err != nil {
		return err
	}
	return encodeRawField(e, "body", r.Body)
}

// DecodeMsgpack reads the envelope (see parseResponse).
func (r *Response) DecodeMsgpack(d *msgpack.Decoder) error {
	raw, err := d.DecodeRaw()
	if err != nil {
		return err
	}
	if err := checkValue(raw); err != nil {
		return err
	}
	return parseResponse(raw, r)
}

func encodeUintField(e *msgpack.Encoder, key string, v uint64) error {
	if err := e.EncodeString(key); err != nil {
		return err
	}
	return e.EncodeUint(v)
}

func encodeStringField(e *msgpack.Encoder, key, v string) error {
	if v == "" {
		return nil
	}
	if err := e.EncodeString(key); err != nil {
		return err
	}
	return e.EncodeString(v)
}

func encodeRawField(e *msgpack.Encoder, key string, raw msgpack.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	if err := e.EncodeString(key); err != nil {
		return err
	}
	return raw.EncodeMsgpack(e)
}
