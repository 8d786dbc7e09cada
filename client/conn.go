package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// conn is one multiplexed connection to one server address. Requests are
// pipelined: each gets a fresh request id and a waiter; one reader goroutine
// hands every response to the waiter of its id. Writes are serialized. When
// the connection dies every waiter fails at once with a transportError and
// the conn is never used again (the client dials a new one on next use).
type conn struct {
	addr     string
	nc       net.Conn
	maxFrame int // the server's request frame limit
	log      logger

	wmu sync.Mutex // serializes frame writes

	mu      sync.Mutex
	nextID  uint64
	waiters map[uint64]chan reply
	err     error         // why the connection died; nil while alive
	dead    chan struct{} // closed when err is set
}

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
	c := &conn{
		addr:     addr,
		nc:       nc,
		maxFrame: wel.MaxFrameBytes,
		log:      log,
		waiters:  make(map[uint64]chan reply),
		dead:     make(chan struct{}),
	}
	if c.maxFrame <= 0 || c.maxFrame > wire.MaxFrameBytes {
		c.maxFrame = wire.MaxFrameBytes
	}
	if !start(func() { c.readLoop(rd) }) {
		nc.Close()
		return nil, ErrClosed
	}
	return c, nil
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

// write sends one frame. A cancellation of ctx interrupts a blocked write;
// a write that failed after part of the frame went out leaves the stream
// out of step, so the connection is failed. A write that sent nothing
// leaves the connection usable.
func (c *conn) write(ctx context.Context, req wire.Request) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.nc.SetWriteDeadline(aLongTimeAgo)
		close(fired)
	})
	w := &countingWriter{w: c.nc}
	err := wire.WriteFrame(w, req)
	if !stop() {
		<-fired
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wire.ErrFrameTooLarge):
		return err
	case w.n == 0 && ctx.Err() != nil:
		return context.Cause(ctx)
	}
	c.fail(err)
	return err
}

// countingWriter counts the bytes that reached the socket.
type countingWriter struct {
	w io.Writer
	n int
}

// Write passes p on and counts what was written.
func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += n
	return n, err
}
