package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// conn is one multiplexed connection to one server address. Requests are
// pipelined: each gets a fresh request id and a waiter; one reader goroutine
// hands every response to the waiter of its id. When the connection dies
// every waiter fails at once with a transportError and the conn is never
// used again (the client dials a new one on next use).
//
// Writes are coalesced (group commit): each caller encodes its frame into
// its own buffer and queues it, then waits for the write lock (wsem). The
// holder of the lock flushes: it takes the queued frames, in queue order
// and up to flushBytesMax, and writes them with one Write call, so frames
// queued together leave in one TLS record (or a few) and one syscall
// instead of one each. It goes on until its own frame is written. A caller
// whose frame another flusher wrote returns as soon as it is written; one
// whose ctx is done while its frame is still queued withdraws it.
//
// Invariant: the owner of every queued frame is in await (or on its way
// there), whose wait always includes taking the write lock, and the lock
// holder takes frames off the queue only to finish them or to put them
// back before it releases the lock. So a frame is never left queued with
// nobody to flush it, and a frame that is neither queued nor finished is
// one the lock holder is writing (flush panics if it finds its own frame
// in neither state).
type conn struct {
	addr     string
	nc       net.Conn
	maxFrame int // the server's request frame limit
	log      logger

	wsem  chan struct{}   // capacity 1: the write lock, held by the flusher
	wbuf  []byte          // under wsem: the frames of one flush, concatenated
	batch []*pendingWrite // under wsem: the frames of the current flush
	qmu   sync.Mutex      // guards queue and pendingWrite.queued
	queue []*pendingWrite // frames waiting for a flusher, in wire order

	// inflight counts the round trips under way, readable without mu: a
	// flusher yields first only when others may be about to queue.
	inflight atomic.Int32

	mu      sync.Mutex
	nextID  uint64
	waiters map[uint64]chan reply
	err     error         // why the connection died; nil while alive
	dead    chan struct{} // closed when err is set
}

// Coalescing bounds.
const (
	// flushBytesMax bounds the bytes one flush concatenates; a single
	// frame above it is written alone, from its own buffer.
	flushBytesMax = 256 << 10
	// flushFramesMax bounds the frames of one flush.
	flushFramesMax = 1024
	// wbufKeepMax bounds the concatenation buffer kept between flushes.
	wbufKeepMax = 1 << 20
	// frameBufKeepMax bounds the per-request frame buffers kept for reuse.
	frameBufKeepMax = 64 << 10
)

// pendingWrite is one encoded frame queued for a flusher.
type pendingWrite struct {
	ctx    context.Context // the owner's: done before the frame is taken, it is not sent
	frame  []byte          // read by flushers until the write is finished
	queued bool            // in conn.queue (under conn.qmu)
	fin    bool            // finished (under conn.wsem)
	err    error           // the outcome, valid once done is closed
	done   chan struct{}   // closed by finish
}

// finish records the outcome of w and wakes its owner. It is called by the
// holder of the write lock, once, after which w.frame is no longer read.
func (w *pendingWrite) finish(err error) {
	w.err = err
	w.fin = true
	close(w.done)
}

// framePool holds the buffers requests encode their frames into.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// reply is what a waiter receives: a response or the connection's failure.
type reply struct {
	resp wire.Response
	err  error
}

// logger is the subset of slog the conn needs (kept small for tests).
type logger interface {
	Debug(msg string, args ...any)
}

// aLongTimeAgo is a deadline in the past: setting it makes blocked I/O
// return at once.
var aLongTimeAgo = time.Unix(1, 0)

