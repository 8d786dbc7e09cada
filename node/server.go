package node

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

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
)

// clientServer accepts client connections and serves wire requests.
type clientServer struct {
	n     *Node
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func (s *clientServer) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.conns == nil {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(conn)
	}
}

// close stops accepting, closes every connection and waits for handlers.
func (s *clientServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *clientServer) serveConn(conn net.Conn) {
	defer s.wg.Done()
	defer func() {
		conn.Close()
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
	}()
	r := wire.NewReader(conn)
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	welcome := wire.Welcome{Version: wire.ProtocolVersion, NodeID: s.n.cfg.ID, Cluster: s.n.cfg.ClusterName, Server: "ferryd"}
	if _, err := wire.ServerHandshake(conn, r, welcome); err != nil {
		s.n.logger.Debug("client handshake failed", "remote", conn.RemoteAddr(), "err", err)
		return
	}
	conn.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sem := make(chan struct{}, connRequestsMax)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		req, err := r.ReadRequest()
		if err != nil {
			s.readFailed(conn, err)
			return
		}
		sem <- struct{}{}
		inflight.Add(1)
		go func() {
			defer func() { <-sem; inflight.Done() }()
			resp := s.n.handle(ctx, req)
			if err := wire.WriteFrame(conn, resp); err != nil {
				conn.Close()
			}
		}()
	}
}

// readFailed answers a frame-level error on request id 0 before the
// connection closes, so the client learns why.
func (s *clientServer) readFailed(conn net.Conn, err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	var we *wire.Error
	if errors.As(err, &we) {
		wire.WriteFrame(conn, wire.ErrorResponse(0, err))
	}
	s.n.logger.Debug("client connection closed", "remote", conn.RemoteAddr(), "err", err)
}
