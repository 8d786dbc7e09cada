package transport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// Classes of shared-transport connection. Each node dials one control
// and one bulk connection to each peer it sends RPCs to, and one
// snapshot connection per snapshot it installs on a peer.
const (
	// classControl carries coalesced heartbeats, votes, pre-votes and
	// TimeoutNow: small RPCs that must never wait behind appends.
	classControl byte = 1
	// classBulk carries AppendEntries (one-off and pipelined).
	classBulk byte = 2
	// classSnapshot carries exactly one InstallSnapshot: its request, the
	// snapshot's bytes and the answer; then it is closed.
	classSnapshot byte = 3
	numClasses    byte = 4
)

// Frame kinds. Requests travel from the dialing node to the accepting
// one; every request is answered by a frame with the request's id whose
// kind is kindReply (the encoded response) or kindError (a message).
const (
	kindAppend      byte = 1
	kindVote        byte = 2
	kindPreVote     byte = 3
	kindTimeoutNow  byte = 4
	kindHeartbeats  byte = 5 // a batch: see heartbeat.go
	kindSnapshot    byte = 6 // only on a snapshot connection
	kindProbe       byte = 7 // node-level liveness: see liveness.go
	kindReply       byte = 16
	kindError       byte = 17
	frameLenBytes        = 4
	frameFixedBytes      = 1 + 8 + 1 // kind, id, group id length
	maxErrorMessage      = 1024
)

// frame is one decoded frame. Its payload is a buffer of its own.
type frame struct {
	kind    byte
	id      uint64
	group   string
	payload []byte
}

// beginFrame starts a frame in a fresh encoder: the length is filled in
// by finishFrame once the payload has been appended.
func beginFrame(kind byte, id uint64, group string, sizeHint int) *encoder {
	e := &encoder{b: make([]byte, 0, frameLenBytes+frameFixedBytes+len(group)+sizeHint)}
	return e.begin(kind, id, group)
}

// Append frames are built in pooled buffers: the leader builds one per
// follower for every batch of entries, and fresh buffers were a quarter of
// the bytes a leader allocated under pipelined sends. A buffer is given
// back once link.send returns (the bufio writer copies it or writes it
// through, and keeps no reference); one above pooledFrameBytesMax is left
// to the garbage collector, so the pool never pins large buffers.
const pooledFrameBytesMax = 1 << 20

var framePool = sync.Pool{New: func() any { return new(encoder) }}

// beginPooledFrame is beginFrame in a pooled buffer; give the encoder
// back with releaseFrame once the frame's bytes are no longer used.
func beginPooledFrame(kind byte, id uint64, group string, sizeHint int) *encoder {
	e := framePool.Get().(*encoder)
	if need := frameLenBytes + frameFixedBytes + len(group) + sizeHint; cap(e.b) < need {
		e.b = make([]byte, 0, need)
	}
	return e.begin(kind, id, group)
}

// releaseFrame gives a pooled frame's buffer back.
func releaseFrame(e *encoder) {
	if cap(e.b) > pooledFrameBytesMax {
		return
	}
	e.b = e.b[:0]
	framePool.Put(e)
}

// begin writes the frame's header into e's buffer, emptied first.
func (e *encoder) begin(kind byte, id uint64, group string) *encoder {
	e.b = append(e.b[:0], 0, 0, 0, 0) // the length, filled in by finishFrame
	e.b = append(e.b, kind)
	e.b = binary.BigEndian.AppendUint64(e.b, id)
	e.b = append(e.b, byte(len(group)))
	e.b = append(e.b, group...)
	return e
}

// finishFrame writes the frame's length and returns its bytes.
func finishFrame(e *encoder) []byte {
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-frameLenBytes))
	return e.b
}

// readFrame reads one frame of at most maxBytes (after the length) from r.
// A longer or malformed frame is an error wrapping ErrBadFrame: the
// connection it came on can no longer be trusted and must be closed.
func readFrame(r *bufio.Reader, maxBytes int) (frame, error) {
	var lenBuf [frameLenBytes]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(lenBuf[:])
	if n < frameFixedBytes || uint64(n) > uint64(maxBytes) {
		return frame{}, fmt.Errorf("%w: %d-byte frame (at least %d, at most %d)", ErrBadFrame, n, frameFixedBytes, maxBytes)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return frame{}, err
	}
	f := frame{kind: buf[0], id: binary.BigEndian.Uint64(buf[1:9])}
	glen := int(buf[9])
	if frameFixedBytes+glen > len(buf) {
		return frame{}, fmt.Errorf("%w: %d-byte group id in a %d-byte frame", ErrBadFrame, glen, n)
	}
	if glen > 0 {
		f.group = string(buf[frameFixedBytes : frameFixedBytes+glen])
		if err := ValidateGroupID(f.group); err != nil {
			return frame{}, fmt.Errorf("%w: %w", ErrBadFrame, err)
		}
	}
	f.payload = buf[frameFixedBytes+glen:]
	return f, nil
}

// errorPayload cuts an error message to maxErrorMessage bytes.
func errorPayload(err error) []byte {
	msg := err.Error()
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage]
	}
	return []byte(msg)
}
