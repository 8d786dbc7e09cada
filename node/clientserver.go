package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/connlimit"
	"github.com/ferrymq/ferry/internal/deadline"
	"github.com/ferrymq/ferry/wire"
)

// Limits of the client protocol server.
const (
	// connRequestsMax bounds the requests one connection may have in flight;
	// the reader stops reading until one finishes (backpressure).
	connRequestsMax = 256
	// handshakeTimeout bounds the hello exchange of a new connection.
	handshakeTimeout = 5 * time.Second
	// requestTimeoutMax bounds how long one request may run (a long-poll
	// receive waits at most wire.ReceiveWaitMax of it).
	requestTimeoutMax = wire.ReceiveWaitMax + 10*time.Second
	// acceptBackoffMin and acceptBackoffMax bound the pause after a failed
	// Accept (out of file descriptors, a connection aborted before it was
	// taken): it doubles with every failure in a row.
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	// acceptTroubleWindow is how long after the last failed Accept the node
	// reports not ready; failures in a row come at most acceptBackoffMax
	// apart, so a failing listener stays not ready.
	acceptTroubleWindow = 2 * acceptBackoffMax
	// refuseLinger bounds the life of a refused connection: time to send it
	// the refusal and let the client read it.
	refuseLinger = time.Second
	// refusingMax bounds the refused connections kept lingering at once;
	// beyond it a refused connection is closed at once, without a reason.
	refusingMax = 64
)

// clientServer accepts client connections and serves wire requests.
type clientServer struct {
	clientDeps
	ln  net.Listener
	tls *tls.Config // nil: plaintext

	mu       sync.Mutex
	conns    map[net.Conn]string // served connections and their client IPs; nil once closed
	perIP    map[string]int      // served connections by client IP
	refusing map[net.Conn]struct{}
	wg       sync.WaitGroup

	// acceptFailedAt is when Accept last failed (Unix nanoseconds), 0 if
	// never.
	acceptFailedAt atomic.Int64
}

// clientDeps is what the client port needs of its node: its settings,
// logger and metrics, the token store, the request handler, and the
// channel closed when the node shuts down.
type clientDeps struct {
	cfg     *Config
	logger  *slog.Logger
	metrics *metrics
	auth    *tokenStore
	// handle serves one decoded request for a token (authErr: the
	// connection's authentication failed).
	handle  func(ctx context.Context, req wire.Request, tok *auth.Token, authErr error) wire.Response
	closing <-chan struct{}
}

// newClientServer returns the server of the client port on ln; tlsCfg
// nil serves plaintext.
func newClientServer(deps clientDeps, ln net.Listener, tlsCfg *tls.Config) *clientServer {
	return &clientServer{clientDeps: deps, ln: ln, tls: tlsCfg, conns: map[net.Conn]string{}, perIP: map[string]int{}, refusing: map[net.Conn]struct{}{}}
}

// serve is the accept loop. A failed Accept never ends it (only closing
// the listener does): it counts the failure, logs at most once a second,
// backs off and tries again.
func (s *clientServer) serve() {
	defer s.wg.Done()
	backoff := time.Duration(0)
	var loggedAt time.Time
	for {
		conn, err := s.ln.Accept()
		if err == nil {
			backoff = 0
			if s.tls != nil {
				// The handshake runs on first use, in the connection's
				// own goroutine, under its handshake or refusal deadline.
				conn = tls.Server(conn, s.tls)
			}
			s.admit(conn)
			continue
		}
		if errors.Is(err, net.ErrClosed) || s.closed() {
			return
		}
		backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
		s.acceptFailedAt.Store(time.Now().UnixNano())
		s.metrics.acceptErrors.Inc()
		if time.Since(loggedAt) >= time.Second {
			loggedAt = time.Now()
			s.logger.Warn("client accept failed; backing off", "err", err, "backoff", backoff)
		}
		select {
		case <-time.After(backoff):
		case <-s.closing:
			return
		}
	}
}

// acceptTrouble reports whether Accept failed recently.
func (s *clientServer) acceptTrouble() bool {
	at := s.acceptFailedAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < acceptTroubleWindow
}

// closed reports whether close has run (it drops the connection table).
func (s *clientServer) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns == nil
}

