package node

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/clock"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/partition"
)

// Config describes one node.
//
// One rule for zero holds for every field: a field left at its zero value
// takes its documented default, so that a Config holding only ID, DataDir,
// the four addresses and Insecure (or TLS material) runs exactly like
// DefaultConfig. A zero never turns off what is on by default: such a
// feature is turned off by an explicit value its field documents, a
// negative duration or count, or a No... bool whose zero value (false)
// keeps the feature on. (Features off by default, such as Pprof or
// GossipFast, are bools whose zero is that default.) Validate refuses a
// value out of range and names it ("node.Config.Field = value: rule");
// Start then fills the defaults in (WithDefaults). ID, DataDir and the
// addresses are required and have no default; so are TLS material or
// Insecure.
type Config struct {
	// ID names the node in the cluster; it must be stable across restarts.
	// Required.
	ID string
	// DataDir holds the meta group and every partition replica. Required.
	DataDir string
	// RaftAddr, ClientAddr, HTTPAddr and GossipAddr are the "ip:port"
	// listen addresses. They are also advertised, so use the node's own
	// reachable IP (for chaos tests, a per-node loopback such as
	// 127.0.0.11). Port 0 picks a free port. Required.
	RaftAddr   string
	ClientAddr string
	HTTPAddr   string
	GossipAddr string
	// Join lists gossip addresses of existing members to contact at start.
	// Empty (the default): none; the node waits to be joined.
	Join []string
	// BootstrapExpect, when > 0, makes the first BootstrapExpect nodes that
	// see each other form the meta group together (at most 5). Zero, the
	// default: the node waits to be added by an existing cluster.
	BootstrapExpect int
	// ClusterName separates clusters sharing a network (gossip label).
	// Empty takes DefaultClusterName.
	ClusterName string
	// Raft timings for the meta group and every partition; zero takes
	// partition.DefaultConfig's. They must not be negative, and once the
	// defaults are filled in, HeartbeatTimeout must be at least 5ms,
	// ElectionTimeout at least HeartbeatTimeout and LeaderLeaseTimeout at
	// most HeartbeatTimeout.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold, TrailingLogs and SnapshotInterval for partitions;
	// zero takes partition.DefaultConfig's. Raft looks at SnapshotThreshold
	// only once every SnapshotInterval (randomized up to twice that), so a
	// small threshold needs a short interval to take effect in a short
	// test. SnapshotInterval must not be negative, nor below 5ms once the
	// default is filled in.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// QuiesceAfter is how long an idle partition keeps heartbeating before
	// it quiesces (partition.Config.QuiesceAfter): zero takes
	// partition.DefaultQuiesceAfter, a negative value turns quiescence off.
	QuiesceAfter time.Duration
	// ProposalGatherWait is partition.Config.GatherWait for every
	// partition: how long a merged send or ack proposal waits for the
	// next of the requests it still expects (the clients its previous
	// proposal answered), four times that at most in all. Zero takes
	// partition.DefaultGatherWait; a negative value turns the wait off;
	// at most partition.GatherWaitMax.
	ProposalGatherWait time.Duration
	// ProposalOverlapItemsMin is partition.Config.OverlapItemsMin for
	// every partition: how many sends (or acks) must be waiting, with a
	// merged proposal of theirs in flight, for a second one to start
	// before the first is answered. Zero takes
	// partition.DefaultOverlapItemsMin; a negative value keeps one
	// proposal at a time; at most fsm.BatchMax.
	ProposalOverlapItemsMin int
	// NoRaftLogPrewrite turns off the raft log store's pre-written
	// segments (raftlog.Config.PreallocateSegments), which are on by
	// default: the next segment file is written with zeros ahead of time,
	// in paced and separately synced pieces, so that an append's fdatasync
	// commits no size change (1.3-2x more appends per second where
	// fdatasync bounds them on ext4). Segments appended to faster than
	// 32 MiB/s get no spare: there batches are large, and writing each
	// segment twice would make the disk's bandwidth the bound.
	NoRaftLogPrewrite bool
	// ReconcileInterval is how often the node compares its replicas with
	// the catalog (it also reacts to every catalog change at once). Zero
	// takes DefaultReconcileInterval; it must not be negative.
	ReconcileInterval time.Duration
	// Placement holds how the cluster changes shape (config_placement.go).
	Placement PlacementConfig
	// GossipFast selects memberlist's local-network timings (fast failure
	// detection), for loopback clusters and tests. Off by default (the
	// LAN timings).
	GossipFast bool
	// MaxQueues and MaxPartitions cap the queues the cluster holds and
	// their partitions in total; a create past either fails with
	// wire.CodeLimitExceeded. The meta leader's values apply (they travel
	// in each create). 0 takes DefaultMaxQueues and DefaultMaxPartitions.
	MaxQueues     int
	MaxPartitions int
	// QueueCreateRate is how many queue creates per second this node
	// accepts, with bursts of up to QueueCreateBurst; a create beyond it
	// fails with wire.CodeLimitExceeded. 0 takes DefaultQueueCreateRate and
	// DefaultQueueCreateBurst.
	QueueCreateRate  float64
	QueueCreateBurst int
	// MaxConns bounds the client protocol connections the node serves at
	// once, and MaxConnsPerIP those from one client IP address; a
	// connection over either limit is answered CodeTooManyConnections and
	// closed. Zero takes the defaults (DefaultMaxConns,
	// DefaultMaxConnsPerIP).
	MaxConns      int
	MaxConnsPerIP int
	// MaxHTTPConns bounds the HTTP admin port's open connections, and
	// MaxHTTPConnsPerIP those from one IP address; a connection over
	// either is closed as soon as it is accepted (counted in
	// ferry_http_connections_refused_total), so that a flood of idle
	// connections cannot take the file descriptors the node's other ports
	// need. Zero takes DefaultMaxHTTPConns and DefaultMaxHTTPConnsPerIP.
	MaxHTTPConns      int
	MaxHTTPConnsPerIP int
	// IdleTimeout closes a client connection that has no request in flight
	// and sends none for this long (a long-poll receive is a request in
	// flight, so it is never cut). Zero takes DefaultIdleTimeout.
	IdleTimeout time.Duration
	// FrameTimeout bounds the reading of one request frame once its first
	// byte has arrived, and the writing of one response frame: a client
	// that stalls half-way through a frame, or stops reading its answers,
	// is disconnected. Zero takes DefaultFrameTimeout.
	FrameTimeout time.Duration
	// TLSCertFile, TLSKeyFile and TLSCAFile name the node's PEM
	// certificate (valid for server and client authentication), its key
	// and the cluster CA bundle. With them every port but gossip speaks
	// TLS: the client protocol and HTTP admin present the certificate, and
	// raft runs in mutual TLS, refusing any peer without a node
	// certificate of the CA. TLS is the same material in memory (for
	// tests); it and the files exclude each other. One of them, or
	// Insecure, is required.
	TLSCertFile string
	TLSKeyFile  string
	TLSCAFile   string
	TLS         *tlsconf.Material
	// Insecure runs every port in plaintext; it must be set explicitly
	// when no TLS material is given, and not with it. ferryd also allows
	// gossip without a key only when it is set.
	Insecure bool
	// Pprof serves the Go profiler under /debug/pprof/ on the HTTP port,
	// to cluster-admin tokens only when Tokens is set. Off by default.
	Pprof bool
	// Tokens are the client tokens (see internal/auth). When set, every
	// client connection must present a known token in its hello, every
	// request is checked against the token's permissions before anything
	// is done, and the HTTP admin port wants a token too (see http.go).
	// Node.SetTokens replaces the set. Nil, the default, is no
	// authentication: every client may do everything. In-process tests use
	// nil; ferryd never starts without tokens unless given -insecure.
	Tokens *auth.Set
	// MaxClockOffset is how far this node's clock may be from the
	// majority of the cluster's (measured on gossip pings) before the node
	// gives up the leadership of every group, refuses commands and reports
	// itself not ready. Zero takes DefaultMaxClockOffset; at most 1h. The
	// check cannot be turned off.
	MaxClockOffset time.Duration
	// GossipKeys is the gossip keyring, primary key first: every gossip
	// packet and stream is encrypted (AES-GCM) with the primary key, and
	// what no key of the ring decrypts is dropped, so a process without a
	// key can neither join nor be seen. Keys are 16, 24 or 32 bytes, at
	// most 16 of them. The cluster secret that admission proofs use is
	// derived from them (see Node.SetGossipKeys for rotation). Empty, the
	// default, is no gossip encryption and no admission checks, which only
	// an Insecure node should run with (ferryd refuses otherwise).
	GossipKeys [][]byte
	// Logger receives the node's logs. Nil takes slog.Default() (as it is
	// when Start runs).
	Logger *slog.Logger

	// forgeProof, in tests, replaces the admission proof the node
	// advertises.
	forgeProof func(memberMeta) string
}

