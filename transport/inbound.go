package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/internal/deadline"
	"github.com/hashicorp/raft"
)

// maxControlRPCs bounds the votes, pre-votes and TimeoutNows being served
// from one control connection at once; beyond, they are answered ErrBusy.
// maxHeartbeatFrames bounds its heartbeat frames being answered: apart,
// so that an election storm's votes (each a durable write) never crowd
// out the heartbeats that would end it.
const (
	maxControlRPCs     = 256
	maxHeartbeatFrames = 64
)

// inbound is an accepted shared connection: requests come in, and are
// answered on the same connection in any order. Its reader never blocks
// on a group: appends queue per group (bounded), control RPCs run on
// goroutines of their own (bounded), heartbeats are answered in line.
type inbound struct {
	s     *Shared
	class byte
	conn  net.Conn
	raw   net.Conn
	r     *bufio.Reader

	wmu     sync.Mutex
	wdl     deadline.Writer // the write deadline; under wmu
	w       *bufio.Writer
	writers atomic.Int32

	queued  atomic.Int64  // request bytes read and not yet answered
	control chan struct{} // a slot per control RPC being served
	beats   chan struct{} // a slot per heartbeat frame being answered
	closed  atomic.Bool

	// Append answers raft hands over (see queueAnswer), waiting for the
	// answer writer: encoded frames, and the request bytes they release
	// once written.
	amu          sync.Mutex
	answers      []byte
	answersFreed int64
	answering    bool   // the answer writer runs
	spare        []byte // the writer's last buffer, reused

	// sendQueueEmpty reports whether the socket's send queue is empty
	// (nil where that cannot be known): see answerInline.
	sendQueueEmpty func() bool
	inlineAnswers  atomic.Uint64 // answers raft's goroutine wrote itself
}

func newInbound(s *Shared, conn, raw net.Conn, class byte) *inbound {
	return &inbound{
		s: s, class: class, conn: conn, raw: raw,
		r:       bufio.NewReaderSize(conn, connBufferBytes),
		w:       bufio.NewWriterSize(conn, connBufferBytes),
		control: make(chan struct{}, maxControlRPCs),
		beats:   make(chan struct{}, maxHeartbeatFrames),

		sendQueueEmpty: sendQueueEmptyOf(raw),
	}
}

// serve reads and dispatches requests until the connection fails.
func (in *inbound) serve() {
	defer in.close()
	if in.class == classSnapshot {
		in.serveSnapshot()
		return
	}
	for {
		f, err := readFrame(in.r, in.s.cfg.MaxFrameBytes)
		if err != nil {
			if !errors.Is(err, io.EOF) && !in.closed.Load() {
				in.s.log.Debug("raft connection closed", "remote", in.raw.RemoteAddr().String(), "err", err)
			}
			return
		}
		if err := in.dispatch(f); err != nil {
			in.s.log.Warn("raft connection closed: bad request", "remote", in.raw.RemoteAddr().String(), "err", err)
			return
		}
	}
}

// dispatch routes one request; an error closes the connection.
func (in *inbound) dispatch(f frame) error {
	switch {
	case f.kind == kindHeartbeats && in.class == classControl:
		// Off the reader: votes behind it must not wait for the frame.
		select {
		case in.beats <- struct{}{}:
		default:
			in.replyError(f.id, fmt.Errorf("%w: %d heartbeat frames from this node in progress", ErrBusy, maxHeartbeatFrames))
			return nil
		}
		go func() {
			defer func() { <-in.beats }()
			in.reply(f.id, in.s.answerHeartbeats(f.payload))
		}()
		return nil
	case f.kind == kindProbe && in.class == classControl:
		in.reply(f.id, nil)
		return nil
	case f.kind == kindAppend && in.class == classBulk:
	case (f.kind == kindVote || f.kind == kindPreVote || f.kind == kindTimeoutNow) && in.class == classControl:
	default:
		return fmt.Errorf("%w: kind %d on a class %d connection", ErrBadFrame, f.kind, in.class)
	}
	rpc, err := decodeRequest(f)
	if err != nil {
		return err
	}
	g := in.s.group(f.group)
	if g == nil {
		in.replyError(f.id, fmt.Errorf("%w: %q", ErrUnknownGroup, f.group))
		return nil
	}
	size := int64(len(f.payload))
	if in.queued.Add(size) > int64(in.s.cfg.MaxQueuedBytes) {
		in.queued.Add(-size)
		in.replyError(f.id, fmt.Errorf("%w: %d request bytes from this node queued", ErrBusy, in.s.cfg.MaxQueuedBytes))
		return nil
	}
	req := &inboundRPC{in: in, id: f.id, kind: f.kind, size: size, rpc: rpc, arrived: time.Now()}
	if f.kind == kindAppend {
		g.enqueue(req)
		return nil
	}
	select {
	case in.control <- struct{}{}:
	default:
		req.answer(nil, fmt.Errorf("%w: %d control RPCs from this node in progress", ErrBusy, maxControlRPCs))
		return nil
	}
	go func() {
		defer func() { <-in.control }()
		req.answer(g.deliverWithin(rpc, in.s.cfg.Timeout/2))
	}()
	return nil
}

