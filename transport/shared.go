package transport

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Defaults of SharedConfig.
const (
	// DefaultHeartbeatLinger is how long a heartbeat waits for others to
	// the same peer before their frame leaves: at most 100 heartbeat
	// frames a second go to a peer, whatever the number of groups. raft
	// sends a group's heartbeats every HeartbeatTimeout/10 (50-100 ms with
	// the partitions' 500 ms) and steps a leader down after
	// LeaderLeaseTimeout (500 ms) without answers, so 10 ms more on a
	// round trip leaves the lease and the followers' timeouts well met.
	DefaultHeartbeatLinger = 10 * time.Millisecond
	// DefaultMaxHeartbeatsPerFrame bounds one coalesced heartbeat frame.
	DefaultMaxHeartbeatsPerFrame = 4096
	// DefaultMaxFrameBytes bounds one frame on a shared connection.
	DefaultMaxFrameBytes = 64 << 20
	// DefaultMaxCallsPerConn bounds the RPCs in flight on one dialed
	// connection.
	DefaultMaxCallsPerConn = 8192
	// DefaultMaxQueuedPerGroup bounds the appends queued for one group
	// from one node; beyond, an append is answered with an error at once.
	DefaultMaxQueuedPerGroup = 64
	// DefaultMaxQueuedBytes bounds the bytes of requests read from one
	// accepted connection and not yet answered.
	DefaultMaxQueuedBytes = 256 << 20
	// DefaultMaxSnapshotsPerPeer bounds the snapshots sent to one peer at
	// once (each on its own connection).
	DefaultMaxSnapshotsPerPeer = 4
	// DefaultSnapshotBytesPerSecond is the default snapshot streaming
	// rate of a node, to all peers together: 64 MiB/s.
	DefaultSnapshotBytesPerSecond = 64 << 20
	// DefaultMaxPeers bounds the peer addresses a node keeps connections
	// to.
	DefaultMaxPeers = 1024
	// DefaultRedialAfter is how long a failed dial to a peer is reported
	// to every caller before the peer is dialed again, so that thousands
	// of groups cannot dial a dead node at once.
	DefaultRedialAfter = 100 * time.Millisecond
	// snapshotTimeoutScale is the snapshot size that earns one more
	// Timeout of deadline, as in raft's network transport.
	snapshotTimeoutScale = 256 << 10
)

// SharedConfig configures a Shared transport. A zero field means "use the
// default"; DefaultSharedConfig spells the defaults out.
type SharedConfig struct {
	// Timeout bounds each RPC from send to answer (scaled up for
	// snapshots by their size) and each dial. Zero means DefaultTimeout.
	Timeout time.Duration
	// RPCBytesMax bounds the entry data of one AppendEntries RPC; larger
	// requests are sent in parts (see BoundedTransport). Zero means
	// DefaultRPCBytesMax.
	RPCBytesMax int
	// MaxFrameBytes bounds one frame read from a connection; a longer one
	// closes the connection. It must exceed RPCBytesMax. Zero means
	// DefaultMaxFrameBytes.
	MaxFrameBytes int
	// HeartbeatLinger is how long the first heartbeat to a peer waits for
	// others before their frame leaves. Zero means
	// DefaultHeartbeatLinger.
	HeartbeatLinger time.Duration
	// MaxHeartbeatsPerFrame bounds one coalesced heartbeat frame. Zero
	// means DefaultMaxHeartbeatsPerFrame.
	MaxHeartbeatsPerFrame int
	// MaxCallsPerConn bounds the RPCs in flight on one dialed connection;
	// beyond, an RPC fails at once with ErrBusy. Zero means
	// DefaultMaxCallsPerConn.
	MaxCallsPerConn int
	// MaxQueuedPerGroup bounds the appends queued for one group from one
	// connection; beyond, they are answered with ErrBusy. Zero means
	// DefaultMaxQueuedPerGroup.
	MaxQueuedPerGroup int
	// MaxQueuedBytes bounds the request bytes read from one accepted
	// connection and not answered yet; beyond, requests are answered with
	// ErrBusy. Zero means DefaultMaxQueuedBytes.
	MaxQueuedBytes int
	// MaxSnapshotsPerPeer bounds concurrent snapshot sends to one peer.
	// Zero means DefaultMaxSnapshotsPerPeer.
	MaxSnapshotsPerPeer int
	// MaxPeers bounds the peers connections are kept to. Zero means
	// DefaultMaxPeers.
	MaxPeers int
	// SnapshotBytesPerSecond bounds the bytes per second of every snapshot
	// this node streams, to all peers together. Zero means
	// DefaultSnapshotBytesPerSecond; negative is unlimited.
	SnapshotBytesPerSecond int64
	// RedialAfter is how long a failed dial is reported to callers before
	// the peer is dialed again. Zero means DefaultRedialAfter.
	RedialAfter time.Duration
	// ProbeInterval is how often a peer whose liveness groups asked about
	// (see PeerAlive) is probed on its control connection. Zero means
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// ProbeTimeout is how long such a peer may go without answering on its
	// connections before it counts as lost; it must exceed
	// ProbeInterval. Zero means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// AddressProvider, when set, resolves a peer's raft.ServerID to the
	// address to dial, overriding the address in the raft configuration.
	AddressProvider raft.ServerAddressProvider
	// Logger receives connection failures. Nil means slog.Default().
	Logger *slog.Logger
}