// dialConn connects to addr and performs the handshake, both bounded by
// timeout and ctx. The returned conn's reader goroutine is started with
// start, which must run it (the client tracks it for Close).
func dialConn(ctx context.Context, addr string, hello wire.Hello, timeout time.Duration, tlsCfg *tls.Config, log logger,
	start func(func()) bool) (*conn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	hsCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if tlsCfg != nil {
		if nc, err = tlsHandshake(hsCtx, nc, addr, tlsCfg); err != nil {
			return nil, wrapText("tls handshake", err)
		}
	}
	stop := context.AfterFunc(hsCtx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	rd := wire.NewReader(bufio.NewReader(nc))
	wel, err := wire.ClientHandshake(nc, rd, hello)
	if !stop() {
		nc.Close()
		if err == nil {
			err = context.Cause(hsCtx)
		}
		return nil, wrapText("handshake", err)
	}
	if err != nil {
		nc.Close()
		return nil, wrapText("handshake", err)
	}
	c := newConn(addr, nc, wel.MaxFrameBytes, log)
	if !start(func() { c.readLoop(rd) }) {
		nc.Close()
		return nil, ErrClosed
	}
	return c, nil
}

// newConn returns a conn over nc, whose server accepts request frames of
// maxFrame bytes (0 or out of range: wire.MaxFrameBytes). Its reader is not
// started.
func newConn(addr string, nc net.Conn, maxFrame int, log logger) *conn {
	if maxFrame <= 0 || maxFrame > wire.MaxFrameBytes {
		maxFrame = wire.MaxFrameBytes
	}
	return &conn{
		addr:     addr,
		nc:       nc,
		maxFrame: maxFrame,
		log:      log,
		wsem:     make(chan struct{}, 1),
		waiters:  make(map[uint64]chan reply),
		dead:     make(chan struct{}),
	}
}

// tlsHandshake runs the TLS handshake on nc under ctx, verifying the
// server against the host of addr unless cfg names a server. It closes nc
// on failure.
func tlsHandshake(ctx context.Context, nc net.Conn, addr string, cfg *tls.Config) (net.Conn, error) {
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// alive reports whether the connection can still carry requests.
func (c *conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// close fails the connection with ErrClosed.
func (c *conn) close() { c.fail(ErrClosed) }

// fail marks the connection dead, closes the socket and fails every
// waiter. Only the first call has an effect.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.dead)
	waiters := c.waiters
	c.waiters = nil
	c.mu.Unlock()
	c.nc.Close()
	for _, ch := range waiters {
		ch <- reply{err: err}
	}
	c.log.Debug("ferry: connection closed", "addr", c.addr, "err", err)
}

// readLoop hands responses to their waiters until the connection fails.
func (c *conn) readLoop(rd *wire.Reader) {
	for {
		resp, err := rd.ReadResponse()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			c.fail(err)
			return
		}
		if resp.ID == 0 {
			// A connection-level failure; the server closes the socket.
			err := resp.Err()
			if err == nil {
				err = errors.New("unexpected response with id 0")
			}
			c.fail(err)
			return
		}
		c.mu.Lock()
		ch, ok := c.waiters[resp.ID]
		delete(c.waiters, resp.ID)
		c.mu.Unlock()
		if ok {
			ch <- reply{resp: resp}
		}
	}
}

// forget removes the waiter of id; it reports whether it was still there
// (false: its reply was or is being delivered).
func (c *conn) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.waiters[id]; !ok {
		return false
	}
	delete(c.waiters, id)
	return true
}

