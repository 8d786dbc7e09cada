package partition

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/transport"
	"github.com/hashicorp/raft"
)

// Every batcher of the package's tests checks its running counts of
// untaken items against its queue at each proposal it cuts.
func init() { checkBatcherCounts = true }

const testGroup = "q1-0"

// testCluster runs n replicas of one partition, each on its own mux.
type testCluster struct {
	t     *testing.T
	dirs  []string
	muxes []*transport.Mux
	reps  []*Partition // nil while a replica is stopped
	peers []raft.Server
	tweak func(*Config)
}

func testLogger() *slog.Logger {
	level := slog.LevelError + 4 // raft logs errors for every stopped peer
	if os.Getenv("FERRY_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func newTestCluster(t *testing.T, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, tweak: tweak}
	root := t.TempDir()
	for i := range n {
		m := newTestMux(t)
		c.muxes = append(c.muxes, m)
		c.dirs = append(c.dirs, filepath.Join(root, fmt.Sprintf("n%d", i+1)))
		c.peers = append(c.peers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: raft.ServerAddress(m.Addr().String())})
	}
	c.reps = make([]*Partition, n)
	for i := range n {
		c.start(i)
	}
	t.Cleanup(c.close)
	return c
}

// newTestMux opens a raft mux on a free loopback port; its owner closes it.
func newTestMux(t *testing.T) *transport.Mux {
	t.Helper()
	mc := transport.DefaultMuxConfig("127.0.0.1:0")
	mc.Logger = testLogger()
	m, err := transport.NewMux(mc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testTransport is a group's raft transport on a mux layer.
func testTransport(layer *transport.StreamLayer) raft.Transport {
	tc := transport.DefaultTransportConfig()
	tc.Logger = testLogger()
	return transport.NewTransport(layer, tc)
}

func (c *testCluster) config(i int) Config {
	layer, err := c.muxes[i].Group(testGroup)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := DefaultConfig(testGroup, string(c.peers[i].ID), c.dirs[i])
	cfg.Transport = testTransport(layer)
	cfg.Peers = c.peers
	// Short enough for quick elections, long enough that a loaded
	// machine's scheduling pauses do not depose leaders mid-test.
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
	cfg.LeaderLeaseTimeout, cfg.CommitTimeout = 150*time.Millisecond, 5*time.Millisecond
	cfg.TickIntervalMax = 20 * time.Millisecond
	cfg.Logger = testLogger()
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

func (c *testCluster) start(i int) {
	p, err := Open(c.config(i))
	if err != nil {
		c.t.Fatalf("open replica %d: %v", i, err)
	}
	c.reps[i] = p
}

func (c *testCluster) stop(i int) {
	if err := c.reps[i].Close(); err != nil {
		c.t.Logf("close replica %d: %v", i, err)
	}
	c.reps[i] = nil
}

func (c *testCluster) close() {
	for i, p := range c.reps {
		if p != nil {
			c.stop(i)
		}
	}
	for _, m := range c.muxes {
		m.Close()
	}
}

// leader waits for a leader among running replicas and returns its index.
func (c *testCluster) leader() int {
	c.t.Helper()
	idx := -1
	testwait.Until(c.t, 10*time.Second, "a leader", func() bool {
		for i, p := range c.reps {
			if p != nil && p.IsLeader() {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// converged waits until every running replica has the leader's applied
// index and digest.
func (c *testCluster) converged() {
	c.t.Helper()
	testwait.Until(c.t, 15*time.Second, "replicas to converge", func() bool {
		var idx uint64
		var dig [32]byte
		first := true
		for _, p := range c.reps {
			if p == nil {
				continue
			}
			i, d := p.Digest()
			if first {
				idx, dig, first = i, d, false
			} else if i != idx || d != dig {
				return false
			}
		}
		return true
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// send proposes a batch of messages with ids prefix-0.. and returns seqs.
func send(t *testing.T, p *Partition, prefix string, n int) []uint64 {
	t.Helper()
	msgs := make([]fsm.NewMessage, n)
	for i := range msgs {
		msgs[i] = fsm.NewMessage{ID: fmt.Sprintf("%s-%d", prefix, i), Body: []byte("body " + prefix)}
	}
	res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdSend, Send: &fsm.SendCmd{Messages: msgs}})
	if err != nil || res.Err != nil {
		t.Fatalf("send: %v %v", err, res.Err)
	}
	seqs := make([]uint64, n)
	for i, o := range res.Sent {
		if o.Err != nil {
			t.Fatalf("send %d: %v", i, o.Err)
		}
		seqs[i] = o.Seq
	}
	return seqs
}
