// Package ferrytest starts a real Ferry cluster inside a Go test, so that
// services can test their producers and consumers against the broker
// without Docker or a separate process:
//
//	func TestOrders(t *testing.T) {
//		fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
//		q := fc.CreateQueue("orders")
//		// ... code under test uses fc.Client() or fc.Addrs() ...
//	}
//
// The nodes are ordinary node.Node values: every message is replicated
// through raft and stored on disk in per-test temporary directories, on
// free loopback ports, and everything is torn down by t.Cleanup.
//
// The cluster runs in plaintext (node.Config.Insecure: no TLS, gossip
// without a key) because it listens on 127.0.0.1 only and lives as long as
// one test; it is not a way to run Ferry for anything else. Options.TLS
// serves it with TLS instead, under a throwaway CA, for tests of TLS
// clients; Options.TokensFile makes it require tokens. Raft and gossip use
// fast timings so that the cluster forms in about a second.
package ferrytest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/devpki"
	"github.com/ferrymq/ferry/internal/freeport"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/node"
)

// StartTimeout bounds how long Start waits for the cluster to form.
const StartTimeout = 30 * time.Second

// Options shape the cluster. The zero value starts one node.
type Options struct {
	// Nodes is the cluster size: 1 or 3 (0 means 1). Queues get
	// min(3, Nodes) replicas by default.
	Nodes int
	// Logger receives the nodes' logs; nil discards them unless the
	// environment variable FERRY_TEST_LOG names a level (debug, info,
	// warn, error), which then go to stderr.
	Logger *slog.Logger
	// Tweak, when set, may change each node's config before it starts
	// (limits, snapshot thresholds...). Addresses, data directories, TLS
	// and tokens are already filled in.
	Tweak func(*node.Config)
	// TLS serves the client, raft and HTTP ports with TLS instead of
	// plaintext. Start makes a throwaway CA and a certificate for each
	// node; the cluster's own clients (Client, Dial) and checks trust that
	// CA, and CAFile and TLSConfig hand it to other clients.
	TLS bool
	// TokensFile, when set, names a tokens file in the format of ferryd's
	// -tokens flag: every node then requires a token on its client and
	// HTTP ports. Token must then be the secret of one of its tokens that
	// has the cluster admin permission; the cluster's own clients and
	// checks present it.
	TokensFile string
	// Token is the secret the cluster's own clients present (see
	// TokensFile).
	Token string
}

// Cluster is a running in-process cluster.
type Cluster struct {
	t      testing.TB
	nodes  []*node.Node
	client *client.Client
	token  string
	tls    *tls.Config // what clients dial with; nil in plaintext
	caFile string      // the CA certificate, PEM; "" in plaintext
	http   *http.Client
}

// Start starts a cluster of opts.Nodes nodes, waits until it has formed
// (a meta leader that every node agrees on and every node registered),
// and returns it with a connected client. It fails the test if the
// cluster does not form within StartTimeout. The nodes and clients stop
// and the data directories are removed when the test ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	if opts.Nodes != 1 && opts.Nodes != 3 {
		t.Fatalf("ferrytest: %d nodes: want 1 or 3", opts.Nodes)
	}
	logger := opts.Logger
	if logger == nil {
		logger = envLogger()
	}
	root := t.TempDir() // before the cleanup that stops the nodes, so removed after it
	c := &Cluster{t: t, token: opts.Token}
	secure, err := c.security(root, opts)
	if err != nil {
		t.Fatalf("ferrytest: %v", err)
	}
	t.Cleanup(c.stop)
	var seeds []string
	for i := range opts.Nodes {
		cfg := nodeConfig(t, root, fmt.Sprintf("n%d", i+1), opts.Nodes, seeds, logger)
		if err := secure(&cfg); err != nil {
			t.Fatalf("ferrytest: node %s: %v", cfg.ID, err)
		}
		if opts.Tweak != nil {
			opts.Tweak(&cfg)
		}
		n := startNode(t, cfg)
		c.nodes = append(c.nodes, n)
		seeds = append(seeds, n.GossipAddr())
	}
	if err := c.waitFormed(time.Now().Add(StartTimeout)); err != nil {
		t.Fatalf("ferrytest: cluster did not form: %v", err)
	}
	c.client = c.Dial(client.WithLogger(logger))
	return c
}

