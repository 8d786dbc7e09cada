package node

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/dashboard"
	"github.com/ferrymq/ferry/internal/connlimit"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/mover"
	"github.com/ferrymq/ferry/transport"
	"github.com/ferrymq/ferry/wal/raftlog"
)

// Node is one running cluster member.
type Node struct {
	cfg        Config
	logger     *slog.Logger
	raftAddr   string
	clientAddr string
	httpAddr   string

	mux      *transport.Mux
	raftNet  *transport.Shared // every group's raft transport, on mux
	meta     *metaGroup
	members  *membership
	clock    *clockMonitor // this node's clock against the others'
	replicas *replicaSet
	metrics  *metrics
	// consumers counts recent consumers per partition for /metrics and
	// the dashboard.
	consumers *consumerTracker
	// dash is the web dashboard on the HTTP port, dashSrc its view of
	// the cluster.
	dash    *dashboard.Dashboard
	dashSrc *dashboardSource
	clients *clientServer
	http    *http.Server
	// httpConns is the admin port's listener, bounding its connections.
	httpConns *connlimit.Listener
	logs      *raftlog.Store    // every partition replica's raft log
	creates   *tokenBucket      // the queue create rate limit
	tls       *tlsconf.Material // nil when Config.Insecure
	auth      tokenStore        // client tokens; off when Config.Tokens is nil

	// incarnation identifies this data directory (incarnation.go);
	// freshDir is set when this start drew it (a new or wiped directory).
	incarnation uint64
	freshDir    bool
	// mover drives the membership of the partitions this node leads
	// (moves.go).
	mover *mover.Mover
	// reports holds what this node's partition leaders ask the catalog
	// to record (caught-up and left replicas), gossiped with its leader
	// table.
	reports *moveReports
	// shapePlanned is what the meta leader's last move plan saw (duty
	// loop only); replanSoon asks the next duty round to plan anyway
	// (a drain just changed the catalog).
	shapePlanned shapePlanStamp
	replanSoon   atomic.Bool
	// metaHandOverAt is when a draining meta leader last tried to hand
	// its leadership over (duty loop only).
	metaHandOverAt time.Time

	closing   chan struct{}
	closeOnce sync.Once
	loops     sync.WaitGroup
}

// Start brings a node up: listeners, the meta group, gossip (joining
// cfg.Join), and the loops that bootstrap, register members and reconcile
// the node's partition replicas with the catalog.
func Start(cfg Config) (n *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	n = newNode(cfg)
	var undo cleanups
	defer func() {
		if err != nil {
			undo.run()
		}
	}()
	if err := n.openStorage(&undo); err != nil {
		return nil, err
	}
	clientLn, err := n.openListeners(&undo)
	if err != nil {
		return nil, err
	}
	if err := n.openRaftNet(&undo); err != nil {
		return nil, err
	}
	if err := n.openCluster(&undo); err != nil {
		return nil, err
	}
	n.openServers(clientLn)
	n.startLoops(n.httpConns)
	if err := n.members.join(cfg.Join); err != nil || !n.joinedEnough() {
		n.logger.Warn("no other member reached through the seeds yet; will keep joining", "seeds", cfg.Join, "err", err,
			"members", n.members.count())
		n.loops.Add(1)
		go n.retryJoin()
	}
	n.logger.Info("node started", "raft", n.raftAddr, "client", n.clientAddr, "http", n.httpAddr, "gossip", n.members.gossipAddr(),
		"tls", n.tls != nil)
	if n.tls == nil {
		n.logger.Warn("running without TLS (-insecure): every port is plaintext and raft is open to anyone who can reach it")
	}
	return n, nil
}

// cleanups undoes, last first, what a failed Start had opened. The
// functions must not read the Node: a failed Start returns a nil one.
type cleanups []func()

// add records one undo step.
func (c *cleanups) add(f func()) { *c = append(*c, f) }

// run undoes every recorded step, last first.
func (c cleanups) run() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// newNode returns a Node for a validated cfg with nothing opened yet.
func newNode(cfg Config) *Node {
	n := &Node{cfg: cfg, logger: cfg.Logger, closing: make(chan struct{}),
		creates: newTokenBucket(cfg.QueueCreateRate, cfg.QueueCreateBurst, time.Now)}
	if n.logger == nil {
		n.logger = slog.Default()
	}
	if cfg.Tokens != nil {
		n.auth.store(cfg.Tokens)
	}
	n.logger = n.logger.With("node", cfg.ID)
	return n
}

// openStorage loads the TLS material, creates the data directory, reads
// (or writes) its incarnation and opens the shared raft log store.
func (n *Node) openStorage(undo *cleanups) (err error) {
	if n.tls, err = n.cfg.loadTLS(); err != nil {
		return err
	}
	if err := mkdir(n.cfg.DataDir); err != nil {
		return err
	}
	if n.incarnation, n.freshDir, err = loadIncarnation(n.cfg.DataDir); err != nil {
		return err
	}
	if n.logs, err = openLogStore(n.cfg, n.logger); err != nil {
		return err
	}
	logs := n.logs
	undo.add(func() { logs.Close() })
	return nil
}

