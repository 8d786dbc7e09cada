package transport

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Defaults of MuxConfig and TransportConfig.
const (
	// DefaultHandshakeTimeout is used when MuxConfig.HandshakeTimeout is
	// zero: how long an accepted connection may take to send its header.
	DefaultHandshakeTimeout = 5 * time.Second

	// DefaultMaxDialing is used when MuxConfig.MaxDialing is zero: the
	// outgoing connections a node sets up at once, over all its groups.
	DefaultMaxDialing = 32

	// DefaultMaxHandshakes and DefaultMaxHandshakesPerIP are used when
	// MuxConfig.MaxHandshakes and MaxHandshakesPerIP are zero: accepted
	// connections in handshake at once, in all and from one IP. A peer
	// node sets up at most its MaxDialing connections at once.
	DefaultMaxHandshakes      = 512
	DefaultMaxHandshakesPerIP = 128

	// DefaultMaxPool is used when TransportConfig.MaxPool is zero or
	// negative: idle outgoing connections kept per peer and group.
	DefaultMaxPool = 3

	// DefaultTimeout is used when TransportConfig.Timeout is zero or
	// negative: raft's I/O deadline per RPC, and the dial timeout.
	DefaultTimeout = 10 * time.Second
)

// MuxConfig configures a Mux. A zero field means "use the default";
// DefaultMuxConfig spells the defaults out.
type MuxConfig struct {
	// BindAddr is the "host:port" the shared socket listens on, e.g.
	// "127.0.0.11:7001". Port 0 picks a free port. Required.
	BindAddr string

	// AdvertiseAddr is the "ip:port" other nodes dial to reach this one,
	// returned by StreamLayer.Addr and so used by raft as this server's
	// address. The IP must be a literal, not a host name, and not
	// unspecified. Empty means the bound address (with the port picked by
	// the kernel when BindAddr's port is 0); it is required when BindAddr
	// binds all interfaces ("0.0.0.0:7001", ":7001").
	AdvertiseAddr string

	// HandshakeTimeout bounds the time an accepted connection may take to
	// send its header before it is dropped. Zero means
	// DefaultHandshakeTimeout; negative is invalid.
	HandshakeTimeout time.Duration

	// MaxDialing bounds the outgoing connections this node's groups set
	// up at once (TCP connect, TLS handshake and header); a dial waits for
	// a slot within its timeout. When hundreds of groups start together
	// each dials its peers, and without a bound the handshakes share the
	// CPU until they time out and are dialed again, so connections and
	// file descriptors pile up. Zero means DefaultMaxDialing; negative is
	// invalid.
	MaxDialing int

	// MaxHandshakes and MaxHandshakesPerIP bound the accepted connections
	// whose TLS handshake and header are not done yet, in all and from one
	// remote IP; a connection beyond either is closed at once (counted in
	// Stats.Busy), so that peers without a certificate cannot hold more
	// goroutines and file descriptors than that. MaxHandshakesPerIP should
	// exceed the peers' MaxDialing times the nodes sharing an IP. Zero
	// means DefaultMaxHandshakes and DefaultMaxHandshakesPerIP; negative
	// is invalid.
	MaxHandshakes      int
	MaxHandshakesPerIP int

	// ServerTLS and ClientTLS, when set, wrap every connection in TLS:
	// accepted connections complete a TLS handshake with ServerTLS before
	// their header is read, dialed ones with ClientTLS before it is
	// written. For mutual authentication ServerTLS must require and verify
	// client certificates. Both or neither must be set; nil means
	// plaintext.
	ServerTLS *tls.Config
	ClientTLS *tls.Config

	// Logger receives handshake rejections (debug), TLS refusals (warn, at
	// most every tlsRefusalLogEvery) and accept failures (warn). Nil means
	// slog.Default().
	Logger *slog.Logger
}