// admit serves conn, or refuses it when the node or the client's IP is at
// its connection limit.
func (s *clientServer) admit(conn net.Conn) {
	ip := connlimit.RemoteIP(conn)
	cfg := s.cfg
	s.mu.Lock()
	if s.conns == nil {
		s.mu.Unlock()
		conn.Close()
		return
	}
	var refusal *wire.Error
	switch {
	case len(s.conns) >= cfg.MaxConns:
		refusal = wire.Errorf(wire.CodeTooManyConnections, "node %s serves %d connections, its limit", cfg.ID, cfg.MaxConns)
	case s.perIP[ip] >= cfg.MaxConnsPerIP:
		refusal = wire.Errorf(wire.CodeTooManyConnections, "node %s serves %d connections from %s, its per-address limit",
			cfg.ID, cfg.MaxConnsPerIP, ip)
	default:
		s.conns[conn] = ip
		s.perIP[ip]++
	}
	s.mu.Unlock()
	if refusal != nil {
		s.refuse(conn, refusal)
		return
	}
	s.wg.Add(1)
	go s.serveConn(conn)
}

// refuse answers conn with refusal in place of a welcome and closes it once
// the client has read it (or after refuseLinger).
func (s *clientServer) refuse(conn net.Conn, refusal *wire.Error) {
	s.metrics.connsRefused.Inc()
	s.mu.Lock()
	if s.conns == nil || len(s.refusing) >= refusingMax {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.refusing[conn] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		conn.SetDeadline(time.Now().Add(refuseLinger))
		if wire.WriteFrame(conn, wire.ErrorResponse(0, refusal)) == nil {
			if cw, ok := conn.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			// Drain the hello until the client closes, so that closing
			// with unread data does not reset the connection before the
			// client has read the refusal.
			io.CopyN(io.Discard, conn, wire.MaxHelloBytes+8)
		}
		conn.Close()
		s.mu.Lock()
		delete(s.refusing, conn)
		s.mu.Unlock()
	}()
}

// forget removes a finished connection from the counts.
func (s *clientServer) forget(conn net.Conn) {
	conn.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	ip, ok := s.conns[conn]
	if !ok {
		return
	}
	delete(s.conns, conn)
	if s.perIP[ip]--; s.perIP[ip] <= 0 {
		delete(s.perIP, ip)
	}
}

// count returns the number of connections served.
func (s *clientServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// close stops accepting, closes every connection and waits for handlers.
func (s *clientServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	for c := range s.refusing {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// errIdle ends a connection that stayed idle past Config.IdleTimeout.
var errIdle = errors.New("idle timeout")

// serverConn is one served connection's state. The read deadline is the
// idle timeout while the reader waits for a frame with no request in
// flight, none while requests are in flight (a long-poll is never cut),
// and the frame timeout once a frame has begun to arrive.
type serverConn struct {
	s  *clientServer
	nc net.Conn
	br *bufio.Reader

	mu       sync.Mutex // guards inflight and waiting, and read deadline changes
	inflight int
	waiting  bool // the reader waits for the first byte of a frame

	// busy counts the requests in flight as atomically readable (inflight
	// needs mu): an answer yields before flushing only when others may
	// follow it.
	busy atomic.Int32

	wmu     sync.Mutex      // serializes response writes
	wdl     deadline.Writer // the write deadline; under wmu
	bw      *bufio.Writer   // buffers responses; under wmu
	writers atomic.Int32    // responses waiting for or holding wmu
}

// serveConn serves one admitted connection until it fails or the node
// closes: the hello exchange under handshakeTimeout, then a reader loop
// that hands every request, with the connection's token as it stands and
// a deadline of at most requestTimeoutMax, to the connection's workers.
// Answers may go back in any order; each carries its request's id.
func (s *clientServer) serveConn(nc net.Conn) {
	defer s.wg.Done()
	defer s.forget(nc)
	c := &serverConn{s: s, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), bw: bufio.NewWriterSize(nc, 64<<10)}
	r := wire.NewReader(c.br)
	nc.SetDeadline(time.Now().Add(handshakeTimeout))
	welcome := wire.Welcome{Version: wire.ProtocolVersion, NodeID: s.cfg.ID, Cluster: s.cfg.ClusterName, Server: "ferryd"}
	ca := &connAuth{store: s.auth, nc: nc}
	if _, err := wire.ServerHandshakeCheck(nc, r, welcome, ca.checkHello); err != nil {
		if errors.Is(err, wire.ErrUnauthorized) {
			s.metrics.connsClosed.WithLabelValues("unauthorized").Inc()
		}
		s.logger.Debug("client handshake failed", "remote", nc.RemoteAddr(), "err", err)
		return
	}
	nc.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deadlines := newRequestDeadlines(ctx)
	defer deadlines.close()
	w := newRequestWorkers(func(cr connRequest) {
		c.write(s.handle(cr.ctx, cr.req, cr.tok, cr.authErr))
		cr.deadline.release()
		c.finished()
	})
	defer w.close()
	for {
		req, err := c.readRequest(r)
		if err != nil {
			c.readFailed(err)
			return
		}
		tok, authErr := ca.token()
		c.started()
		reqCtx, deadline := deadlines.next(time.Now())
		w.run(connRequest{ctx: reqCtx, deadline: deadline, req: req, tok: tok, authErr: authErr})
	}
}

// readRequest waits for the next frame (under the idle deadline when no
// request is in flight), then reads it under the frame deadline.
//
// A frame already whole in the read buffer is read without touching the
// deadlines: no read of the connection happens, and under pipelined load
// most frames arrive several to a TLS record (each deadline change costs a
// runtime timer update).
func (c *serverConn) readRequest(r *wire.Reader) (wire.Request, error) {
	if c.frameBuffered() {
		return r.ReadRequest()
	}
	c.mu.Lock()
	c.waiting = true
	if c.inflight == 0 {
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	} else {
		c.nc.SetReadDeadline(time.Time{})
	}
	c.mu.Unlock()
	_, err := c.br.Peek(1)
	c.mu.Lock()
	c.waiting = false
	c.mu.Unlock()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Only an idle connection has a deadline while waiting.
			return wire.Request{}, errIdle
		}
		return wire.Request{}, err
	}
	if !c.frameBuffered() {
		// The rest of the frame is still to come: bound its arrival. A
		// small request arrives whole with its first byte and needs no
		// deadline change (none of its bytes is read from the network).
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	}
	return r.ReadRequest()
}

