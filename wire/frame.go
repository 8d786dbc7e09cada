package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Frame limits.
const (
	// MaxFrameBytes is the default and largest payload a frame may carry
	// (the 4-byte length prefix not counted). A reader may be given a lower
	// limit; a writer refuses to produce a larger frame.
	MaxFrameBytes = 32 << 20
	// MaxHelloBytes is the limit a server should use for the first frame of
	// a connection, the Hello: anything that is not a Ferry client (an HTTP
	// request, a TLS hello) then fails at once instead of being read.
	MaxHelloBytes = 4 << 10
	// frameHeaderBytes is the size of the big-endian length prefix.
	frameHeaderBytes = 4
	// readChunk is how far the frame buffer grows ahead of the bytes that
	// have actually arrived, so a peer announcing a big frame and sending
	// little cannot make the reader allocate the announced size.
	readChunk = 256 << 10
	// poolMaxBytes bounds the buffers kept for reuse.
	poolMaxBytes = 1 << 20
)

// encoder is a msgpack encoder bound to its own buffer.
type encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encoderPool = sync.Pool{New: func() any {
	e := new(encoder)
	e.enc = msgpack.NewEncoder(&e.buf)
	e.enc.UseCompactInts(true)
	return e
}}

func getEncoder() *encoder {
	e := encoderPool.Get().(*encoder)
	e.buf.Reset()
	return e
}

func putEncoder(e *encoder) {
	if e.buf.Cap() <= poolMaxBytes {
		encoderPool.Put(e)
	}
}

// decoder is a msgpack decoder reading from an in-memory payload.
type decoder struct {
	src bytes.Reader
	dec *msgpack.Decoder
}

var decoderPool = sync.Pool{New: func() any {
	d := new(decoder)
	d.dec = msgpack.NewDecoder(&d.src)
	return d
}}

// decode checks data structurally and decodes it into v, which must be a
// pointer. Any failure, including trailing bytes and a panic inside the
// msgpack decoder, is reported as a CodeMalformed Error.
func decode(data []byte, v any) (err error) {
	if err := checkValue(data); err != nil {
		return malformed(err)
	}
	switch env := v.(type) {
	case *Request:
		return malformed(parseRequest(data, env))
	case *Response:
		return malformed(parseResponse(data, env))
	case *SendRequest:
		return malformed(parseSendRequest(data, env, false))
	case *SendResponse:
		return malformed(parseSendResponse(data, env))
	case *ReceiveRequest:
		return malformed(parseReceiveRequest(data, env))
	case *ReceiveResponse:
		return malformed(parseReceiveResponse(data, env))
	case *AckRequest:
		return malformed(parseAckRequest(data, env))
	case *AckResponse:
		return malformed(parseAckResponse(data, env))
	}
	d := decoderPool.Get().(*decoder)
	d.src.Reset(data)
	d.dec.Reset(&d.src)
	defer func() {
		if r := recover(); r != nil {
			err = Errorf(CodeMalformed, "malformed payload: decoder failed: %v", r)
		}
		if err == nil {
			// A decoder that failed may keep partial state; drop it.
			decoderPool.Put(d)
		}
	}()
	return malformed(d.dec.Decode(v))
}

// malformed wraps a payload error as a CodeMalformed Error; a field
// decoder's out-of-range refusal (a CodeInvalidArgument Error) keeps its
// code.
func malformed(err error) error {
	if err == nil {
		return nil
	}
	var we *Error
	if errors.As(err, &we) && we.Code == CodeInvalidArgument {
		return we
	}
	return &Error{Code: CodeMalformed, Message: "malformed payload: " + err.Error()}
}