// Defaults of the client connection limits.
const (
	// DefaultMaxConns is the default Config.MaxConns.
	DefaultMaxConns = 10000
	// DefaultMaxConnsPerIP is the default Config.MaxConnsPerIP (or
	// MaxConns, when that is lower).
	DefaultMaxConnsPerIP = 1000
	// DefaultMaxHTTPConns is the default Config.MaxHTTPConns.
	DefaultMaxHTTPConns = 256
	// DefaultMaxHTTPConnsPerIP is the default Config.MaxHTTPConnsPerIP (or
	// MaxHTTPConns, when that is lower).
	DefaultMaxHTTPConnsPerIP = 64
	// DefaultIdleTimeout is the default Config.IdleTimeout.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultFrameTimeout is the default Config.FrameTimeout.
	DefaultFrameTimeout = 30 * time.Second
)

// Defaults of the limits on queue creation.
const (
	// DefaultMaxQueues is the default cap on the queues of a cluster.
	DefaultMaxQueues = 10_000
	// DefaultMaxPartitions is the default cap on their partitions.
	DefaultMaxPartitions = 10_000
	// DefaultQueueCreateRate is the default number of creates per second a
	// node accepts.
	DefaultQueueCreateRate = 200
	// DefaultQueueCreateBurst is the default burst of creates.
	DefaultQueueCreateBurst = 400
)