// openListeners opens the client and HTTP listeners (the HTTP one behind
// its connection limiter) and returns the client one.
func (n *Node) openListeners(undo *cleanups) (net.Listener, error) {
	clientLn, err := net.Listen("tcp", n.cfg.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("client listener: %w", err)
	}
	undo.add(func() { clientLn.Close() })
	httpLn, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("http listener: %w", err)
	}
	undo.add(func() { httpLn.Close() })
	n.httpConns = connlimit.New(httpLn, n.cfg.MaxHTTPConns, n.cfg.MaxHTTPConnsPerIP, connlimit.LogRefusals(n.logger, "admin"))
	n.clientAddr, n.httpAddr = clientLn.Addr().String(), httpLn.Addr().String()
	return clientLn, nil
}

// openRaftNet opens the raft port (mux, with mutual TLS when configured)
// and the shared raft transport every group of the node uses.
func (n *Node) openRaftNet(undo *cleanups) (err error) {
	mc := transport.DefaultMuxConfig(n.cfg.RaftAddr)
	mc.Logger = n.logger
	if n.tls != nil {
		mc.ServerTLS, mc.ClientTLS = n.tls.PeerServer(), n.tls.PeerClient()
	}
	if n.mux, err = transport.NewMux(mc); err != nil {
		return fmt.Errorf("raft listener: %w", err)
	}
	mux := n.mux
	undo.add(func() { mux.Close() })
	n.raftAddr = n.mux.Addr().String()
	sc := transport.DefaultSharedConfig()
	sc.Logger = n.logger
	if r := n.cfg.Placement.SnapshotBytesPerSecond; r != 0 {
		sc.SnapshotBytesPerSecond = r
	}
	if n.raftNet, err = transport.NewShared(n.mux, sc); err != nil {
		return fmt.Errorf("raft transport: %w", err)
	}
	return nil
}

// openCluster opens the meta group, gossip membership and the parts that
// keep the node's replicas in line with the catalog.
func (n *Node) openCluster(undo *cleanups) (err error) {
	trans, err := n.raftNet.Group(meta.MetaGroupID)
	if err != nil {
		return err
	}
	metaSelf := metaSelf{id: n.cfg.ID, incarnation: n.incarnation, freshDir: n.freshDir, logger: n.logger,
		clockProblem: func() string { return n.clock.problem() }}
	if n.meta, err = openMetaGroup(metaSelf, &n.cfg, n.raftNet, trans); err != nil {
		return err
	}
	undo.add(n.meta.close)
	n.clock = newClockMonitor(n.cfg.ID, n.cfg.MaxClockOffset, n.logger, n)
	self := memberMeta{ID: n.cfg.ID, Raft: n.raftAddr, Client: n.clientAddr, HTTP: n.httpAddr, Formed: n.meta.hasState,
		Inc: strconv.FormatUint(n.incarnation, 16)}
	if n.members, err = newMembership(&n.cfg, n.logger, n.clock, self); err != nil {
		return err
	}
	undo.add(n.members.leave)
	n.replicas = newReplicaSet(n)
	n.reports = newMoveReports()
	if n.mover, err = mover.New(n.cfg.moverConfig()); err != nil {
		return err
	}
	n.consumers = newConsumerTracker()
	n.metrics = newMetrics(n)
	return nil
}

// openServers builds the client-port server, the dashboard and the HTTP
// server (started by startLoops).
func (n *Node) openServers(clientLn net.Listener) {
	var clientTLS *tls.Config
	if n.tls != nil {
		clientTLS = n.tls.Server()
	}
	n.clients = newClientServer(clientDeps{cfg: &n.cfg, logger: n.logger, metrics: n.metrics, auth: &n.auth,
		handle: n.handle, closing: n.closing}, clientLn, clientTLS)
	n.dashSrc = newDashboardSource(n.cfg.ID, n.clientAddr, n.tls, n)
	n.dash = dashboard.New(n.dashSrc, n.logger)
	n.http = n.httpServer()
}

// startLoops starts the node's servers (client port, HTTP) and its
// background loops (moves, clock monitor, bootstrap, meta duties,
// reconcile); Close waits for the loops counted in n.loops.
func (n *Node) startLoops(httpLn net.Listener) {
	n.clients.wg.Add(1)
	go n.clients.serve()
	go func() {
		serve := n.http.Serve
		if n.http.TLSConfig != nil {
			serve = func(ln net.Listener) error { return n.http.ServeTLS(ln, "", "") }
		}
		if err := serve(httpLn); err != nil && err != http.ErrServerClosed {
			n.logger.Error("http server stopped", "err", err)
		}
	}()
	n.loops.Add(5)
	go n.runMoves()
	go func() { defer n.loops.Done(); n.clock.run(n.closing) }()
	go n.runBootstrap()
	go n.runMetaDuties()
	go n.runReconcile()
}