// decodeRequest decodes the RPC of a request frame.
func decodeRequest(f frame) (raft.RPC, error) {
	d := &decoder{b: f.payload}
	var cmd any
	switch f.kind {
	case kindAppend:
		r := new(raft.AppendEntriesRequest)
		decodeAppendRequest(d, r)
		cmd = r
	case kindVote:
		r := new(raft.RequestVoteRequest)
		decodeVoteRequest(d, r)
		cmd = r
	case kindPreVote:
		r := new(raft.RequestPreVoteRequest)
		decodePreVoteRequest(d, r)
		cmd = r
	case kindTimeoutNow:
		r := new(raft.TimeoutNowRequest)
		decodeTimeoutNowRequest(d, r)
		cmd = r
	}
	if err := d.end(); err != nil {
		return raft.RPC{}, err
	}
	return raft.RPC{Command: cmd}, nil
}

// inboundRPC is a request waiting for its group, and how to answer it.
type inboundRPC struct {
	in      *inbound
	id      uint64
	kind    byte
	size    int64
	rpc     raft.RPC
	arrived time.Time
}

// answer sends the response (or error) and releases the request's bytes.
func (r *inboundRPC) answer(resp any, err error) {
	r.in.queued.Add(-r.size)
	r.in.write(r.answerFrame(resp, err))
}

// answerQueued is answer for raft's own goroutine (raft.RPC.Reply), which
// must never wait on the network: the frame is written at once when that
// cannot block (answerInline), else queued for the connection's answer
// writer. The request's bytes are released once it is written.
func (r *inboundRPC) answerQueued(resp any, err error) {
	frame := r.answerFrame(resp, err)
	if !r.in.answerInline(frame, r.size) {
		r.in.queueAnswer(frame, r.size)
	}
}

// inlineAnswerBytesMax bounds an answer answerInline writes: far below the
// smallest send buffer a socket has (about 4.5 KiB), so that a write of it
// into an empty send queue always fits.
const inlineAnswerBytesMax = 1 << 10

// answerInline writes frame on the calling goroutine, sparing the hand-off
// to the answer writer (starting it, and waking a thread for it: on a
// small virtual machine a measurable part of a synchronous round), but
// only when the write cannot block: the frame is small, no answer waits
// for the writer and no other write holds the connection, nothing is
// buffered, and the socket's send queue is empty (every byte written
// before was acknowledged), so the frame fits in the socket's buffer
// whatever the peer does. It reports whether it took the frame.
func (in *inbound) answerInline(frame []byte, freed int64) bool {
	if in.sendQueueEmpty == nil || len(frame) > inlineAnswerBytesMax {
		return false
	}
	in.amu.Lock()
	waiting := in.answering || len(in.answers) > 0
	in.amu.Unlock()
	if waiting || in.writers.Load() != 0 || !in.wmu.TryLock() {
		return false
	}
	defer in.wmu.Unlock()
	if in.w.Buffered() != 0 || !in.sendQueueEmpty() {
		return false
	}
	in.queued.Add(-freed)
	in.inlineAnswers.Add(1)
	in.writeLocked(frame, true)
	return true
}