// DefaultSharedConfig returns a SharedConfig with every default written
// out.
func DefaultSharedConfig() SharedConfig {
	return SharedConfig{
		Timeout: DefaultTimeout, RPCBytesMax: DefaultRPCBytesMax, MaxFrameBytes: DefaultMaxFrameBytes,
		HeartbeatLinger: DefaultHeartbeatLinger, MaxHeartbeatsPerFrame: DefaultMaxHeartbeatsPerFrame,
		MaxCallsPerConn: DefaultMaxCallsPerConn, MaxQueuedPerGroup: DefaultMaxQueuedPerGroup,
		MaxQueuedBytes: DefaultMaxQueuedBytes, MaxSnapshotsPerPeer: DefaultMaxSnapshotsPerPeer,
		MaxPeers: DefaultMaxPeers, RedialAfter: DefaultRedialAfter, SnapshotBytesPerSecond: DefaultSnapshotBytesPerSecond,
		ProbeInterval: DefaultProbeInterval, ProbeTimeout: DefaultProbeTimeout,
	}
}

func (c SharedConfig) withDefaults() SharedConfig {
	d := DefaultSharedConfig()
	setDuration := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setDuration(&c.Timeout, d.Timeout)
	setDuration(&c.HeartbeatLinger, d.HeartbeatLinger)
	setDuration(&c.RedialAfter, d.RedialAfter)
	setDuration(&c.ProbeInterval, d.ProbeInterval)
	setDuration(&c.ProbeTimeout, d.ProbeTimeout)
	setInt(&c.RPCBytesMax, d.RPCBytesMax)
	setInt(&c.MaxFrameBytes, d.MaxFrameBytes)
	setInt(&c.MaxHeartbeatsPerFrame, d.MaxHeartbeatsPerFrame)
	setInt(&c.MaxCallsPerConn, d.MaxCallsPerConn)
	setInt(&c.MaxQueuedPerGroup, d.MaxQueuedPerGroup)
	setInt(&c.MaxQueuedBytes, d.MaxQueuedBytes)
	setInt(&c.MaxSnapshotsPerPeer, d.MaxSnapshotsPerPeer)
	setInt(&c.MaxPeers, d.MaxPeers)
	if c.SnapshotBytesPerSecond == 0 {
		c.SnapshotBytesPerSecond = d.SnapshotBytesPerSecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first invalid field, after zero fields have been
// replaced by their defaults. The error wraps ErrInvalidConfig and names
// the field.
func (c SharedConfig) Validate() error {
	c = c.withDefaults()
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Timeout", int64(c.Timeout)}, {"HeartbeatLinger", int64(c.HeartbeatLinger)}, {"RedialAfter", int64(c.RedialAfter)},
		{"ProbeInterval", int64(c.ProbeInterval)}, {"ProbeTimeout", int64(c.ProbeTimeout)},
		{"RPCBytesMax", int64(c.RPCBytesMax)}, {"MaxFrameBytes", int64(c.MaxFrameBytes)},
		{"MaxHeartbeatsPerFrame", int64(c.MaxHeartbeatsPerFrame)}, {"MaxCallsPerConn", int64(c.MaxCallsPerConn)},
		{"MaxQueuedPerGroup", int64(c.MaxQueuedPerGroup)}, {"MaxQueuedBytes", int64(c.MaxQueuedBytes)},
		{"MaxSnapshotsPerPeer", int64(c.MaxSnapshotsPerPeer)}, {"MaxPeers", int64(c.MaxPeers)},
	} {
		if f.v < 0 {
			return fmt.Errorf("%w: SharedConfig.%s = %d: must not be negative", ErrInvalidConfig, f.name, f.v)
		}
	}
	if c.MaxFrameBytes <= c.RPCBytesMax {
		return fmt.Errorf("%w: SharedConfig.MaxFrameBytes = %d: must exceed RPCBytesMax (%d)", ErrInvalidConfig, c.MaxFrameBytes, c.RPCBytesMax)
	}
	if c.ProbeTimeout <= c.ProbeInterval {
		return fmt.Errorf("%w: SharedConfig.ProbeTimeout = %v: must exceed ProbeInterval (%v)", ErrInvalidConfig, c.ProbeTimeout, c.ProbeInterval)
	}
	if c.MaxFrameBytes > 1<<30 {
		return fmt.Errorf("%w: SharedConfig.MaxFrameBytes = %d: at most 1 GiB", ErrInvalidConfig, c.MaxFrameBytes)
	}
	return nil
}

// Shared is a node's raft transport for all its groups: every group's RPCs
// to a peer node travel over the same few connections (see the package
// documentation). Create it with NewShared on the node's Mux, get each
// group's raft.Transport from Group, and Close it (or the Mux) when the
// node stops. All methods are safe for concurrent use.
type Shared struct {
	mux *Mux
	cfg SharedConfig
	log *slog.Logger

	mu      sync.Mutex
	closed  bool
	groups  map[string]*GroupTransport
	peers   map[string]*peer
	inbound map[*inbound]struct{}
	done    chan struct{}
	wg      sync.WaitGroup

	heartbeats      atomic.Uint64
	heartbeatFrames atomic.Uint64
	// snapshots paces every snapshot sent (pacer.go).
	snapshots *pacer
}

// SharedStats counts a Shared transport's coalescing since NewShared.
type SharedStats struct {
	// Heartbeats is the number of heartbeats sent.
	Heartbeats uint64
	// HeartbeatFrames is the number of frames they left in.
	HeartbeatFrames uint64
	// SnapshotBytesSent is the number of snapshot bytes streamed to peers.
	SnapshotBytesSent uint64
}

// Stats returns the transport's counters.
func (s *Shared) Stats() SharedStats {
	return SharedStats{Heartbeats: s.heartbeats.Load(), HeartbeatFrames: s.heartbeatFrames.Load(), SnapshotBytesSent: s.snapshots.bytesSent()}
}

// NewShared validates cfg and starts the shared transport on mux: from then
// on the Mux hands it every connection of the shared kind. A Mux carries at
// most one Shared.
func NewShared(mux *Mux, cfg SharedConfig) (*Shared, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Shared{
		mux: mux, cfg: cfg,
		log:       cfg.Logger.With("component", "raft-transport", "addr", mux.advertise.String()),
		groups:    make(map[string]*GroupTransport),
		peers:     make(map[string]*peer),
		inbound:   make(map[*inbound]struct{}),
		done:      make(chan struct{}),
		snapshots: &pacer{bytesPerSecond: cfg.SnapshotBytesPerSecond},
	}
	mux.mu.Lock()
	defer mux.mu.Unlock()
	if mux.closed {
		return nil, ErrMuxClosed
	}
	if mux.shared != nil {
		return nil, fmt.Errorf("%w: the Mux already carries a shared transport", ErrInvalidConfig)
	}
	mux.shared = s
	s.wg.Add(1)
	go s.sweep()
	return s, nil
}

// Group registers the group id and returns its raft transport, which cuts
// AppendEntries into RPCs of at most RPCBytesMax. It fails with
// ErrInvalidGroupID, ErrGroupExists while a transport for id is open, or
// ErrMuxClosed. Close the transport after raft.Raft.Shutdown has returned;
// the id may then be registered again.
func (s *Shared) Group(id string) (*BoundedTransport, error) {
	if err := ValidateGroupID(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrMuxClosed
	}
	if _, ok := s.groups[id]; ok {
		return nil, fmt.Errorf("%w: %q", ErrGroupExists, id)
	}
	g := newGroupTransport(s, id)
	s.groups[id] = g
	return &BoundedTransport{RPCBytesMax: s.cfg.RPCBytesMax, Transport: g}, nil
}

// group returns the open transport of a group, or nil.
func (s *Shared) group(id string) *GroupTransport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups[id]
}