// EncodeBody encodes v as a request or response body.
func EncodeBody(v any) (msgpack.RawMessage, error) {
	e := getEncoder()
	defer putEncoder(e)
	if err := e.enc.Encode(v); err != nil {
		return nil, fmt.Errorf("wire: encode %T: %w", v, err)
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// DecodeBody decodes a body into v, a pointer to the expected type. An empty
// body leaves v unchanged, so a request type whose fields are all optional
// may be sent without a body. Unknown fields are ignored, so newer peers may
// add fields. A body that is not exactly one well-formed value within
// MaxItems and MaxNesting is a CodeMalformed Error.
func DecodeBody(raw msgpack.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	return decode(raw, v)
}

// WriteFrame encodes v and writes it to w as one frame, with a single Write
// call: frames written by concurrent WriteFrame calls on a net.Conn never
// interleave (a bufio.Writer needs the caller's lock). A payload larger than
// MaxFrameBytes is not written and yields a CodeFrameTooLarge Error.
func WriteFrame(w io.Writer, v any) error { return writeFrame(w, v, MaxFrameBytes) }

// writeFrame is WriteFrame with the limit as a parameter, for tests.
func writeFrame(w io.Writer, v any, maxBytes int) error {
	e := getEncoder()
	defer putEncoder(e)
	e.buf.Write(make([]byte, frameHeaderBytes))
	if err := e.enc.Encode(v); err != nil {
		return fmt.Errorf("wire: encode %T: %w", v, err)
	}
	frame := e.buf.Bytes()
	n := len(frame) - frameHeaderBytes
	if n > maxBytes {
		return Errorf(CodeFrameTooLarge, "frame of %d bytes exceeds %d", n, maxBytes)
	}
	binary.BigEndian.PutUint32(frame, uint32(n))
	if _, err := w.Write(frame); err != nil {
		return fmt.Errorf("wire: write frame: %w", err)
	}
	return nil
}

// FrameBuffered reports whether r's buffer holds a whole frame, header and
// payload, so that reading it will not read from r's source (and cannot
// block on it).
func FrameBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < frameHeaderBytes {
		return false
	}
	hdr, _ := r.Peek(frameHeaderBytes) // buffered: cannot block or fail
	return uint64(n-frameHeaderBytes) >= uint64(binary.BigEndian.Uint32(hdr))
}

// AppendFrame encodes v as one frame, its length prefix and payload, and
// appends it to dst, returning the extended slice. Frames appended one
// after another to one slice and written with a single Write call leave
// together, whole and in order (a writer coalescing concurrent requests
// needs no other framing). A payload larger than MaxFrameBytes yields a
// CodeFrameTooLarge Error. On any error dst is returned with its length
// unchanged; the bytes beyond its length may have been overwritten.
func AppendFrame(dst []byte, v any) ([]byte, error) { return appendFrame(dst, v, MaxFrameBytes) }

// appendFrame is AppendFrame with the limit as a parameter, for tests.
func appendFrame(dst []byte, v any, maxBytes int) ([]byte, error) {
	start := len(dst)
	a := appenderPool.Get().(*appender)
	a.b = append(dst, make([]byte, frameHeaderBytes)...)
	err := a.enc.Encode(v)
	frame := a.b
	a.b = nil // the pool must not keep the caller's storage
	appenderPool.Put(a)
	if err != nil {
		return dst[:start], fmt.Errorf("wire: encode %T: %w", v, err)
	}
	n := len(frame) - start - frameHeaderBytes
	if n > maxBytes {
		return dst[:start], Errorf(CodeFrameTooLarge, "frame of %d bytes exceeds %d", n, maxBytes)
	}
	binary.BigEndian.PutUint32(frame[start:], uint32(n))
	return frame, nil
}

// appender is a msgpack encoder bound to a writer that appends to a
// slice, so AppendFrame encodes into the caller's storage directly.
type appender struct {
	b   []byte
	enc *msgpack.Encoder
}

var appenderPool = sync.Pool{New: func() any {
	a := new(appender)
	a.enc = msgpack.NewEncoder(a)
	a.enc.UseCompactInts(true)
	return a
}}

// Write appends p.
func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// WriteByte appends c; having it spares the encoder a wrapper.
func (a *appender) WriteByte(c byte) error {
	a.b = append(a.b, c)
	return nil
}

// ReadFrame reads one frame from r and decodes its payload into v, a
// pointer. maxBytes lowers the size limit; 0, a negative value or one above
// MaxFrameBytes means MaxFrameBytes. It allocates a fresh payload buffer;
// a Reader reuses one.
//
// Errors: io.EOF when r ends cleanly before a frame; an error wrapping
// io.ErrUnexpectedEOF when it ends inside one; a CodeFrameTooLarge Error for
// a length over the limit (nothing of the payload is read, the stream is
// then out of step and must be closed); a CodeMalformed Error for a zero
// length or an undecodable payload (the stream is still in step); the
// reader's own error otherwise.
func ReadFrame(r *bufio.Reader, maxBytes int, v any) error {
	payload, err := readPayload(r, limit(maxBytes), nil)
	if err != nil {
		return err
	}
	return decode(payload, v)
}

func limit(maxBytes int) int {
	if maxBytes <= 0 || maxBytes > MaxFrameBytes {
		return MaxFrameBytes
	}
	return maxBytes
}

// readPayload reads one frame's payload, reusing buf's storage when it is
// large enough. The buffer grows with the bytes that arrive, in steps of at
// most readChunk, and never beyond the announced length.
func readPayload(r io.Reader, maxBytes int, buf []byte) ([]byte, error) {
	var hdr [frameHeaderBytes]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("wire: truncated frame header: %w", err)
		}
		return nil, err // io.EOF at a frame boundary, or the reader's error
	}
	n := binary.BigEndian.Uint32(hdr[:])
	switch {
	case n == 0:
		return nil, &Error{Code: CodeMalformed, Message: "malformed frame: zero length"}
	case uint64(n) > uint64(maxBytes):
		return nil, Errorf(CodeFrameTooLarge, "frame of %d bytes exceeds %d", n, maxBytes)
	}
	size := int(n)
	buf = buf[:0]
	for len(buf) < size {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(size, max(2*cap(buf), readChunk)))
			copy(grown, buf)
			buf = grown
		}
		end := min(size, cap(buf))
		got, err := io.ReadFull(r, buf[len(buf):end])
		buf = buf[:len(buf)+got]
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("wire: truncated frame (%d of %d bytes): %w", len(buf), size, err)
		}
	}
	return buf, nil
}