// roundTrip sends one request and waits for its response. Transport
// failures are *transportError values telling whether the request may have
// reached the server; an encoding error or a request above the server's
// frame limit (ErrMessageTooLarge) is returned as is (nothing was sent, and
// sending it again would fail the same way).
func (c *conn) roundTrip(ctx context.Context, op wire.Op, body any) (wire.Response, error) {
	c.inflight.Add(1)
	defer c.inflight.Add(-1)
	req, err := wire.NewRequest(0, op, body)
	if err != nil {
		return wire.Response{}, err
	}
	if n := len(req.Body) + 32; n > c.maxFrame {
		return wire.Response{}, wire.Errorf(wire.CodeMessageTooLarge,
			"request of about %d bytes exceeds the server's frame limit of %d", n, c.maxFrame)
	}
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return wire.Response{}, &transportError{addr: c.addr, err: err}
	}
	c.nextID++
	req.ID = c.nextID
	c.waiters[req.ID] = ch
	c.mu.Unlock()

	if err := c.write(ctx, req); err != nil {
		c.forget(req.ID)
		if errors.Is(err, wire.ErrFrameTooLarge) {
			return wire.Response{}, err
		}
		return wire.Response{}, &transportError{addr: c.addr, err: err}
	}
	var r reply
	select {
	case r = <-ch:
	case <-ctx.Done():
		if c.forget(req.ID) {
			return wire.Response{}, &transportError{addr: c.addr, sent: true, err: context.Cause(ctx)}
		}
		r = <-ch // the answer is being delivered right now: keep it
	}
	if r.err != nil {
		return wire.Response{}, &transportError{addr: c.addr, sent: true, err: r.err}
	}
	return r.resp, nil
}

// write sends one frame, coalesced with the frames of concurrent callers
// (see conn). A frame whose ctx is done before any byte of it went out is
// not sent: write returns context.Cause(ctx) and the connection stays
// usable. A cancellation of ctx while its goroutine is flushing interrupts
// the blocked write; a write that failed after part of a frame went out
// leaves the stream out of step, so the connection is failed. A frame the
// encoder refuses (wire.ErrFrameTooLarge) is returned as is, unsent.
//
// A nil result means the frame was written whole. Of the frames of a write
// that failed, those written whole before the failure count as written:
// they may reach the server, and their waiters get the connection's
// failure.
func (c *conn) write(ctx context.Context, req wire.Request) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	buf := framePool.Get().(*[]byte)
	defer putFrameBuf(buf)
	frame, err := wire.AppendFrame((*buf)[:0], req)
	if err != nil {
		return err
	}
	*buf = frame[:0] // keep the grown storage
	return c.await(c.enqueue(ctx, frame))
}

// enqueue queues frame, an encoded frame of the caller's to be written
// under ctx, at the back of the queue. The caller must then await it.
func (c *conn) enqueue(ctx context.Context, frame []byte) *pendingWrite {
	w := &pendingWrite{ctx: ctx, frame: frame, queued: true, done: make(chan struct{})}
	c.qmu.Lock()
	c.queue = append(c.queue, w)
	c.qmu.Unlock()
	return w
}

// putFrameBuf returns a frame buffer to the pool unless it is large.
func putFrameBuf(buf *[]byte) {
	if cap(*buf) <= frameBufKeepMax {
		framePool.Put(buf)
	}
}

// await waits until a flusher finished w, or takes the write lock and
// flushes until w is finished. When w's ctx is done while w is still
// queued it withdraws w and returns the cause.
func (c *conn) await(w *pendingWrite) error {
	cancelled := w.ctx.Done()
	for {
		select {
		case <-w.done:
			return w.err
		case c.wsem <- struct{}{}:
			// Yield once before flushing when other round trips are
			// under way: the callers answered by one response burst wake
			// one after another, and without it each would find nobody
			// queued behind it and write alone. A lone caller (one
			// synchronous sender) writes at once.
			if c.inflight.Load() > 1 {
				runtime.Gosched()
			}
			c.flush(w)
			<-c.wsem
			return w.err
		case <-cancelled:
			if c.withdraw(w) {
				return context.Cause(w.ctx)
			}
			// A flusher has it: wait for the outcome, or for the lock if
			// the flusher puts it back.
			cancelled = nil
		}
	}
}

// withdraw removes w from the queue and reports whether it was there
// (false: a flusher took it, or it is finished).
func (c *conn) withdraw(w *pendingWrite) bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if !w.queued {
		return false
	}
	i := slices.Index(c.queue, w)
	c.queue = slices.Delete(c.queue, i, i+1)
	w.queued = false
	return true
}