// unregister removes g (if it is still the registered transport of its id).
func (s *Shared) unregister(g *GroupTransport) {
	s.mu.Lock()
	if s.groups[g.id] == g {
		delete(s.groups, g.id)
	}
	s.mu.Unlock()
}

// peer returns the peer of an address, creating it within MaxPeers.
func (s *Shared) peer(addr string) (*peer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrMuxClosed
	}
	if p := s.peers[addr]; p != nil {
		return p, nil
	}
	if len(s.peers) >= s.cfg.MaxPeers {
		return nil, fmt.Errorf("%w: %d peers already (SharedConfig.MaxPeers)", ErrBusy, len(s.peers))
	}
	p := newPeer(s, addr)
	s.peers[addr] = p
	return p, nil
}

// adopt takes an accepted connection of a shared class and serves it.
func (s *Shared) adopt(conn, raw net.Conn, class byte) {
	in := newInbound(s, conn, raw, class)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = raw.Close()
		return
	}
	s.inbound[in] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		in.serve()
		s.mu.Lock()
		delete(s.inbound, in)
		s.mu.Unlock()
	}()
}

// connCounts returns the accepted and dialed connections now open.
func (s *Shared) connCounts() (accepted, dialed int) {
	s.mu.Lock()
	accepted = len(s.inbound)
	s.mu.Unlock()
	for _, p := range s.peerList() {
		dialed += p.openLinks()
	}
	return accepted, dialed
}