// frameBuffered reports whether the read buffer holds a whole frame.
func (c *serverConn) frameBuffered() bool { return wire.FrameBuffered(c.br) }

// started counts a request in flight.
func (c *serverConn) started() {
	c.busy.Add(1)
	c.mu.Lock()
	c.inflight++
	c.mu.Unlock()
}

// finished counts a request answered; the last one in flight arms the
// idle deadline if the reader is waiting.
func (c *serverConn) finished() {
	c.busy.Add(-1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	if c.inflight == 0 && c.waiting {
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	}
}

// write sends one frame under the frame deadline; a client that does not
// read its answers is disconnected when it passes (between 3/4 and the
// whole FrameTimeout after the write began: the deadline is re-armed only
// once it comes that close, not for every frame). Frames go through a
// buffer that the last of the writers queued on wmu flushes, so answers
// finished together leave in one write. Before flushing, that last writer
// yields once when other requests of the connection are in flight: the
// answers of one merged proposal wake their handlers one after the other,
// and without the yield each would find no writer queued behind it and
// flush alone (one TLS record and one write syscall per answer under
// pipelined load).
func (c *serverConn) write(v any) {
	c.writers.Add(1)
	c.wmu.Lock()
	last := c.writers.Add(-1) == 0
	_ = c.wdl.Arm(c.nc, time.Now(), c.s.cfg.FrameTimeout) // a failure shows in the write
	err := wire.WriteFrame(c.bw, v)
	c.wmu.Unlock()
	if err != nil {
		c.writeFailed(err)
		return
	}
	if !last {
		return // a writer queued behind this one flushes
	}
	if c.busy.Load() > 1 {
		// Other requests of this connection are in flight: give their
		// handlers a chance to queue their answers behind this one. A
		// lone request (a synchronous client) flushes at once.
		runtime.Gosched()
		if c.writers.Load() != 0 {
			return // one came meanwhile: the last of those flushes
		}
	}
	c.wmu.Lock()
	if c.bw.Buffered() > 0 {
		_ = c.wdl.Arm(c.nc, time.Now(), c.s.cfg.FrameTimeout)
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.writeFailed(err)
	}
}

// writeFailed closes the connection after a failed write.
func (c *serverConn) writeFailed(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.s.metrics.connsClosed.WithLabelValues("write_timeout").Inc()
		c.s.logger.Debug("client connection cut: answers not read", "remote", c.nc.RemoteAddr())
	}
	c.nc.Close()
}

// readFailed answers a frame-level error on request id 0 before the
// connection closes, so the client learns why.
func (c *serverConn) readFailed(err error) {
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		return
	case errors.Is(err, errIdle):
		c.s.metrics.connsClosed.WithLabelValues("idle").Inc()
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.s.metrics.connsClosed.WithLabelValues("frame_timeout").Inc()
	}
	var we *wire.Error
	if errors.As(err, &we) {
		c.write(wire.ErrorResponse(0, err))
	}
	c.s.logger.Debug("client connection closed", "remote", c.nc.RemoteAddr(), "err", fmt.Sprint(err))
}
