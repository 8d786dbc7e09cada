package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/node"
)

// clusterSize is the number of nodes of every test cluster.
const clusterSize = 3

// waitLong bounds how long the harness waits for the cluster to reach a
// state (a leader, a converged replica) before failing the test.
const waitLong = 20 * time.Second

// options tune a test cluster; the zero value takes the node defaults.
type options struct {
	// snapshotThreshold, trailingLogs and snapshotInterval are passed to
	// every node's partitions.
	snapshotThreshold uint64
	trailingLogs      uint64
	snapshotInterval  time.Duration
	// logs, when set, receives every node's warnings and errors.
	logs io.Writer
	// tweak, when set, changes every node's config before it starts.
	tweak func(*node.Config)
}

// testCluster is a cluster of in-process nodes. Node i keeps its id, data
// directory and ports across stop and start, like a restarted process.
// Every port but gossip speaks TLS: the harness makes a throwaway CA and a
// node certificate per node, and its clients trust that CA.
type testCluster struct {
	t       *testing.T
	members []*member
	http    *http.Client
	ca      *devpki.CA
	tls     *tls.Config // what clients dial with
	// admin is the secret of the cluster admin token every node accepts;
	// the harness's clients and admin API calls present it.
	admin string
}

// member is one node slot: its configuration and, while it runs, the node.
type member struct {
	cfg node.Config
	n   *node.Node
}

