package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrymq/ferry/internal/connlimit"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/node"
	"github.com/ferrymq/ferry/sqs"
)

// sqsOptions configure the SQS-compatible endpoint; an empty address
// leaves it off.
type sqsOptions struct {
	addr, region            string
	maxConns, maxConnsPerIP int
	limits                  sqs.Limits
}

func (s *sqsOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&s.addr, "sqs-addr", "", "address ip:port of the SQS-compatible API (off when empty); TLS like the HTTP admin port")
	fs.StringVar(&s.region, "sqs-region", sqs.DefaultRegion, "region named in the ARNs of the SQS API")
	fs.IntVar(&s.maxConns, "sqs-max-conns", 0, fmt.Sprintf("most SQS API connections open at once; more are closed at once "+
		"(0 = %d, or a quarter of the process's file descriptor limit when that is lower)", sqs.DefaultMaxConns))
	fs.IntVar(&s.maxConnsPerIP, "sqs-max-conns-per-ip", 0,
		fmt.Sprintf("most SQS API connections from one IP address (0 = %d, or -sqs-max-conns when lower)", sqs.DefaultMaxConnsPerIP))
	fs.IntVar(&s.limits.MaxCallers, "sqs-max-callers", sqs.DefaultMaxCallers,
		"most callers (access keys) the SQS API keeps a cluster connection for; the idlest gives way to a new one")
	fs.IntVar(&s.limits.MaxCallerRequests, "sqs-caller-requests", sqs.DefaultMaxCallerRequests,
		"most SQS requests of one access key in flight; more are answered RequestThrottled")
	fs.IntVar(&s.limits.MaxCallerLongPolls, "sqs-caller-long-polls", sqs.DefaultMaxCallerLongPolls,
		"most ReceiveMessage calls of one access key in flight (within -sqs-caller-requests); more are answered RequestThrottled")
	fs.DurationVar(&s.limits.CallerIdleTimeout, "sqs-caller-idle-timeout", sqs.DefaultCallerIdleTimeout,
		"drop an access key's state and cluster connection after this long without a request in flight")
}

// check validates the limits, filling the connection bounds left at 0:
// the port must not take the descriptors the node's raft and client
// ports need.
func (s *sqsOptions) check() error {
	if s.maxConns < 0 || s.maxConnsPerIP < 0 {
		return fmt.Errorf("-sqs-max-conns %d, -sqs-max-conns-per-ip %d: must not be negative (0 = default)", s.maxConns, s.maxConnsPerIP)
	}
	if s.maxConns == 0 {
		s.maxConns = sqs.DefaultMaxConns
		if fds := fileLimit(); fds > 0 {
			s.maxConns = max(1, min(s.maxConns, fds/4))
		}
	}
	if s.maxConnsPerIP == 0 {
		s.maxConnsPerIP = min(sqs.DefaultMaxConnsPerIP, s.maxConns)
	}
	if s.maxConnsPerIP > s.maxConns {
		return fmt.Errorf("-sqs-max-conns-per-ip %d: must not exceed -sqs-max-conns (%d)", s.maxConnsPerIP, s.maxConns)
	}
	if err := s.limits.Validate(); err != nil {
		return fmt.Errorf("-sqs-*: %w", err)
	}
	return nil
}

// sqsEndpoint runs the SQS listener of a node: it connects to the node's
// client port once the cluster answers, retrying until it does or the
// node stops.
type sqsEndpoint struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	l      *sqs.Listener
}

// startSQS starts the endpoint in the background; nil when -sqs-addr is
// not set.
func startSQS(o options, n *node.Node, logger *slog.Logger) (*sqsEndpoint, error) {
	if o.sqs.addr == "" {
		return nil, nil
	}
	cfg := sqs.ListenConfig{
		Addr: o.sqs.addr, Seeds: []string{n.ClientAddr()}, Logger: logger.With("component", "sqs"),
		MaxConns: o.sqs.maxConns, MaxConnsPerIP: o.sqs.maxConnsPerIP,
		Server: sqs.Config{Region: o.sqs.region, Limits: o.sqs.limits},
	}
	if o.tokens != "" {
		cfg.Server.Credentials = sqs.NodeCredentials(n) // its reloads end the long polls of a revoked key
	}
	if !o.tls.insecure {
		m, err := tlsconf.Load(o.tls.cert, o.tls.key, o.tls.ca)
		if err != nil {
			return nil, err
		}
		cfg.ServerTLS = m.Server()
		cfg.ClientTLS, err = tlsconf.Client(o.tls.ca, o.tls.cert, o.tls.key)
		if err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &sqsEndpoint{cancel: cancel}
	if err := n.RegisterMetrics(e.metrics()...); err != nil {
		cancel()
		return nil, err
	}
	e.wg.Add(1)
	go e.run(ctx, cfg, logger)
	return e, nil
}

func (e *sqsEndpoint) run(ctx context.Context, cfg sqs.ListenConfig, logger *slog.Logger) {
	defer e.wg.Done()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		l, err := sqs.Listen(dctx, cfg)
		cancel()
		if err == nil {
			e.mu.Lock()
			e.l = l
			e.mu.Unlock()
			logger.Info("SQS API listening", "addr", l.Addr(), "tls", cfg.ServerTLS != nil)
			return
		}
		logger.Warn("SQS API not started yet", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// stats reads the listener's counts (zeros until it is up).
func (e *sqsEndpoint) stats() sqs.ListenerStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.l == nil {
		return sqs.ListenerStats{}
	}
	return e.l.Stats()
}

// metrics are the endpoint's series on the node's /metrics.
func (e *sqsEndpoint) metrics() []prometheus.Collector {
	cs := connlimit.Metrics("ferry_sqs_connections", "SQS API", func() (int, uint64) {
		st := e.stats()
		return st.Conns, st.ConnsRefused
	})
	return append(cs,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ferry_sqs_callers", Help: "Callers (access keys) the SQS API keeps state and a cluster connection for.",
		}, func() float64 { return float64(e.stats().Callers) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ferry_sqs_requests_throttled_total", Help: "SQS requests answered RequestThrottled: their caller was at a bound.",
		}, func() float64 { return float64(e.stats().Throttled) }))
}

// close stops the endpoint.
func (e *sqsEndpoint) close() {
	if e == nil {
		return
	}
	e.cancel()
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.l != nil {
		_ = e.l.Close()
	}
}