// DefaultMuxConfig returns the configuration of a Mux listening on
// bindAddr, with every default written out.
func DefaultMuxConfig(bindAddr string) MuxConfig {
	return MuxConfig{
		BindAddr:           bindAddr,
		HandshakeTimeout:   DefaultHandshakeTimeout,
		MaxDialing:         DefaultMaxDialing,
		MaxHandshakes:      DefaultMaxHandshakes,
		MaxHandshakesPerIP: DefaultMaxHandshakesPerIP,
	}
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c MuxConfig) withDefaults() MuxConfig {
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.MaxDialing == 0 {
		c.MaxDialing = DefaultMaxDialing
	}
	if c.MaxHandshakes == 0 {
		c.MaxHandshakes = DefaultMaxHandshakes
	}
	if c.MaxHandshakesPerIP == 0 {
		c.MaxHandshakesPerIP = DefaultMaxHandshakesPerIP
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first invalid field, after zero fields have been
// replaced by their defaults. The error wraps ErrInvalidConfig and names
// the field, its value and what it must be.
func (c MuxConfig) Validate() error {
	c = c.withDefaults()
	if c.BindAddr == "" {
		return fmt.Errorf("%w: MuxConfig.BindAddr is empty: must be host:port", ErrInvalidConfig)
	}
	host, port, err := net.SplitHostPort(c.BindAddr)
	if err != nil {
		return fmt.Errorf("%w: MuxConfig.BindAddr = %q: must be host:port: %v", ErrInvalidConfig, c.BindAddr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%w: MuxConfig.BindAddr = %q: port must be a number between 0 and 65535",
			ErrInvalidConfig, c.BindAddr)
	}
	if c.AdvertiseAddr != "" {
		if _, err := parseAdvertise(c.AdvertiseAddr); err != nil {
			return fmt.Errorf("%w: MuxConfig.AdvertiseAddr = %q: %v", ErrInvalidConfig, c.AdvertiseAddr, err)
		}
	} else if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		return fmt.Errorf("%w: MuxConfig.AdvertiseAddr is empty: required when MuxConfig.BindAddr = %q binds all interfaces",
			ErrInvalidConfig, c.BindAddr)
	}
	if (c.ServerTLS == nil) != (c.ClientTLS == nil) {
		return fmt.Errorf("%w: MuxConfig.ServerTLS and MuxConfig.ClientTLS must be set together", ErrInvalidConfig)
	}
	if c.ServerTLS != nil && c.ServerTLS.ClientAuth != tls.RequireAndVerifyClientCert {
		return fmt.Errorf("%w: MuxConfig.ServerTLS.ClientAuth must be tls.RequireAndVerifyClientCert (mutual TLS)", ErrInvalidConfig)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxDialing", c.MaxDialing}, {"MaxHandshakes", c.MaxHandshakes}, {"MaxHandshakesPerIP", c.MaxHandshakesPerIP}} {
		if f.v < 0 {
			return fmt.Errorf("%w: MuxConfig.%s = %d: must not be negative", ErrInvalidConfig, f.name, f.v)
		}
	}
	if c.HandshakeTimeout < 0 {
		return fmt.Errorf("%w: MuxConfig.HandshakeTimeout = %v: must not be negative", ErrInvalidConfig, c.HandshakeTimeout)
	}
	return nil
}

// parseAdvertise parses an advertised "ip:port": a literal, specified IP
// and a non-zero port.
func parseAdvertise(s string) (*net.TCPAddr, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, fmt.Errorf("must be a literal ip:port: %v", err)
	}
	if ap.Addr().IsUnspecified() {
		return nil, fmt.Errorf("IP must not be unspecified")
	}
	if ap.Port() == 0 {
		return nil, fmt.Errorf("port must not be 0")
	}
	return net.TCPAddrFromAddrPort(ap), nil
}

// TransportConfig configures the raft.NetworkTransport built by
// NewTransport. A zero field means "use the default"; DefaultTransportConfig
// spells the defaults out.
type TransportConfig struct {
	// MaxPool is the number of idle outgoing connections raft keeps per
	// peer for this group. Zero or negative means DefaultMaxPool.
	MaxPool int

	// Timeout is raft's I/O deadline per RPC (scaled up for snapshot
	// installs) and the dial timeout. Zero or negative means DefaultTimeout.
	Timeout time.Duration

	// RPCBytesMax bounds the entry data of one AppendEntries RPC; larger
	// requests are sent in parts. Zero or negative means
	// DefaultRPCBytesMax.
	RPCBytesMax int

	// AddressProvider, when set, resolves a peer's raft.ServerID to the
	// address to dial, overriding the address stored in the raft
	// configuration. Nil means the stored address is dialed.
	AddressProvider raft.ServerAddressProvider

	// Logger receives raft's transport logs through an hclog bridge, with
	// a "group" attribute. Nil means slog.Default().
	Logger *slog.Logger
}

// DefaultTransportConfig returns a TransportConfig with every default
// written out.
func DefaultTransportConfig() TransportConfig {
	return TransportConfig{MaxPool: DefaultMaxPool, Timeout: DefaultTimeout, RPCBytesMax: DefaultRPCBytesMax}
}

// withDefaults returns c with zero or negative fields replaced by their
// defaults.
func (c TransportConfig) withDefaults() TransportConfig {
	if c.MaxPool <= 0 {
		c.MaxPool = DefaultMaxPool
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.RPCBytesMax <= 0 {
		c.RPCBytesMax = DefaultRPCBytesMax
	}
	if c.RPCBytesMax <= 0 {
		c.RPCBytesMax = DefaultRPCBytesMax
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
