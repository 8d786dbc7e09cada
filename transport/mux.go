package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Backoff between failed accepts on the shared socket (for example when the
// process runs out of file descriptors).
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// tlsRefusalLogEvery bounds how often a refused TLS handshake is logged at
// warn level (the others are logged at debug level and counted).
const tlsRefusalLogEvery = 10 * time.Second

// Mux owns a node's Raft listening socket and routes every accepted
// connection to the group its header names. Create it with NewMux,
// register groups with Group, and Close it when the node stops. All
// methods are safe for concurrent use.
type Mux struct {
	ln        net.Listener
	advertise *net.TCPAddr // returned by StreamLayer.Addr
	dialIP    net.IP       // source IP of outgoing connections
	handshake time.Duration
	serverTLS *tls.Config // nil: plaintext
	clientTLS *tls.Config
	log       *slog.Logger
	done      chan struct{} // closed by Close
	wg        sync.WaitGroup
	// dialing holds a slot per outgoing connection being set up (TCP
	// connect, TLS handshake, header): at most MuxConfig.MaxDialing.
	dialing chan struct{}

	// mu guards everything below, and the registration and connection
	// sets of every StreamLayer of this Mux.
	mu          sync.Mutex
	closed      bool
	groups      map[string]*StreamLayer
	shared      *Shared               // set by NewShared: receives version 2 connections
	pending     map[net.Conn]struct{} // accepted, header not read yet
	pendingIP   map[string]int        // pending connections per remote IP
	maxPending  int                   // MuxConfig.MaxHandshakes
	maxPerIP    int                   // MuxConfig.MaxHandshakesPerIP
	rejected    uint64
	busy        uint64
	busyLogAt   time.Time
	tlsRefused  uint64
	tlsLoggedAt time.Time
}

// Stats is a snapshot of a Mux's groups and connections.
type Stats struct {
	// Groups is the number of registered (open) StreamLayers.
	Groups int
	// Accepted is the number of open connections that were accepted and
	// routed to a group.
	Accepted int
	// Dialed is the number of open connections dialed by this node's
	// groups.
	Dialed int
	// Handshaking is the number of accepted connections whose header has
	// not been read yet.
	Handshaking int
	// Rejected counts, since NewMux, accepted connections closed because
	// of a failed TLS handshake, a bad or late header or an unknown group.
	Rejected uint64
	// Busy counts, since NewMux, accepted connections closed at once
	// because MuxConfig.MaxHandshakes or MaxHandshakesPerIP connections
	// were in handshake already. They are part of Rejected.
	Busy uint64
	// TLSRefused counts, since NewMux, accepted connections closed because
	// their TLS handshake failed (no certificate, one not signed by the
	// cluster CA, not TLS at all, or too slow). They are part of Rejected.
	TLSRefused uint64
}

// NewMux validates cfg, listens on cfg.BindAddr and starts accepting
// connections. Groups registered later receive the connections that name
// them; connections for unregistered groups are closed.
func NewMux(cfg MuxConfig) (*Mux, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen on %s: %w", cfg.BindAddr, err)
	}
	bound := ln.Addr().(*net.TCPAddr)
	advertise := bound
	if cfg.AdvertiseAddr != "" {
		advertise, _ = parseAdvertise(cfg.AdvertiseAddr) // checked by Validate
	}
	dialIP := bound.IP
	if dialIP.IsUnspecified() {
		dialIP = advertise.IP
	}
	m := &Mux{
		ln:         ln,
		advertise:  advertise,
		dialIP:     dialIP,
		handshake:  cfg.HandshakeTimeout,
		serverTLS:  cfg.ServerTLS,
		clientTLS:  cfg.ClientTLS,
		log:        cfg.Logger.With("component", "transport", "addr", advertise.String()),
		done:       make(chan struct{}),
		dialing:    make(chan struct{}, cfg.MaxDialing),
		groups:     make(map[string]*StreamLayer),
		pending:    make(map[net.Conn]struct{}),
		pendingIP:  make(map[string]int),
		maxPending: cfg.MaxHandshakes,
		maxPerIP:   cfg.MaxHandshakesPerIP,
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// Addr returns the advertised address: the one StreamLayer.Addr returns
// and peers must dial.
func (m *Mux) Addr() net.Addr { return m.advertise }

// Group registers a virtual listener for the group id and returns it.
// Connections whose header names id are handed to its Accept from now on.
// It fails with ErrInvalidGroupID, ErrGroupExists while a StreamLayer for
// id is open, or ErrMuxClosed. After the StreamLayer is closed the id may
// be registered again.
//
// A routed connection waits, open and counted in Stats.Accepted, until the
// group's Accept takes it, so the owner must keep calling Accept, as the
// raft.NetworkTransport built by NewTransport does.
func (m *Mux) Group(id string) (*StreamLayer, error) {
	if err := ValidateGroupID(id); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrMuxClosed
	}
	if _, ok := m.groups[id]; ok {
		return nil, fmt.Errorf("%w: %q", ErrGroupExists, id)
	}
	l := &StreamLayer{
		mux:      m,
		id:       id,
		acceptCh: make(chan *trackedConn),
		done:     make(chan struct{}),
		conns:    make(map[*trackedConn]struct{}),
	}
	m.groups[id] = l
	return l, nil
}

// Stats returns the current number of groups and open connections.
func (m *Mux) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Stats{Groups: len(m.groups), Handshaking: len(m.pending), Rejected: m.rejected, TLSRefused: m.tlsRefused, Busy: m.busy}
	if m.shared != nil {
		s.Accepted, s.Dialed = m.shared.connCounts()
		s.Groups += m.shared.groupCount()
	}
	for _, l := range m.groups {
		for c := range l.conns {
			if c.dialed {
				s.Dialed++
			} else {
				s.Accepted++
			}
		}
	}
	return s
}