// flush writes queued frames, in queue order, until own is finished. The
// caller, own's owner, holds the write lock. Writes are interrupted by the
// cancellation of own.ctx; once it is done own is withdrawn (the other
// frames wait for their own owners).
func (c *conn) flush(own *pendingWrite) {
	for !own.fin {
		// Not finished, so queued: only the lock holder takes frames, and
		// it finishes or puts back what it took before releasing the lock.
		if err := context.Cause(own.ctx); err != nil {
			if !c.withdraw(own) {
				panic("ferry: client write queue lost a pending frame")
			}
			own.finish(err)
			return
		}
		batch := c.take()
		if len(batch) == 0 {
			if !own.fin { // take found neither own nor anything before it
				panic("ferry: client write queue lost a pending frame")
			}
			return // own's ctx was done when take came to it
		}
		c.writeBatch(own.ctx, batch)
		clear(batch) // do not pin the frames
	}
}

// take removes the next frames to write from the front of the queue: as
// many as fit in flushBytesMax and flushFramesMax, or a single larger
// frame. Frames whose ctx is done are finished with its cause, unsent.
func (c *conn) take() []*pendingWrite {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	batch, size, i := c.batch[:0], 0, 0
	for ; i < len(c.queue) && len(batch) < flushFramesMax; i++ {
		w := c.queue[i]
		if err := context.Cause(w.ctx); err != nil {
			w.queued = false
			w.finish(err)
			continue
		}
		if len(batch) > 0 && size+len(w.frame) > flushBytesMax {
			break
		}
		w.queued = false
		batch = append(batch, w)
		size += len(w.frame)
	}
	n := copy(c.queue, c.queue[i:])
	clear(c.queue[n:])
	c.queue = c.queue[:n]
	c.batch = batch
	return batch
}

// writeBatch writes the frames of batch with one Write call, interrupted
// by the cancellation of ctx (the flusher's), and finishes them or puts
// them back according to the outcome.
func (c *conn) writeBatch(ctx context.Context, batch []*pendingWrite) {
	data := batch[0].frame // a single frame is written from its own buffer
	if len(batch) > 1 {
		data = c.wbuf[:0]
		for _, w := range batch {
			data = append(data, w.frame...)
		}
		if cap(data) <= wbufKeepMax {
			c.wbuf = data[:0]
		} else {
			c.wbuf = nil
		}
	}
	n, err := c.writeCtx(ctx, data)
	switch {
	case err == nil:
		for _, w := range batch {
			w.finish(nil)
		}
	case n == 0 && ctx.Err() != nil:
		c.putBack(batch)
	default:
		c.failBatch(batch, n, err)
	}
}

// writeCtx writes data with one Write call. A cancellation of ctx
// interrupts a blocked write by setting a past write deadline, which is
// cleared afterwards. (A *tls.Conn keeps the error of an interrupted write
// and returns it from every later Write, so over TLS the next flush fails
// the connection.)
func (c *conn) writeCtx(ctx context.Context, data []byte) (int, error) {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.nc.SetWriteDeadline(aLongTimeAgo)
		close(fired)
	})
	n, err := c.nc.Write(data)
	if !stop() {
		<-fired
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
	return n, err
}

// putBack handles a write that the flusher's cancellation interrupted
// before any byte went out: nothing was sent and the connection is still
// in step, so the frames go back to the front of the queue, in order. The
// flusher's own is then withdrawn by flush; the others wait for their
// owners, who wait for the lock (take drops those whose ctx is done).
func (c *conn) putBack(batch []*pendingWrite) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	for _, w := range batch {
		w.queued = true
	}
	c.queue = slices.Insert(c.queue, 0, batch...)
}

// failBatch fails the connection after a write that failed with n bytes
// written and finishes the frames of batch: those written whole may reach
// the server and count as written (their waiters get the connection's
// failure), the others fail with err.
func (c *conn) failBatch(batch []*pendingWrite, n int, err error) {
	c.fail(err)
	end := 0
	for _, w := range batch {
		end += len(w.frame)
		if end <= n {
			w.finish(nil)
		} else {
			w.finish(err)
		}
	}
}
