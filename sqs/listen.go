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
)

// Timeouts of the SQS listener. A long-poll receive waits up to 20 s, so
// an answer may take that long plus the cluster's time.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// ListenConfig configures Listen.
type ListenConfig struct {
	// Addr is the address to listen on ("ip:port"; port 0 picks one).
	Addr string
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
	// Server configures the API; its Client is set by Listen.
	Server Config
	// Logger receives the listener's errors; nil discards them.
	Logger *slog.Logger
}

// Listener is a running SQS endpoint with its own cluster connection.
type Listener struct {
	ln   net.Listener
	srv  *http.Server
	cl   *client.Client
	done chan struct{}
}

// Listen connects to the cluster and serves the SQS API on cfg.Addr until
// Close.
func Listen(ctx context.Context, cfg ListenConfig) (*Listener, error) {
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
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("sqs: %w", err)
	}
	if cfg.ServerTLS != nil {
		ln = tls.NewListener(ln, cfg.ServerTLS)
	}
	sc := cfg.Server
	sc.Client = cl
	if sc.Logger == nil {
		sc.Logger = log
	}
	l := &Listener{ln: ln, cl: cl, done: make(chan struct{})}
	l.srv = &http.Server{
		Handler:           New(sc),
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

// Close stops serving (requests in progress get up to 5 s) and closes the
// cluster connection.
func (l *Listener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := l.srv.Shutdown(ctx)
	<-l.done
	return errors.Join(err, l.cl.Close())
}