// Reader reads frames from a stream, reusing one payload buffer. It is not
// safe for concurrent use; a connection has one reading goroutine.
type Reader struct {
	r   io.Reader
	max int
	buf []byte
}

// ReaderOption configures a Reader.
type ReaderOption func(*Reader)

// WithMaxFrameBytes lowers the largest payload the Reader accepts; values
// of 0, below 0 or above MaxFrameBytes leave MaxFrameBytes.
func WithMaxFrameBytes(n int) ReaderOption {
	return func(r *Reader) { r.max = limit(n) }
}

// NewReader returns a Reader of frames from r. r should be buffered (a
// bufio.Reader over a connection): the Reader issues small reads.
func NewReader(r io.Reader, opts ...ReaderOption) *Reader {
	fr := &Reader{r: r, max: MaxFrameBytes}
	for _, o := range opts {
		o(fr)
	}
	return fr
}

// SetMaxFrameBytes changes the limit for the following frames, with the
// rules of WithMaxFrameBytes; a server uses MaxHelloBytes for the hello and
// then a larger limit.
func (r *Reader) SetMaxFrameBytes(n int) { r.max = limit(n) }

// ReadRaw reads the next frame and returns its payload, which is valid only
// until the next call. Errors are those of ReadFrame.
func (r *Reader) ReadRaw() ([]byte, error) {
	payload, err := readPayload(r.r, r.max, r.buf)
	if err != nil {
		return nil, err
	}
	if cap(payload) <= poolMaxBytes {
		r.buf = payload
	} else {
		r.buf = nil // do not pin a rare huge buffer
	}
	return payload, nil
}

// Read reads the next frame and decodes it into v, a pointer. Decoded values
// never alias the Reader's buffer. Errors are those of ReadFrame.
func (r *Reader) Read(v any) error {
	payload, err := r.ReadRaw()
	if err != nil {
		return err
	}
	return decode(payload, v)
}

// ReadRequest reads the next frame as a Request.
func (r *Reader) ReadRequest() (Request, error) {
	var req Request
	err := r.Read(&req)
	return req, err
}

// ReadResponse reads the next frame as a Response.
func (r *Reader) ReadResponse() (Response, error) {
	var resp Response
	err := r.Read(&resp)
	return resp, err
}
