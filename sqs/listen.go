package sqs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/connlimit"
)

// Timeouts of the SQS listener. A long-poll receive waits up to 20 s, so
// an answer may take that long plus the cluster's time. A connection that
// sends no complete request header within readHeaderTimeout (TLS
// handshake included) is closed, and so is one whose request fails before
// its signature checks, right after the answer.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// Defaults of the SQS port's connection limits.
const (
	// DefaultMaxConns is the default ListenConfig.MaxConns.
	DefaultMaxConns = 1024
	// DefaultMaxConnsPerIP is the default ListenConfig.MaxConnsPerIP.
	DefaultMaxConnsPerIP = 256
)

// ListenConfig configures Listen.
type ListenConfig struct {
	// Addr is the address to listen on ("ip:port"; port 0 picks one).
	Addr string
	// MaxConns bounds the port's open connections, and MaxConnsPerIP those
	// from one IP address: a connection over a bound is closed as soon as
	// it is accepted, so that the port cannot take the process's last file
	// descriptors. A long poll holds its connection for up to 20 s. Zero
	// takes DefaultMaxConns and min(DefaultMaxConnsPerIP, MaxConns).
	MaxConns, MaxConnsPerIP int
	// Seeds are client protocol addresses of cluster nodes (usually the
	// local node's).
	Seeds []string
	// ClientTLS, when set, is the TLS config of the connection to the
	// cluster; nil connects in plaintext.
	ClientTLS *tls.Config
	// ServerTLS, when set, makes the listener serve HTTPS; nil serves
	// plain HTTP.
	ServerTLS *tls.Config
	// Token is the client token of the endpoint's own connection to the
	// cluster; every SQS action runs with it, after the action was checked
	// against the caller's permissions (Server.Credentials). ferryd leaves
	// it empty: its endpoint presents the node's certificate (ClientTLS),
	// which the cluster's nodes take as a member's identity.
	Token string
	// Server configures the API; Listen sets its Client and Dial (each
	// caller gets a connection of its own, made like the endpoint's).
	Server Config
	// Logger receives the listener's errors; nil discards them.
	Logger *slog.Logger
}

// Listener is a running SQS endpoint with its own cluster connection.
type Listener struct {
	ln    net.Listener
	conns *connlimit.Listener
	api   *Server
	srv   *http.Server
	cl    *client.Client
	done  chan struct{}
}

// check fills the zero limits and checks them.
func (cfg *ListenConfig) check() error {
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxConnsPerIP == 0 {
		cfg.MaxConnsPerIP = min(DefaultMaxConnsPerIP, cfg.MaxConns)
	}
	switch {
	case cfg.MaxConns < 0:
		return fmt.Errorf("%w: MaxConns %d: must be positive (0 = default %d)", ErrInvalidLimits, cfg.MaxConns, DefaultMaxConns)
	case cfg.MaxConnsPerIP < 0 || cfg.MaxConnsPerIP > cfg.MaxConns:
		return fmt.Errorf("%w: MaxConnsPerIP %d: must be 1..MaxConns (%d)", ErrInvalidLimits, cfg.MaxConnsPerIP, cfg.MaxConns)
	}
	return cfg.Server.Limits.Validate()
}

// Listen connects to the cluster and serves the SQS API on cfg.Addr until
// Close.
func Listen(ctx context.Context, cfg ListenConfig) (*Listener, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []client.Option{client.WithClientName("ferry-sqs"), client.WithLogger(log)}
	if cfg.ClientTLS != nil {
		opts = append(opts, client.WithTLS(cfg.ClientTLS))
	}
	if cfg.Token != "" {
		opts = append(opts, client.WithToken(cfg.Token))
	}
	cl, err := client.Dial(ctx, cfg.Seeds, opts...)
	if err != nil {
		return nil, fmt.Errorf("sqs: connecting to the cluster: %w", err)
	}
	raw, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("sqs: %w", err)
	}
	conns := connlimit.New(raw, cfg.MaxConns, cfg.MaxConnsPerIP, connlimit.LogRefusals(log, "SQS"))
	var ln net.Listener = conns
	if cfg.ServerTLS != nil {
		ln = tls.NewListener(ln, cfg.ServerTLS)
	}
	sc := cfg.Server
	sc.Client = cl
	seeds := cfg.Seeds
	sc.Dial = func(ctx context.Context) (*client.Client, error) { return client.Dial(ctx, seeds, opts...) }
	if sc.Logger == nil {
		sc.Logger = log
	}
	l := &Listener{ln: ln, conns: conns, api: New(sc), cl: cl, done: make(chan struct{})}
	l.srv = &http.Server{
		Handler:           l.api,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("sqs listener stopped", "err", err)
		}
	}()
	return l, nil
}

// Addr returns the address the listener is bound to.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// ListenerStats are counts of a Listener for monitoring.
type ListenerStats struct {
	Stats
	// Conns is the number of connections open now.
	Conns int
	// ConnsRefused counts the connections closed at once at a bound.
	ConnsRefused uint64
}

// Stats returns the listener's counts now.
func (l *Listener) Stats() ListenerStats {
	open, refused := l.conns.Counts()
	return ListenerStats{Stats: l.api.Stats(), Conns: open, ConnsRefused: refused}
}

// Close stops serving (requests in progress get up to 5 s) and closes the
// cluster connections.
func (l *Listener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := l.srv.Shutdown(ctx)
	<-l.done
	l.api.Close()
	return errors.Join(err, l.cl.Close())
}