// security prepares what opts.TLS and opts.TokensFile ask for: the CA
// (its certificate written to root/ca.pem) and the clients' TLS config,
// the token set, and the HTTP client of the cluster's checks. It returns
// the function that applies them to a node's config.
func (c *Cluster) security(root string, opts Options) (func(*node.Config) error, error) {
	var tokens *auth.Set
	if opts.TokensFile != "" {
		var err error
		if tokens, err = auth.LoadFile(opts.TokensFile); err != nil {
			return nil, err
		}
	}
	var ca *devpki.CA
	transport := &http.Transport{}
	if opts.TLS {
		var err error
		if ca, err = devpki.NewCA("ferrytest CA"); err != nil {
			return nil, err
		}
		pool, err := tlsconf.CAPool(ca.CertPEM)
		if err != nil {
			return nil, err
		}
		c.tls = tlsconf.ClientWithPool(pool)
		c.caFile = filepath.Join(root, "ca.pem")
		if err := os.WriteFile(c.caFile, ca.CertPEM, 0o600); err != nil {
			return nil, err
		}
		transport.TLSClientConfig = c.tls
	}
	c.http = &http.Client{Timeout: 2 * time.Second, Transport: bearer{transport, opts.Token}}
	return func(cfg *node.Config) error {
		cfg.Tokens = tokens
		if ca == nil {
			return nil
		}
		m, err := ca.NodeMaterial(cfg.ID)
		cfg.Insecure, cfg.TLS = false, m
		return err
	}, nil
}

// bearer adds "Authorization: Bearer <token>" to every request when token
// is set.
type bearer struct {
	base  http.RoundTripper
	token string
}

// RoundTrip sends r, with the token on a copy of it.
func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// nodeConfig is the config of one test node: loopback, free ports, fast
// timings, plaintext.
func nodeConfig(t testing.TB, root, id string, size int, seeds []string, logger *slog.Logger) node.Config {
	cfg := node.DefaultConfig(id, filepath.Join(root, id), "127.0.0.1", 0)
	cfg.RaftAddr, cfg.ClientAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.GossipAddr = freeAddr(t)
	cfg.BootstrapExpect = size
	cfg.Join = seeds
	cfg.GossipFast = true
	cfg.Insecure = true
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 150*time.Millisecond, 150*time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.ReconcileInterval = 500 * time.Millisecond
	cfg.Logger = logger.With("node", id)
	return cfg
}

// startNode starts one node, retrying while its gossip port, free a
// moment ago, is briefly taken by someone else.
func startNode(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := node.Start(cfg)
		if err == nil {
			return n
		}
		inUse := errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
		if !inUse || time.Now().After(deadline) {
			t.Fatalf("ferrytest: start node %s: %v", cfg.ID, err)
		}
		cfg.GossipAddr = freeAddr(t)
		time.Sleep(50 * time.Millisecond)
	}
}

// Addrs returns the client addresses of the nodes, the seeds for
// client.Dial.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.ClientAddr()
	}
	return out
}

// HTTPAddrs returns the HTTP admin addresses of the nodes (/metrics,
// /healthz, /v1/...), plain HTTP.
func (c *Cluster) HTTPAddrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.HTTPAddr()
	}
	return out
}

// Nodes returns the cluster's nodes, for tests that stop one (Close) or
// look at one. They are closed when the test ends, whatever the test did.
func (c *Cluster) Nodes() []*node.Node { return append([]*node.Node(nil), c.nodes...) }

// CAFile returns the path of the CA certificate (PEM) of a cluster started
// with Options.TLS, for clients configured by file; "" in plaintext.
func (c *Cluster) CAFile() string { return c.caFile }

// TLSConfig returns a client TLS config that trusts the CA of a cluster
// started with Options.TLS; nil in plaintext.
func (c *Cluster) TLSConfig() *tls.Config {
	if c.tls == nil {
		return nil
	}
	return c.tls.Clone()
}

// Client returns the cluster's shared client, connected at Start.
func (c *Cluster) Client() *client.Client { return c.client }