// startCluster starts clusterSize nodes on 127.0.0.1 that bootstrap
// together, and waits for the meta group to elect a leader. The nodes are
// closed when the test ends.
func startCluster(t *testing.T, opts options) *testCluster {
	t.Helper()
	ca, err := devpki.NewCA("cluster test CA")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := tlsconf.CAPool(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, ca: ca, tls: tlsconf.ClientWithPool(pool)}
	if c.admin, err = auth.NewSecret(); err != nil {
		t.Fatal(err)
	}
	tokens := c.tokenSet(nil)
	c.http = &http.Client{Timeout: 2 * time.Second, Transport: bearer{&http.Transport{TLSClientConfig: c.tls}, c.admin}}
	root := t.TempDir()
	logger := testLogger()
	if opts.logs != nil {
		logger = slog.New(slog.NewTextHandler(opts.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	for i := range clusterSize {
		id := fmt.Sprintf("n%d", i+1)
		cfg := node.DefaultConfig(id, filepath.Join(root, id), "127.0.0.1", 0)
		cfg.RaftAddr, cfg.ClientAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
		cfg.GossipAddr = freePort(t)
		cfg.BootstrapExpect = clusterSize
		cfg.GossipFast = true
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = 150*time.Millisecond, 150*time.Millisecond
		cfg.LeaderLeaseTimeout = 100 * time.Millisecond
		cfg.ReconcileInterval = 500 * time.Millisecond
		cfg.SnapshotThreshold, cfg.TrailingLogs = opts.snapshotThreshold, opts.trailingLogs
		cfg.SnapshotInterval = opts.snapshotInterval
		cfg.Logger = logger.With("test", t.Name())
		cfg.Tokens = tokens
		if cfg.TLS, err = ca.NodeMaterial(id); err != nil {
			t.Fatal(err)
		}
		if opts.tweak != nil {
			opts.tweak(&cfg)
		}
		c.members = append(c.members, &member{cfg: cfg})
	}
	t.Cleanup(c.stopAll)
	for i := range c.members {
		c.start(i)
	}
	c.waitMetaLeader()
	c.waitRegistered()
	return c
}

// tokenSet parses the harness's admin token followed by extra entries.
func (c *testCluster) tokenSet(extra []auth.FileToken) *auth.Set {
	c.t.Helper()
	f := auth.File{Tokens: append([]auth.FileToken{{Name: "test-admin", SHA256: auth.HashSecret(c.admin), Cluster: []string{"admin"}}}, extra...)}
	data, err := json.Marshal(f)
	if err != nil {
		c.t.Fatal(err)
	}
	set, err := auth.Parse(data)
	if err != nil {
		c.t.Fatal(err)
	}
	return set
}

// setTokens makes every node (running now, or started later) accept the
// admin token and the extra entries, as a SIGHUP reload of the tokens
// file does.
func (c *testCluster) setTokens(extra ...auth.FileToken) {
	c.t.Helper()
	set := c.tokenSet(extra)
	for _, m := range c.members {
		m.cfg.Tokens = set
		if m.n != nil {
			if err := m.n.SetTokens(set); err != nil {
				c.t.Fatal(err)
			}
		}
	}
}

// bearer adds "Authorization: Bearer <token>" to every request.
type bearer struct {
	base  http.RoundTripper
	token string
}

// RoundTrip sends a copy of r with the token.
func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// with returns a view of the cluster that reports failures to t (a
// subtest); it shares the nodes.
func (c *testCluster) with(t *testing.T) *testCluster {
	v := *c
	v.t = t
	return &v
}

// testLogger discards the nodes' and clients' logs unless FERRY_TEST_LOG
// is set: to a level name (debug, info, warn, error), or to anything else
// for debug.
func testLogger() *slog.Logger {
	v := os.Getenv("FERRY_TEST_LOG")
	if v == "" {
		return slog.New(slog.DiscardHandler)
	}
	level := slog.LevelDebug
	_ = level.UnmarshalText([]byte(v))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// untilNil is testwait.UntilNil for a wait whose calls use ctx: it gives
// up when ctx ends (or after waitLong for a ctx without a deadline).
func untilNil(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(waitLong)
	}
	testwait.UntilNil(t, time.Until(deadline), what, cond)
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Loopback("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// start starts node i, joining the gossip addresses of the other nodes.
// After its first start the node's bound ports are pinned in its config,
// so that a restart comes back on the same addresses. A port that is
// briefly still in use is retried.
func (c *testCluster) start(i int) {
	c.t.Helper()
	m := c.members[i]
	if m.n != nil {
		c.t.Fatalf("start %s: already running", m.cfg.ID)
	}
	cfg := m.cfg
	cfg.Join = nil
	for j, o := range c.members {
		if j != i && o.n != nil {
			cfg.Join = append(cfg.Join, o.cfg.GossipAddr)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := node.Start(cfg)
		if err == nil {
			m.n = n
			break
		}
		inUse := errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
		if !inUse || time.Now().After(deadline) {
			c.t.Fatalf("start %s: %v", cfg.ID, err)
		}
		if strings.HasSuffix(cfg.RaftAddr, ":0") {
			// First start: the gossip port picked for it was taken by
			// another process meanwhile; nobody knows it yet, pick another.
			cfg.GossipAddr = freePort(c.t)
			m.cfg.GossipAddr = cfg.GossipAddr
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.cfg.RaftAddr, m.cfg.ClientAddr = m.n.RaftAddr(), m.n.ClientAddr()
	m.cfg.HTTPAddr, m.cfg.GossipAddr = m.n.HTTPAddr(), m.n.GossipAddr()
}

// stop closes node i (it hands its raft leaderships over first, as a
// graceful shutdown does). Its data directory is kept.
func (c *testCluster) stop(i int) {
	c.t.Helper()
	m := c.members[i]
	if m.n == nil {
		c.t.Fatalf("stop %s: not running", m.cfg.ID)
	}
	m.n.Close()
	m.n = nil
}

// restart stops node i if it runs and starts it again on the same data
// directory and ports.
func (c *testCluster) restart(i int) {
	c.t.Helper()
	if c.members[i].n != nil {
		c.stop(i)
	}
	c.start(i)
}

// wipe deletes the data directory of stopped node i, as if its disk had
// been replaced.
func (c *testCluster) wipe(i int) {
	c.t.Helper()
	m := c.members[i]
	if m.n != nil {
		c.t.Fatalf("wipe %s: still running", m.cfg.ID)
	}
	if err := os.RemoveAll(m.cfg.DataDir); err != nil {
		c.t.Fatalf("wipe %s: %v", m.cfg.ID, err)
	}
}

func (c *testCluster) stopAll() {
	for _, m := range c.members {
		if m.n != nil {
			m.n.Close()
			m.n = nil
		}
	}
}

// running returns the indexes of the running nodes.
func (c *testCluster) running() []int {
	var out []int
	for i, m := range c.members {
		if m.n != nil {
			out = append(out, i)
		}
	}
	return out
}

// index returns the index of the node with the given id, or -1.
func (c *testCluster) index(id string) int {
	for i, m := range c.members {
		if m.cfg.ID == id {
			return i
		}
	}
	return -1
}

// dial connects a client to the cluster with every running node's client
// address as a seed; it is closed when the test ends.
func (c *testCluster) dial(name string) *client.Client {
	c.t.Helper()
	return c.dialNodes(name, c.running()...)
}

// dialNodes connects a client seeded with the given nodes only.
func (c *testCluster) dialNodes(name string, nodes ...int) *client.Client {
	c.t.Helper()
	cl, err := c.dialAs(name, c.admin, nodes...)
	if err != nil {
		c.t.Fatalf("dial: %v", err)
	}
	return cl
}

// dialAs connects a client presenting token (none when "") to the given
// nodes; it is closed when the test ends.
func (c *testCluster) dialAs(name, token string, nodes ...int) (*client.Client, error) {
	c.t.Helper()
	var seeds []string
	for _, i := range nodes {
		seeds = append(seeds, c.members[i].cfg.ClientAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cl, err := client.Dial(ctx, seeds, client.WithClientName(name), client.WithLogger(testLogger().With("client", name)), client.WithTLS(c.tls),
		client.WithRetryBackoff(10*time.Millisecond, 250*time.Millisecond), client.WithToken(token))
	if err != nil {
		return nil, err
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl, nil
}

// getJSON decodes the answer of node i's admin API at path into out.
func (c *testCluster) getJSON(i int, path string, out any) error {
	resp, err := c.http.Get(c.url(i, path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on %s: %s", path, c.members[i].cfg.ID, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// url is the address of path on node i's admin API.
func (c *testCluster) url(i int, path string) string {
	return "https://" + c.members[i].cfg.HTTPAddr + path
}

// waitRegistered waits until the meta leader's catalog lists every node,
// so that new queues get their replicas on all of them.
func (c *testCluster) waitRegistered() {
	c.t.Helper()
	testwait.UntilNil(c.t, waitLong, "node registration", func() error {
		var v struct {
			Nodes []struct {
				ID string `json:"id"`
			} `json:"nodes"`
		}
		if err := c.getJSON(c.waitMetaLeader(), "/v1/cluster", &v); err != nil {
			return err
		}
		if len(v.Nodes) != len(c.members) {
			return fmt.Errorf("%d of %d nodes registered", len(v.Nodes), len(c.members))
		}
		return nil
	})
}

// waitMetaLeader waits until every running node names the same running
// node as meta leader, and returns its index.
func (c *testCluster) waitMetaLeader() int {
	c.t.Helper()
	leader := -1
	testwait.UntilNil(c.t, waitLong, "meta leader", func() error {
		leader = -1
		for _, i := range c.running() {
			var v struct {
				MetaLeader string `json:"meta_leader"`
			}
			if err := c.getJSON(i, "/v1/cluster", &v); err != nil {
				return err
			}
			l := c.index(v.MetaLeader)
			switch {
			case l < 0 || c.members[l].n == nil:
				return fmt.Errorf("%s sees meta leader %q", c.members[i].cfg.ID, v.MetaLeader)
			case leader >= 0 && l != leader:
				return fmt.Errorf("nodes disagree on the meta leader")
			}
			leader = l
		}
		return nil
	})
	return leader
}
