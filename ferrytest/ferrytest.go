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
// one test; it is not a way to run Ferry for anything else. Raft and
// gossip use fast timings so that the cluster forms in about a second.
package ferrytest

import (
	"context"
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
	"github.com/ferrymq/ferry/internal/freeport"
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
	// (limits, snapshot thresholds...). Addresses and data directories
	// are already filled in.
	Tweak func(*node.Config)
}

// Cluster is a running in-process cluster.
type Cluster struct {
	t      testing.TB
	nodes  []*node.Node
	client *client.Client
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
	c := &Cluster{t: t}
	t.Cleanup(c.stop)
	var seeds []string
	for i := range opts.Nodes {
		cfg := nodeConfig(t, root, fmt.Sprintf("n%d", i+1), opts.Nodes, seeds, logger)
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

// Client returns the cluster's shared client, connected at Start.
func (c *Cluster) Client() *client.Client { return c.client }

// Dial connects a new client to the cluster (one per simulated service,
// say); it is closed when the test ends.
func (c *Cluster) Dial(opts ...client.Option) *client.Client {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	cl, err := client.Dial(ctx, c.Addrs(), opts...)
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
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, n := range c.nodes {
		for {
			listed, err := lists(hc, n.HTTPAddr(), name)
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
func lists(hc *http.Client, httpAddr, name string) (bool, error) {
	var qs []struct {
		Name string `json:"name"`
	}
	if err := getJSON(hc, "http://"+httpAddr+"/v1/queues", &qs); err != nil {
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
	hc := &http.Client{Timeout: 2 * time.Second}
	var last error
	for time.Now().Before(deadline) {
		if last = c.formed(hc); last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return last
}

func (c *Cluster) formed(hc *http.Client) error {
	leader := ""
	for _, n := range c.nodes {
		var v struct {
			MetaLeader string `json:"meta_leader"`
			Nodes      []struct {
				ID string `json:"id"`
			} `json:"nodes"`
		}
		if err := getJSON(hc, "http://"+n.HTTPAddr()+"/v1/cluster", &v); err != nil {
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

func getJSON(hc *http.Client, url string, v any) error {
	resp, err := hc.Get(url)
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