// Dial connects a new client to the cluster (one per simulated service,
// say); it is closed when the test ends. It trusts the cluster's CA and
// presents Options.Token when the cluster has them; opts come after and
// may replace them.
func (c *Cluster) Dial(opts ...client.Option) *client.Client {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	var own []client.Option
	if c.tls != nil {
		own = append(own, client.WithTLS(c.TLSConfig()))
	}
	if c.token != "" {
		own = append(own, client.WithToken(c.token))
	}
	cl, err := client.Dial(ctx, c.Addrs(), append(own, opts...)...)
	if err != nil {
		c.t.Fatalf("ferrytest: dial: %v", err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// CreateQueue creates a queue with the given settings and returns it once
// every node's catalog lists it (so that any node the queue's first
// request reaches knows it), failing the test if that does not happen
// within StartTimeout (transient errors while partitions elect leaders are
// retried).
func (c *Cluster) CreateQueue(name string, settings ...client.QueueSetting) *client.Queue {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	for {
		err := c.client.CreateQueue(ctx, name, settings...)
		if err == nil || errors.Is(err, client.ErrQueueExists) {
			break
		}
		if !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrTimeout) || ctx.Err() != nil {
			c.t.Fatalf("ferrytest: create queue %s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.waitListed(name, time.Now().Add(StartTimeout)); err != nil {
		c.t.Fatalf("ferrytest: create queue %s: %v", name, err)
	}
	return c.client.Queue(name)
}

// waitListed polls every node's /v1/queues until all list the queue, or
// deadline passes.
func (c *Cluster) waitListed(name string, deadline time.Time) error {
	for _, n := range c.nodes {
		for {
			listed, err := c.lists(n.HTTPAddr(), name)
			if listed {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s does not list the queue (last error: %v)", n.ID(), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// lists reports whether the node at httpAddr lists the queue.
func (c *Cluster) lists(httpAddr, name string) (bool, error) {
	var qs []struct {
		Name string `json:"name"`
	}
	if err := c.getJSON(httpAddr, "/v1/queues", &qs); err != nil {
		return false, err
	}
	for _, q := range qs {
		if q.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// waitFormed polls every node's /v1/cluster until all name the same meta
// leader and list every node, or deadline passes.
func (c *Cluster) waitFormed(deadline time.Time) error {
	var last error
	for time.Now().Before(deadline) {
		if last = c.formed(); last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return last
}

func (c *Cluster) formed() error {
	leader := ""
	for _, n := range c.nodes {
		var v struct {
			MetaLeader string `json:"meta_leader"`
			Nodes      []struct {
				ID string `json:"id"`
			} `json:"nodes"`
		}
		if err := c.getJSON(n.HTTPAddr(), "/v1/cluster", &v); err != nil {
			return err
		}
		switch {
		case v.MetaLeader == "":
			return fmt.Errorf("%s sees no meta leader", n.ID())
		case leader != "" && v.MetaLeader != leader:
			return errors.New("nodes disagree on the meta leader")
		case len(v.Nodes) != len(c.nodes):
			return fmt.Errorf("%s lists %d of %d nodes", n.ID(), len(v.Nodes), len(c.nodes))
		}
		leader = v.MetaLeader
	}
	return nil
}

// getJSON decodes the JSON answer to a GET of path on the node at
// httpAddr.
func (c *Cluster) getJSON(httpAddr, path string, v any) error {
	scheme := "http://"
	if c.tls != nil {
		scheme = "https://"
	}
	url := scheme + httpAddr + path
	resp, err := c.http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// stop closes the client and every node.
func (c *Cluster) stop() {
	if c.client != nil {
		c.client.Close()
	}
	for _, n := range c.nodes {
		n.Close()
	}
}

// envLogger discards logs unless FERRY_TEST_LOG names a level.
func envLogger() *slog.Logger {
	v := os.Getenv("FERRY_TEST_LOG")
	if v == "" {
		return slog.New(slog.DiscardHandler)
	}
	level := slog.LevelDebug
	_ = level.UnmarshalText([]byte(v))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// freeAddr returns a loopback address whose port was free a moment ago
// (memberlist needs a concrete gossip port).
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Loopback("127.0.0.1")
	if err != nil {
		t.Fatalf("ferrytest: %v", err)
	}
	return addr
}