// answerFrame encodes the answer frame of the response (or error).
func (r *inboundRPC) answerFrame(resp any, err error) []byte {
	if err != nil {
		return errorFrame(r.id, err)
	}
	e := beginFrame(kindReply, r.id, "", 64)
	if !encodeResponse(e, resp) {
		return errorFrame(r.id, fmt.Errorf("%w: unexpected response %T", ErrRemote, resp))
	}
	return finishFrame(e)
}

// queueAnswer adds an answer frame for the answer writer, starting it if
// it is not running; it never blocks on the network. The writer writes
// what queued meanwhile together, then releases the requests' bytes
// (freed), so answers the peer does not read hold back further requests
// (MaxQueuedBytes) instead of piling up here.
func (in *inbound) queueAnswer(frame []byte, freed int64) {
	in.amu.Lock()
	in.answers = append(in.answers, frame...)
	in.answersFreed += freed
	start := !in.answering
	in.answering = true
	in.amu.Unlock()
	if start {
		go in.writeAnswers()
	}
}

// writeAnswers is the answer writer: it writes the queued answers until
// none is left.
func (in *inbound) writeAnswers() {
	for {
		in.amu.Lock()
		b, freed := in.answers, in.answersFreed
		if len(b) == 0 {
			in.answering = false
			in.amu.Unlock()
			return
		}
		in.answers, in.answersFreed, in.spare = in.spare[:0], 0, nil
		in.amu.Unlock()
		in.write(b)
		in.queued.Add(-freed)
		in.amu.Lock()
		if cap(b) <= connBufferBytes { // keep a small buffer, let a burst's go
			in.spare = b
		}
		in.amu.Unlock()
	}
}

// encodeResponse appends a raft response; false for an unknown type.
func encodeResponse(e *encoder, resp any) bool {
	switch v := resp.(type) {
	case *raft.AppendEntriesResponse:
		encodeAppendResponse(e, v)
	case *raft.RequestVoteResponse:
		encodeVoteResponse(e, v)
	case *raft.RequestPreVoteResponse:
		encodePreVoteResponse(e, v)
	case *raft.TimeoutNowResponse:
		encodeTimeoutNowResponse(e, v)
	case *raft.InstallSnapshotResponse:
		encodeSnapshotResponse(e, v)
	default:
		return false
	}
	return true
}

// reply sends an answer frame with an already encoded payload.
func (in *inbound) reply(id uint64, payload []byte) {
	e := beginFrame(kindReply, id, "", len(payload))
	e.b = append(e.b, payload...)
	in.write(finishFrame(e))
}

// replyError answers a request with an error message.
func (in *inbound) replyError(id uint64, err error) { in.write(errorFrame(id, err)) }

// errorFrame encodes an error answer to request id.
func errorFrame(id uint64, err error) []byte {
	msg := errorPayload(err)
	e := beginFrame(kindError, id, "", len(msg))
	e.b = append(e.b, msg...)
	return finishFrame(e)
}

// write sends a frame, flushing unless another writer is waiting; a
// failure closes the connection (the dialer's calls fail and are retried).
func (in *inbound) write(b []byte) {
	in.writers.Add(1)
	in.wmu.Lock()
	in.writers.Add(-1)
	defer in.wmu.Unlock()
	in.writeLocked(b, in.writers.Load() == 0)
}

// writeLocked writes b, under wmu, and flushes if flush is set; a closed
// connection drops b (the dialer's calls fail and are retried), and a
// failure closes it.
func (in *inbound) writeLocked(b []byte, flush bool) {
	if in.closed.Load() {
		return
	}
	err := in.wdl.Arm(in.conn, time.Now(), in.s.cfg.Timeout)
	if err == nil {
		_, err = in.w.Write(b)
	}
	if err == nil && flush {
		err = in.w.Flush()
	}
	if err != nil {
		in.close()
	}
}

// close closes the connection; answers still to come are dropped.
func (in *inbound) close() {
	if in.closed.CompareAndSwap(false, true) {
		_ = in.raw.Close()
	}
}