// peerList returns the peers known now.
func (s *Shared) peerList() []*peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	peers := make([]*peer, 0, len(s.peers))
	for _, p := range s.peers {
		peers = append(peers, p)
	}
	return peers
}

// groupCount returns the registered groups.
func (s *Shared) groupCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.groups)
}

// sweep fails calls past their deadline, a few times per Timeout (calls
// carry no timer of their own), and probes watched peers every
// ProbeInterval.
func (s *Shared) sweep() {
	defer s.wg.Done()
	every := min(max(s.cfg.Timeout/8, 10*time.Millisecond), time.Second, s.cfg.ProbeInterval)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			for _, p := range s.peerList() {
				p.expire(now)
				s.checkLiveness(p, now)
			}
		}
	}
}

// Close closes every connection of the shared transport and fails every
// RPC in flight; groups' transports report ErrMuxClosed from then on. It
// waits for the transport's goroutines. Close is idempotent.
func (s *Shared) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	peers := make([]*peer, 0, len(s.peers))
	for _, p := range s.peers {
		peers = append(peers, p)
	}
	ins := make([]*inbound, 0, len(s.inbound))
	for in := range s.inbound {
		ins = append(ins, in)
	}
	groups := make([]*GroupTransport, 0, len(s.groups))
	for _, g := range s.groups {
		groups = append(groups, g)
	}
	s.mu.Unlock()
	for _, p := range peers {
		p.close(ErrMuxClosed)
	}
	for _, in := range ins {
		in.close()
	}
	for _, g := range groups {
		_ = g.Close()
	}
	s.wg.Wait()
	return nil
}