// Close closes the shared socket, every group's StreamLayer and every
// connection accepted or dialed through the Mux, then waits for the Mux's
// goroutines to end. Raft transports built on its groups see their
// listeners closed and must still be closed by their owners. Close is
// idempotent; calls after the first return nil.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	groups := make([]*StreamLayer, 0, len(m.groups))
	for _, l := range m.groups {
		groups = append(groups, l)
	}
	pending := make([]net.Conn, 0, len(m.pending))
	for c := range m.pending {
		pending = append(pending, c)
	}
	m.mu.Unlock()

	err := m.ln.Close()
	if m.shared != nil {
		m.shared.Close()
	}
	for _, l := range groups {
		_ = l.Close()
	}
	for _, c := range pending {
		_ = c.Close()
	}
	m.wg.Wait()
	return err
}

// acceptLoop accepts connections on the shared socket until Close and
// starts a handshake goroutine for each.
func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	var backoff time.Duration
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if m.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			m.log.Warn("accept failed", "err", err, "retry_in", backoff)
			select {
			case <-m.done:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if !m.admit(conn) {
			continue
		}
		go m.serveHandshake(conn)
	}
}

// admit registers an accepted connection as pending (and adds to m.wg for
// its handshake goroutine), or closes it when the Mux is closed or already
// holds MaxHandshakes pending connections, or MaxHandshakesPerIP from the
// same IP: an unauthenticated peer cannot hold more than that many
// goroutines and descriptors through slow handshakes.
func (m *Mux) admit(conn net.Conn) bool {
	ip := remoteIP(conn)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		_ = conn.Close()
		return false
	}
	if len(m.pending) >= m.maxPending || m.pendingIP[ip] >= m.maxPerIP {
		m.rejected++
		m.busy++
		n, warn := m.busy, time.Since(m.busyLogAt) >= tlsRefusalLogEvery
		if warn {
			m.busyLogAt = time.Now()
		}
		total, fromIP := len(m.pending), m.pendingIP[ip]
		m.mu.Unlock()
		_ = conn.Close()
		if warn {
			m.log.Warn("raft connection refused: too many connections in handshake", "remote", ip,
				"handshaking", total, "handshaking_from_remote", fromIP, "refused_total", n)
		}
		return false
	}
	m.pending[conn] = struct{}{}
	m.pendingIP[ip]++
	m.wg.Add(1)
	m.mu.Unlock()
	return true
}