// retryJoin keeps joining the seeds, once a second, until joinedEnough
// or the node closes.
func (n *Node) retryJoin() {
	defer n.loops.Done()
	for {
		select {
		case <-n.closing:
			return
		case <-time.After(time.Second):
		}
		if err := n.members.join(n.cfg.Join); err == nil && n.joinedEnough() {
			n.logger.Info("joined the cluster", "seeds", n.cfg.Join, "members", n.members.count())
			return
		}
	}
}

// joinedEnough reports whether the node may stop joining its seeds: it
// has none, or the cluster has formed (a meta leader is known), or it
// sees another member and, before the cluster forms, as many as
// BootstrapExpect. A seed that answers is not enough on its own: a seed
// list that resolves to this node alone (a DNS name whose other records
// are not published yet) answers too, and a node left with itself would
// wait for bootstrap-expect members for ever.
func (n *Node) joinedEnough() bool {
	if len(n.cfg.Join) == 0 || n.meta.leaderID() != "" {
		return true
	}
	return n.members.count() >= max(2, n.cfg.BootstrapExpect)
}

// Close shuts the node down: it stops serving clients, hands over raft
// leaderships where it can, stops every replica and leaves the gossip ring.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.closing)
		n.handOverBeforeStopping()
		n.clients.close()
		n.http.Close()
		n.dash.Close()
		n.dashSrc.close()
		n.loops.Wait()
		n.replicas.closeAll()
		n.meta.close()
		n.members.leave()
		n.mux.Close()
		if err := n.logs.Close(); err != nil {
			n.logger.Error("closing the raft log store failed", "err", err)
		}
		n.logger.Info("node stopped")
	})
	return nil
}

// stopHandOverMax bounds how long a stopping node waits for the groups it
// leads to take new leaders before it closes its client port.
const stopHandOverMax = 5 * time.Second

// handOverBeforeStopping hands the leadership of every group this node
// leads (the meta group's too) to a caught-up follower while the client
// port still answers: a client that asks this node meanwhile is told
// where the new leader is, instead of losing its connection and finding
// the other nodes still pointing here.
func (n *Node) handOverBeforeStopping() {
	start := time.Now()
	metaDone := make(chan struct{})
	go func() {
		defer close(metaDone)
		if servers, err := n.meta.servers(); err == nil && len(servers) > 1 && n.meta.isLeader() {
			n.meta.raft.LeadershipTransfer().Error()
		}
	}()
	led := n.replicas.giveUpAll(stopHandOverMax)
	select {
	case <-metaDone:
	case <-time.After(max(0, stopHandOverMax-time.Since(start))):
	}
	if led > 0 {
		n.logger.Info("leaderships handed over before stopping", "groups", led, "took", time.Since(start).Round(time.Millisecond))
	}
}

// SetGossipKeys replaces the gossip keyring at run time, primary key
// first. A rotation takes three rounds over every node: add the new key
// (old primary first, new key second), then make it the primary (new key
// first, old key second), then drop the old one (new key alone). Each
// round must reach every node before the next starts. It fails on a node
// started without keys.
func (n *Node) SetGossipKeys(keys [][]byte) error {
	if err := n.members.setKeys(keys); err != nil {
		return err
	}
	n.logger.Info("gossip keyring replaced", "keys", len(keys))
	return nil
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// ClientAddr returns the bound client protocol address.
func (n *Node) ClientAddr() string { return n.clientAddr }

// HTTPAddr returns the bound HTTP address.
func (n *Node) HTTPAddr() string { return n.httpAddr }

// GossipAddr returns the bound gossip address.
func (n *Node) GossipAddr() string { return n.members.gossipAddr() }

// RaftAddr returns the bound raft address.
func (n *Node) RaftAddr() string { return n.raftAddr }

// RaftConnections returns the raft port's groups and open connections
// (also exported as ferry_raft_connections).
func (n *Node) RaftConnections() transport.Stats { return n.mux.Stats() }

// openLogStore opens the node's shared raft log store in DataDir/raftlog:
// one group-committed log for the raft entries of every partition replica
// the node hosts (the meta group keeps its own raft-boltdb log).
func openLogStore(cfg Config, logger *slog.Logger) (*raftlog.Store, error) {
	lc := cfg.logStoreConfig()
	lc.Logger = logger
	store, sum, err := raftlog.Open(lc)
	if err != nil {
		return nil, fmt.Errorf("raft log store: %w", err)
	}
	logger.Info("raft log store opened", "recovery", sum.String())
	return store, nil
}

// logStoreConfig is the config of the node's shared raft log store, in
// DataDir/raftlog.
func (c Config) logStoreConfig() raftlog.Config {
	lc := raftlog.DefaultConfig(filepath.Join(c.DataDir, "raftlog"))
	lc.PreallocateSegments = !c.NoRaftLogPrewrite
	return lc
}

// mkdir creates dir and its parents, naming dir in the error.
func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}
