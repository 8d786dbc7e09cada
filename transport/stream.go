package transport

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// StreamLayer is one group's virtual listener and dialer on a Mux. It
// implements raft.StreamLayer: pass it to NewTransport (or to
// raft.NewNetworkTransportWithConfig). All methods are safe for concurrent
// use.
type StreamLayer struct {
	mux      *Mux
	id       string
	acceptCh chan *trackedConn // unbuffered: handed over only to a waiting Accept
	done     chan struct{}     // closed by Close

	// Guarded by mux.mu.
	closed bool
	conns  map[*trackedConn]struct{} // open connections, accepted and dialed
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// ID returns the group id the StreamLayer was registered under.
func (l *StreamLayer) ID() string { return l.id }

// Accept waits for the next connection routed to this group. It returns
// ErrGroupClosed once the StreamLayer or its Mux is closed. The header has
// been consumed: the connection's first byte is the dialer's first raft
// byte, and no deadline is set.
func (l *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.acceptCh:
		select {
		case <-l.done:
			_ = c.Close()
			return nil, ErrGroupClosed
		default:
			return c, nil
		}
	case <-l.done:
		return nil, ErrGroupClosed
	}
}

// Close stops this group only: it unregisters the group from the Mux (so
// the id can be registered again), makes Accept return ErrGroupClosed and
// force-closes every connection the group accepted or dialed. The shared
// socket and other groups are untouched. Close is idempotent.
//
// raft.NetworkTransport.Close calls it, so closing the transport after
// raft.Raft.Shutdown is enough to free the group.
func (l *StreamLayer) Close() error {
	m := l.mux
	m.mu.Lock()
	if l.closed {
		m.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	if m.groups[l.id] == l {
		delete(m.groups, l.id)
	}
	conns := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	clear(l.conns)
	m.mu.Unlock()

	for _, c := range conns {
		c.forceClose()
	}
	return nil
}

// Addr returns the Mux's advertised address, which raft uses as this
// server's address.
func (l *StreamLayer) Addr() net.Addr { return l.mux.advertise }

// Dial connects to the Mux at address from this node's own IP and writes
// the header naming this group, all within timeout (no limit when timeout
// is zero, except HandshakeTimeout for the header). The connection is
// tracked, so Close and Mux.Close close it. It fails with ErrGroupClosed
// or ErrMuxClosed once those are closed.
func (l *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	conn, raw, err := l.mux.dial(string(address), timeout, appendHeader(nil, l.id))
	if err != nil {
		return nil, fmt.Errorf("transport: group %q: %w", l.id, err)
	}
	tc, err := l.track(conn, raw, true)
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	return tc, nil
}

// dial connects to the Mux at address from this node's own IP, completes
// TLS and writes header, all within timeout (no limit when timeout is
// zero, except HandshakeTimeout for TLS and the header), holding one of
// the MaxDialing slots meanwhile. It returns the connection to use (TLS
// over raw, or raw) and the TCP connection under it.
func (m *Mux) dial(address string, timeout time.Duration, header []byte) (conn, raw net.Conn, err error) {
	start := time.Now()
	release, err := m.dialSlot(start, timeout)
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", address, err)
	}
	defer release()
	if timeout > 0 {
		timeout -= time.Since(start)
	}
	d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: m.dialIP}}
	raw, err = d.Dial("tcp", address)
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", address, err)
	}
	deadline := start.Add(m.handshake)
	if timeout > 0 {
		deadline = start.Add(timeout)
	}
	conn, err = m.clientHandshake(raw, deadline)
	if err != nil {
		_ = raw.Close()
		return nil, nil, fmt.Errorf("TLS with %s: %w", address, err)
	}
	if err := writeHeader(conn, header, deadline); err != nil {
		_ = raw.Close()
		return nil, nil, fmt.Errorf("header to %s: %w", address, err)
	}
	return conn, raw, nil
}

// dialSlot waits for one of the Mux's MaxDialing slots, until timeout
// after start (no limit when timeout is zero), and returns its release.
func (m *Mux) dialSlot(start time.Time, timeout time.Duration) (release func(), err error) {
	release = func() { <-m.dialing }
	select {
	case m.dialing <- struct{}{}:
		return release, nil
	default:
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout - time.Since(start))
		defer t.Stop()
		expired = t.C
	}
	select {
	case m.dialing <- struct{}{}:
		return release, nil
	case <-expired:
		return nil, fmt.Errorf("%w: %d connections of this node were being set up for %v", ErrDialBusy, cap(m.dialing), timeout)
	case <-m.done:
		return nil, ErrMuxClosed
	}
}

// clientHandshake completes the TLS handshake of a dialed connection
// before deadline (a no-op without TLS).
func (m *Mux) clientHandshake(raw net.Conn, deadline time.Time) (net.Conn, error) {
	if m.clientTLS == nil {
		return raw, nil
	}
	if err := raw.SetDeadline(deadline); err != nil {
		return nil, err
	}
	conn := tls.Client(raw, m.clientTLS)
	if err := conn.Handshake(); err != nil {
		return nil, err
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return conn, nil
}

// writeHeader writes a connection header to conn before deadline, then
// clears the write deadline.
func writeHeader(conn net.Conn, header []byte, deadline time.Time) error {
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	if _, err := conn.Write(header); err != nil {
		return err
	}
	return conn.SetWriteDeadline(time.Time{})
}

// checkOpen returns ErrMuxClosed or ErrGroupClosed when the Mux or the
// group is closed.
func (l *StreamLayer) checkOpen() error {
	l.mux.mu.Lock()
	defer l.mux.mu.Unlock()
	return l.openLocked()
}

// openLocked is checkOpen with mux.mu held.
func (l *StreamLayer) openLocked() error {
	switch {
	case l.mux.closed:
		return ErrMuxClosed
	case l.closed:
		return ErrGroupClosed
	}
	return nil
}

// track wraps conn and records it in the group's connection set, unless
// the group or Mux is closed.
func (l *StreamLayer) track(conn, raw net.Conn, dialed bool) (*trackedConn, error) {
	l.mux.mu.Lock()
	defer l.mux.mu.Unlock()
	if err := l.openLocked(); err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: conn, raw: raw, layer: l, dialed: dialed}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// trackedConn is a connection recorded in its group's set until closed.
// Once force-closed by its group, its reads report io.EOF: the owner (raft)
// sees a clean end of stream instead of logging a decode error for every
// connection of a group that is shutting down.
type trackedConn struct {
	net.Conn          // the TLS connection over raw, or raw itself
	raw      net.Conn // the TCP connection
	layer    *StreamLayer
	dialed   bool
	forced   atomic.Bool
	once     sync.Once
}

// Read reads from the connection, reporting io.EOF after a force-close.
func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && c.forced.Load() {
		err = io.EOF
	}
	return n, err
}

// forceClose closes the connection on behalf of its group; the caller has
// already removed it from the group's set.
func (c *trackedConn) forceClose() {
	c.forced.Store(true)
	_ = c.raw.Close() // no TLS close alert: it could block on a stuck peer
}

// Close closes the connection and removes it from its group's set.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		m := c.layer.mux
		m.mu.Lock()
		delete(c.layer.conns, c)
		m.mu.Unlock()
	})
	return err
}