// forget removes a connection admit registered; m.mu must be held.
func (m *Mux) forget(conn net.Conn) {
	delete(m.pending, conn)
	ip := remoteIP(conn)
	if m.pendingIP[ip]--; m.pendingIP[ip] <= 0 {
		delete(m.pendingIP, ip)
	}
}

// remoteIP is the IP a connection came from, as a string key.
func remoteIP(conn net.Conn) string {
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return conn.RemoteAddr().String()
}

// serveHandshake reads conn's header under the handshake deadline and
// hands conn to the group it names, or closes it.
func (m *Mux) serveHandshake(raw net.Conn) {
	defer m.wg.Done()
	conn, err := m.serverHandshake(raw)
	var h connHeader
	if err == nil {
		h, err = m.receiveHeader(conn)
	}

	m.mu.Lock()
	m.forget(raw)
	if m.closed {
		m.mu.Unlock()
		_ = raw.Close()
		return
	}
	if err == nil && h.class != 0 {
		shared := m.shared
		if shared == nil {
			err = fmt.Errorf("%w: shared transport not running", ErrUnknownGroup)
		} else {
			m.mu.Unlock()
			shared.adopt(conn, raw, h.class)
			return
		}
	}
	var l *StreamLayer
	if err == nil {
		if l = m.groups[h.group]; l == nil {
			err = fmt.Errorf("%w: %q", ErrUnknownGroup, h.group)
		}
	}
	if err != nil {
		m.rejected++
		m.mu.Unlock()
		_ = raw.Close()
		m.log.Debug("connection rejected", "remote", raw.RemoteAddr().String(), "err", err)
		return
	}
	tc := &trackedConn{Conn: conn, raw: raw, layer: l}
	l.conns[tc] = struct{}{}
	m.mu.Unlock()

	select {
	case l.acceptCh <- tc:
	case <-l.done:
		// Close has already closed tc, which it found in l.conns.
	}
}

// serverHandshake completes the TLS handshake of an accepted connection
// under the handshake deadline (a no-op without TLS). A failure closes
// nothing: the caller does.
func (m *Mux) serverHandshake(raw net.Conn) (net.Conn, error) {
	if m.serverTLS == nil {
		return raw, nil
	}
	if err := raw.SetDeadline(time.Now().Add(m.handshake)); err != nil {
		return nil, fmt.Errorf("%w: set deadline: %w", ErrTLSRefused, err)
	}
	conn := tls.Server(raw, m.serverTLS)
	if err := conn.Handshake(); err != nil {
		m.tlsRefusal(raw, err)
		return nil, fmt.Errorf("%w: %w", ErrTLSRefused, err)
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("%w: clear deadline: %w", ErrTLSRefused, err)
	}
	return conn, nil
}

// tlsRefusal counts a failed TLS handshake and logs it at warn level at
// most every tlsRefusalLogEvery.
func (m *Mux) tlsRefusal(raw net.Conn, err error) {
	m.mu.Lock()
	m.tlsRefused++
	warn := time.Since(m.tlsLoggedAt) >= tlsRefusalLogEvery
	if warn {
		m.tlsLoggedAt = time.Now()
	}
	n := m.tlsRefused
	m.mu.Unlock()
	if warn {
		m.log.Warn("raft connection refused: TLS handshake failed (not a cluster member?)",
			"remote", raw.RemoteAddr().String(), "err", err, "refused_total", n)
	}
}

// receiveHeader reads conn's header with the handshake deadline set, and
// clears the deadline before returning.
func (m *Mux) receiveHeader(conn net.Conn) (connHeader, error) {
	if err := conn.SetReadDeadline(time.Now().Add(m.handshake)); err != nil {
		return connHeader{}, fmt.Errorf("%w: set deadline: %w", ErrBadHeader, err)
	}
	h, err := readHeader(conn)
	if err != nil {
		return connHeader{}, err
	}
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return connHeader{}, fmt.Errorf("%w: clear deadline: %w", ErrBadHeader, err)
	}
	return h, nil
}

// isClosed reports whether Close has been called.
func (m *Mux) isClosed() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}
