package node

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/freeport"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// testGossipKey is the gossip key of test clusters.
var testGossipKey = []byte("0123456789abcdef0123456789abcdef")

// The in-process clusters of this package's tests. They cannot use
// package ferrytest, which imports this one; every test starts its nodes
// with startTestNode, alone or through testNodes and testNodesIn.

// testNodes starts count nodes on 127.0.0.1 with free ports, bootstrapping
// together.
func testNodes(t *testing.T, count int) []*Node {
	t.Helper()
	return testNodesIn(t, t.TempDir(), count, nil)
}

// testNodesIn starts count nodes that bootstrap together, with tweak
// applied to each, in root.
func testNodesIn(t *testing.T, root string, count int, tweak func(*Config)) []*Node {
	t.Helper()
	var nodes []*Node
	var seeds []string
	for i := range count {
		nd := startTestNode(t, root, fmt.Sprintf("n%d", i+1), count, seeds, tweak)
		nodes = append(nodes, nd)
		seeds = append(seeds, nd.GossipAddr())
	}
	return nodes
}

// startTestNode starts node id in root/id with fast timings and the test
// gossip key, joining seeds; tweak, when set, changes the config first.
func startTestNode(t *testing.T, root, id string, bootstrap int, seeds []string, tweak func(*Config)) *Node {
	t.Helper()
	level := slog.Level(100)
	if os.Getenv("FERRY_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := DefaultConfig(id, filepath.Join(root, id), "127.0.0.1", 0)
	cfg.RaftAddr, cfg.ClientAddr, cfg.HTTPAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", freePort(t)
	cfg.BootstrapExpect = bootstrap
	cfg.Join = seeds
	cfg.GossipFast = true
	cfg.GossipKeys = [][]byte{testGossipKey}
	cfg.Insecure = true // these tests are about gossip, not TLS
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 150*time.Millisecond, 150*time.Millisecond, 100*time.Millisecond
	cfg.Logger = logger
	if tweak != nil {
		tweak(&cfg)
	}
	nd, err := Start(cfg)
	for try := 0; err != nil && try < 5 && strings.Contains(err.Error(), "address already in use"); try++ {
		// The gossip port picked for it was taken by another process
		// meanwhile: pick another (ports 0 are never taken).
		cfg.GossipAddr = freePort(t)
		nd, err = Start(cfg)
	}
	if err != nil {
		t.Fatalf("start node %s: %v", id, err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd
}

func freePort(t *testing.T) string {
	addr, err := freeport.Loopback("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

type rawClient struct {
	t    *testing.T
	conn net.Conn
	r    *wire.Reader
	id   atomic.Uint64
}

func dialRaw(t *testing.T, addr string) *rawClient {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawClient{t: t, conn: conn, r: wire.NewReader(conn)}
	if _, err := wire.ClientHandshake(conn, c.r, wire.NewHello("smoke")); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *rawClient) call(op wire.Op, body, out any) error {
	req, err := wire.NewRequest(c.id.Add(1), op, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := wire.WriteFrame(c.conn, req); err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.r.ReadResponse()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := resp.Err(); err != nil {
		return err
	}
	return resp.Decode(out)
}

func TestNode_SmokeCreateSendReceive(t *testing.T) {
	nodes := testNodes(t, 3)
	c := dialRaw(t, metaLeader(t, nodes).ClientAddr())
	var created wire.CreateQueueResponse
	testwait.UntilNil(t, 15*time.Second, "queue orders created", func() error {
		return c.call(wire.OpCreateQueue, &wire.CreateQueueRequest{Name: "orders"}, &created)
	})
	t.Logf("created %+v", created.Queue)
	var sent wire.SendResponse
	var lc *rawClient
	testwait.UntilNil(t, 15*time.Second, "a send through the partition's leader", func() error {
		var md wire.MetadataResponse
		if err := c.call(wire.OpMetadata, &wire.MetadataRequest{Queue: "orders"}, &md); err != nil {
			t.Fatal(err)
		}
		lc = dialRaw(t, md.Queues[0].Partitions[0].LeaderAddr)
		return lc.call(wire.OpSend, &wire.SendRequest{Queue: "orders", Messages: []wire.Message{{ID: "m1", Body: []byte("hello")}}}, &sent)
	})
	var got wire.ReceiveResponse
	if err := lc.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "orders", Max: 1, Wait: time.Second}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 || string(got.Messages[0].Body) != "hello" {
		t.Fatalf("got %+v", got)
	}
}
