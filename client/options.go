package client

import (
	"crypto/tls"
	"log/slog"
	"time"
)

// Defaults of the options.
const (
	// DefaultClientName names the client when WithClientName is not given.
	DefaultClientName = "ferry-go"
	// DefaultDialTimeout bounds connecting and the handshake.
	DefaultDialTimeout = 5 * time.Second
	// DefaultBackoffMin and DefaultBackoffMax bound the pause between
	// retries of transient failures. Most of them are a partition between
	// leaders: raft elects a new one 0.5-1.5 s after the old one dies, and
	// a caller still waiting then should find it within a fraction of
	// that. With a 1 s maximum, callers that had retried through the
	// election were asleep for another 100-720 ms after it (measured with
	// scripts/failover-check.sh); 250 ms caps that at a quarter second. A
	// client's concurrent sends to one partition share their requests, so
	// a long outage costs at most a few cheap refusals a second per client
	// and partition (WithRetryBackoff sets other bounds).
	DefaultBackoffMin = 20 * time.Millisecond
	DefaultBackoffMax = 250 * time.Millisecond
)

// software names this library in the handshake.
const software = "ferry-go/0.1"

// Option configures Dial.
//
//	c, err := client.Dial(ctx, seeds,
//		client.WithClientName("billing"),
//		client.WithDialTimeout(2*time.Second))
type Option func(*config)

type config struct {
	name        string
	dialTimeout time.Duration
	logger      *slog.Logger
	backoffMin  time.Duration
	backoffMax  time.Duration
	tls         *tls.Config // nil: plaintext
	token       string
}

func defaultConfig() config {
	return config{
		name:        DefaultClientName,
		dialTimeout: DefaultDialTimeout,
		logger:      slog.New(slog.DiscardHandler),
		backoffMin:  DefaultBackoffMin,
		backoffMax:  DefaultBackoffMax,
	}
}

// WithClientName names the client in the handshake and in the default
// consumer id of receives ("<name>-<random suffix>"). Empty keeps
// DefaultClientName.
//
//	client.Dial(ctx, seeds, client.WithClientName("invoice-worker"))
func WithClientName(name string) Option {
	return func(c *config) {
		if name != "" {
			c.name = name
		}
	}
}

// WithDialTimeout bounds each connection attempt, handshake included.
// Values of 0 or below keep DefaultDialTimeout.
//
//	client.Dial(ctx, seeds, client.WithDialTimeout(time.Second))
func WithDialTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.dialTimeout = d
		}
	}
}

// WithLogger sends the client's diagnostics (reconnects, redirects,
// retries, handler panics) to l. By default they are discarded.
//
//	client.Dial(ctx, seeds, client.WithLogger(slog.Default()))
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithRetryBackoff bounds the pause between retries of transient failures:
// it starts near minDelay and doubles up to maxDelay, with random jitter.
// Values of 0 or below keep the defaults; a maximum below the minimum is
// raised to it.
//
//	client.Dial(ctx, seeds, client.WithRetryBackoff(10*time.Millisecond, 500*time.Millisecond))
func WithRetryBackoff(minDelay, maxDelay time.Duration) Option {
	return func(c *config) {
		if minDelay > 0 {
			c.backoffMin = minDelay
		}
		if maxDelay > 0 {
			c.backoffMax = maxDelay
		}
		if c.backoffMax < c.backoffMin {
			c.backoffMax = c.backoffMin
		}
	}
}

// WithTLS makes every connection TLS with cfg: the servers' certificates
// are verified against cfg.RootCAs (the system roots when nil), and
// cfg.Certificates, when set, are presented to servers that ask. When
// cfg.ServerName is empty each connection verifies the host of the address
// it dials (an IP address or a name), so node certificates must list the
// addresses clients reach them at. Nil keeps plaintext.
//
//	pool := x509.NewCertPool()
//	pool.AppendCertsFromPEM(caPEM)
//	client.Dial(ctx, seeds, client.WithTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls = cfg }
}

// WithToken presents secret, a token from the cluster's tokens file, in the
// handshake of every connection. A cluster that requires tokens refuses a
// connection without a known one, and any request the token does not
// permit, with ErrUnauthorized. Empty sends no token.
//
//	client.Dial(ctx, seeds, client.WithToken(os.Getenv("FERRY_TOKEN")))
func WithToken(secret string) Option {
	return func(c *config) { c.token = secret }
}
