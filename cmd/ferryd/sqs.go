package main

import (
	"context"
	"flag"
	"log/slog"
	"sync"
	"time"

	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/node"
	"github.com/ferrymq/ferry/sqs"
)

// sqsOptions configure the SQS-compatible endpoint; an empty address
// leaves it off.
type sqsOptions struct {
	addr, region string
}

func (s *sqsOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&s.addr, "sqs-addr", "", "address ip:port of the SQS-compatible API (off when empty); TLS like the HTTP admin port")
	fs.StringVar(&s.region, "sqs-region", sqs.DefaultRegion, "region named in the ARNs of the SQS API")
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
		Server: sqs.Config{Region: o.sqs.region},
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