// Defaults of the cluster settings.
const (
	// DefaultClusterName is the default Config.ClusterName.
	DefaultClusterName = "ferry"
	// DefaultReconcileInterval is the default Config.ReconcileInterval.
	DefaultReconcileInterval = 2 * time.Second
)

// DefaultConfig returns the config of node id storing data in dir,
// listening on ip with the usual ports (7001 raft, 7101 client, 7201 HTTP,
// 7301 gossip) plus offset, with every other field at its default, filled
// in (Start would fill the same values into a zero field). TLS material or
// Insecure is left to the caller.
func DefaultConfig(id, dir, ip string, offset int) Config {
	addr := func(port int) string { return net.JoinHostPort(ip, fmt.Sprint(port+offset)) }
	return Config{
		ID: id, DataDir: dir,
		RaftAddr: addr(7001), ClientAddr: addr(7101), HTTPAddr: addr(7201), GossipAddr: addr(7301),
	}.WithDefaults()
}

// WithDefaults returns c with every field left at zero set to its default,
// as Start does after Validate: the config the node runs with. Explicit
// values, those that turn a feature off included, are kept, so WithDefaults
// of its own result changes nothing. Logger stays as it is (nil is
// slog.Default() when Start runs).
func (c Config) WithDefaults() Config {
	c = c.withRaftDefaults()
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	if c.MaxClockOffset == 0 {
		c.MaxClockOffset = DefaultMaxClockOffset
	}
	c.Placement = c.Placement.withDefaults()
	return c.withLimitDefaults().withConnDefaults()
}

// withRaftDefaults fills the zero raft and proposal settings with
// partition.DefaultConfig's.
func (c Config) withRaftDefaults() Config {
	d := partition.DefaultConfig("", "", "")
	fill := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&c.HeartbeatTimeout, d.HeartbeatTimeout)
	fill(&c.ElectionTimeout, d.ElectionTimeout)
	fill(&c.LeaderLeaseTimeout, d.LeaderLeaseTimeout)
	fill(&c.SnapshotInterval, d.SnapshotInterval)
	fill(&c.QuiesceAfter, d.QuiesceAfter)
	fill(&c.ProposalGatherWait, d.GatherWait)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = d.SnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = d.TrailingLogs
	}
	if c.ProposalOverlapItemsMin == 0 {
		c.ProposalOverlapItemsMin = d.OverlapItemsMin
	}
	return c
}

// withLimitDefaults fills the zero limits on queue creation.
func (c Config) withLimitDefaults() Config {
	if c.MaxQueues == 0 {
		c.MaxQueues = DefaultMaxQueues
	}
	if c.MaxPartitions == 0 {
		c.MaxPartitions = DefaultMaxPartitions
	}
	if c.QueueCreateRate == 0 {
		c.QueueCreateRate = DefaultQueueCreateRate
	}
	if c.QueueCreateBurst == 0 {
		c.QueueCreateBurst = DefaultQueueCreateBurst
	}
	return c
}

// withConnDefaults fills the zero connection limits with their defaults.
func (c Config) withConnDefaults() Config {
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerIP == 0 {
		c.MaxConnsPerIP = min(DefaultMaxConnsPerIP, c.MaxConns)
	}
	if c.MaxHTTPConns == 0 {
		c.MaxHTTPConns = DefaultMaxHTTPConns
	}
	if c.MaxHTTPConnsPerIP == 0 {
		c.MaxHTTPConnsPerIP = min(DefaultMaxHTTPConnsPerIP, c.MaxHTTPConns)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = DefaultFrameTimeout
	}
	return c
}

// loadTLS returns the node's TLS material (nil when Insecure).
func (c Config) loadTLS() (*tlsconf.Material, error) {
	if c.TLS != nil || c.Insecure {
		return c.TLS, nil
	}
	m, err := tlsconf.Load(c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return m, nil
}

// partitionConfig applies the node's raft settings to a partition config
// (the meta group's included), the node's defaults filled in and its "off"
// values turned into partition's zeros.
func (c Config) partitionConfig(pc partition.Config) partition.Config {
	c = c.withRaftDefaults()
	pc.HeartbeatTimeout, pc.ElectionTimeout, pc.LeaderLeaseTimeout = c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout
	pc.SnapshotThreshold, pc.TrailingLogs, pc.SnapshotInterval = c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval
	pc.QuiesceAfter = max(c.QuiesceAfter, 0)
	pc.GatherWait = max(c.ProposalGatherWait, 0)
	pc.OverlapItemsMin = max(c.ProposalOverlapItemsMin, 0)
	pc.TickIntervalMax = min(pc.TickIntervalMax, pc.HeartbeatTimeout)
	pc.Now = clock.Now
	return pc
}
