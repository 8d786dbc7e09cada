package node

import (
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/clock"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/partition"
)

// Config describes one node.
type Config struct {
	// ID names the node in the cluster; it must be stable across restarts.
	ID string
	// DataDir holds the meta group and every partition replica.
	DataDir string
	// RaftAddr, ClientAddr, HTTPAddr and GossipAddr are the "ip:port"
	// listen addresses. They are also advertised, so use the node's own
	// reachable IP (for chaos tests, a per-node loopback such as
	// 127.0.0.11). Port 0 picks a free port.
	RaftAddr   string
	ClientAddr string
	HTTPAddr   string
	GossipAddr string
	// Join lists gossip addresses of existing members to contact at start.
	Join []string
	// BootstrapExpect, when > 0, makes the first BootstrapExpect nodes that
	// see each other form the meta group together. Nodes started with 0
	// wait to be added by an existing cluster.
	BootstrapExpect int
	// ClusterName separates clusters sharing a network (gossip label).
	ClusterName string
	// Raft timings for the meta group and every partition; zero values
	// take partition.DefaultConfig's.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold, TrailingLogs and SnapshotInterval for partitions;
	// zero takes the defaults. Raft looks at SnapshotThreshold only once
	// every SnapshotInterval (randomized up to twice that), so a small
	// threshold needs a short interval to take effect in a short test.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// QuiesceAfter is how long an idle partition keeps heartbeating before
	// it quiesces (partition.Config.QuiesceAfter): zero takes
	// partition.DefaultQuiesceAfter, a negative value turns quiescence off.
	QuiesceAfter time.Duration
	// ProposalGatherWait is partition.Config.GatherWait for every
	// partition: how long a merged send or ack proposal waits, at most,
	// for the requests it still expects (the clients its previous
	// proposal answered). Zero turns the wait off; at most
	// partition.GatherWaitMax. DefaultConfig sets
	// partition.DefaultGatherWait.
	ProposalGatherWait time.Duration
	// ProposalOverlapItemsMin is partition.Config.OverlapItemsMin for
	// every partition: how many sends (or acks) must be waiting, with a
	// merged proposal of theirs in flight, for a second one to start
	// before the first is answered. Zero keeps one proposal at a time; at
	// most fsm.BatchMax. DefaultConfig sets
	// partition.DefaultOverlapItemsMin.
	ProposalOverlapItemsMin int
	// RaftLogPrewrite turns on the raft log store's pre-written segments
	// (raftlog.Config.PreallocateSegments): the next segment file is
	// written with zeros ahead of time, in paced and separately synced
	// pieces, so that an append's fdatasync commits no size change
	// (1.3-2x more appends per second where fdatasync bounds them on
	// ext4). Segments appended to faster than 32 MiB/s get no spare: there
	// batches are large, and writing each segment twice would make the
	// disk's bandwidth the bound. On in DefaultConfig.
	RaftLogPrewrite bool
	// ReconcileInterval is how often the node compares its replicas with
	// the catalog (it also reacts to every catalog change at once).
	ReconcileInterval time.Duration
	// Placement holds how the cluster changes shape (config_placement.go).
	Placement PlacementConfig
	// GossipFast selects memberlist's local-network timings (fast failure
	// detection), for loopback clusters and tests.
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
	// to cluster-admin tokens only when Tokens is set; off by default.
	Pprof bool
	// Tokens are the client tokens (see internal/auth). When set, every
	// client connection must present a known token in its hello, every
	// request is checked against the token's permissions before anything
	// is done, and the HTTP admin port wants a token too (see http.go).
	// Node.SetTokens replaces the set. Nil turns authentication off: every
	// client may do everything. In-process tests use nil; ferryd never
	// starts without tokens unless given -insecure.
	Tokens *auth.Set
	// MaxClockOffset is how far this node's clock may be from the
	// majority of the cluster's (measured on gossip pings) before the node
	// gives up the leadership of every group, refuses commands and reports
	// itself not ready. Zero means DefaultMaxClockOffset.
	MaxClockOffset time.Duration
	// GossipKeys is the gossip keyring, primary key first: every gossip
	// packet and stream is encrypted (AES-GCM) with the primary key, and
	// what no key of the ring decrypts is dropped, so a process without a
	// key can neither join nor be seen. Keys are 16, 24 or 32 bytes, at
	// most 16 of them. The cluster secret that admission proofs use is
	// derived from them (see Node.SetGossipKeys for rotation). Empty turns
	// gossip encryption and admission checks off, which only an Insecure
	// node should do.
	GossipKeys [][]byte
	Logger     *slog.Logger

	// forgeProof, in tests, replaces the admission proof the node
	// advertises.
	forgeProof func(memberMeta) string
}

// Defaults of the client connection limits.
const (
	// DefaultMaxConns is the default Config.MaxConns.
	DefaultMaxConns = 10000
	// DefaultMaxConnsPerIP is the default Config.MaxConnsPerIP.
	DefaultMaxConnsPerIP = 1000
	// DefaultMaxHTTPConns is the default Config.MaxHTTPConns.
	DefaultMaxHTTPConns = 256
	// DefaultMaxHTTPConnsPerIP is the default Config.MaxHTTPConnsPerIP.
	DefaultMaxHTTPConnsPerIP = 64
	// DefaultIdleTimeout is the default Config.IdleTimeout.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultFrameTimeout is the default Config.FrameTimeout.
	DefaultFrameTimeout = 30 * time.Second
)

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

// DefaultConfig returns defaults for node id storing data in dir, listening
// on ip with the usual ports (7001 raft, 7101 client, 7201 HTTP, 7301
// gossip) plus offset.
func DefaultConfig(id, dir, ip string, offset int) Config {
	addr := func(port int) string { return net.JoinHostPort(ip, fmt.Sprint(port+offset)) }
	return Config{
		ID: id, DataDir: dir,
		RaftAddr: addr(7001), ClientAddr: addr(7101), HTTPAddr: addr(7201), GossipAddr: addr(7301),
		ClusterName:             "ferry",
		ReconcileInterval:       2 * time.Second,
		Placement:               PlacementConfig{DeadNodeTimeout: DefaultDeadNodeTimeout, Balance: true},
		RaftLogPrewrite:         true,
		ProposalGatherWait:      partition.DefaultGatherWait,
		ProposalOverlapItemsMin: partition.DefaultOverlapItemsMin,
		MaxConns:                DefaultMaxConns, MaxConnsPerIP: DefaultMaxConnsPerIP,
		MaxHTTPConns: DefaultMaxHTTPConns, MaxHTTPConnsPerIP: DefaultMaxHTTPConnsPerIP,
		IdleTimeout: DefaultIdleTimeout, FrameTimeout: DefaultFrameTimeout,
	}
}

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate reports the first bad field, naming it.
func (c Config) Validate() error {
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("%w: Config.%s = %q: %s", ErrInvalidConfig, field, fmt.Sprint(v), rule)
	}
	if !nodeIDPattern.MatchString(c.ID) {
		return bad("ID", c.ID, "1..64 of [A-Za-z0-9._-], starting with a letter or digit")
	}
	if c.MaxClockOffset < 0 || c.MaxClockOffset > time.Hour {
		return bad("MaxClockOffset", c.MaxClockOffset, "must be between 0 (the default) and 1h")
	}
	if c.DataDir == "" {
		return bad("DataDir", c.DataDir, "required")
	}
	for field, a := range map[string]string{"RaftAddr": c.RaftAddr, "ClientAddr": c.ClientAddr, "HTTPAddr": c.HTTPAddr, "GossipAddr": c.GossipAddr} {
		host, _, err := net.SplitHostPort(a)
		if err != nil || net.ParseIP(host) == nil || net.ParseIP(host).IsUnspecified() {
			return bad(field, a, "must be ip:port with the node's own reachable IP")
		}
	}
	if c.BootstrapExpect < 0 || c.BootstrapExpect > 5 {
		return bad("BootstrapExpect", c.BootstrapExpect, "must be between 0 and 5")
	}
	if c.ReconcileInterval <= 0 {
		return bad("ReconcileInterval", c.ReconcileInterval, "must be positive")
	}
	if c.ProposalGatherWait < 0 || c.ProposalGatherWait > partition.GatherWaitMax {
		return bad("ProposalGatherWait", c.ProposalGatherWait, fmt.Sprintf("must be between 0 (off) and %v", partition.GatherWaitMax))
	}
	if c.ProposalOverlapItemsMin < 0 || c.ProposalOverlapItemsMin > fsm.BatchMax {
		return bad("ProposalOverlapItemsMin", c.ProposalOverlapItemsMin, fmt.Sprintf("must be between 0 (off) and %d", fsm.BatchMax))
	}
	if err := c.Placement.validate(); err != nil {
		return err
	}
	if err := checkGossipKeys(c.GossipKeys); err != nil {
		return err
	}
	if err := c.validateLimits(bad); err != nil {
		return err
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	return c.validateConnLimits(bad)
}

// validateTLS checks that TLS material, in files or in memory, or Insecure
// is given, and only one of them.
func (c Config) validateTLS() error {
	files := c.TLSCertFile != "" || c.TLSKeyFile != "" || c.TLSCAFile != ""
	switch {
	case files && (c.TLSCertFile == "" || c.TLSKeyFile == "" || c.TLSCAFile == ""):
		return fmt.Errorf("%w: Config.TLSCertFile, TLSKeyFile and TLSCAFile must be set together", ErrInvalidConfig)
	case files && c.TLS != nil:
		return fmt.Errorf("%w: Config.TLS and the Config.TLS*File fields exclude each other", ErrInvalidConfig)
	case c.Insecure && (files || c.TLS != nil):
		return fmt.Errorf("%w: Config.Insecure is set together with TLS material", ErrInvalidConfig)
	case !c.Insecure && !files && c.TLS == nil:
		return fmt.Errorf("%w: no TLS material: set Config.TLSCertFile, TLSKeyFile and TLSCAFile (or Config.TLS), "+
			"or Config.Insecure to run in plaintext", ErrInvalidConfig)
	}
	return nil
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

// validateLimits checks the limits on queue creation.
func (c Config) validateLimits(bad func(field string, v any, rule string) error) error {
	switch {
	case c.MaxQueues < 0 || c.MaxQueues > meta.QueuesMax:
		return bad("MaxQueues", c.MaxQueues, fmt.Sprintf("must be between 0 and %d", meta.QueuesMax))
	case c.MaxPartitions < 0 || c.MaxPartitions > meta.QueuesMax*meta.PartitionsMax:
		return bad("MaxPartitions", c.MaxPartitions, fmt.Sprintf("must be between 0 and %d", meta.QueuesMax*meta.PartitionsMax))
	case c.QueueCreateRate < 0 || c.QueueCreateRate > 1e6 || c.QueueCreateRate != c.QueueCreateRate:
		return bad("QueueCreateRate", c.QueueCreateRate, "must be between 0 and 1000000 per second")
	case c.QueueCreateBurst < 0 || c.QueueCreateBurst > 1e6:
		return bad("QueueCreateBurst", c.QueueCreateBurst, "must be between 0 and 1000000")
	}
	return nil
}

// validateConnLimits checks the client connection limits (zero meaning the
// default).
func (c Config) validateConnLimits(bad func(field string, v any, rule string) error) error {
	d := c.withConnDefaults()
	switch {
	case c.MaxConns < 0:
		return bad("MaxConns", c.MaxConns, "must be positive (0 = default)")
	case c.MaxConnsPerIP < 0:
		return bad("MaxConnsPerIP", c.MaxConnsPerIP, "must be positive (0 = default)")
	case d.MaxConnsPerIP > d.MaxConns:
		return bad("MaxConnsPerIP", c.MaxConnsPerIP, fmt.Sprintf("must not exceed MaxConns (%d)", d.MaxConns))
	case c.MaxHTTPConns < 0:
		return bad("MaxHTTPConns", c.MaxHTTPConns, "must be positive (0 = default)")
	case c.MaxHTTPConnsPerIP < 0:
		return bad("MaxHTTPConnsPerIP", c.MaxHTTPConnsPerIP, "must be positive (0 = default)")
	case d.MaxHTTPConnsPerIP > d.MaxHTTPConns:
		return bad("MaxHTTPConnsPerIP", c.MaxHTTPConnsPerIP, fmt.Sprintf("must not exceed MaxHTTPConns (%d)", d.MaxHTTPConns))
	case c.IdleTimeout < 0 || (c.IdleTimeout > 0 && c.IdleTimeout < 100*time.Millisecond):
		return bad("IdleTimeout", c.IdleTimeout, "must be at least 100ms (0 = default)")
	case c.FrameTimeout < 0 || (c.FrameTimeout > 0 && c.FrameTimeout < 100*time.Millisecond):
		return bad("FrameTimeout", c.FrameTimeout, "must be at least 100ms (0 = default)")
	}
	return nil
}

// withDefaults fills the limits left at 0 with their defaults.
func (c Config) withDefaults() Config {
	if c.MaxClockOffset == 0 {
		c.MaxClockOffset = DefaultMaxClockOffset
	}
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
	return c.withConnDefaults()
}

// partitionConfig applies the node's raft settings to a partition config.
func (c Config) partitionConfig(pc partition.Config) partition.Config {
	if c.HeartbeatTimeout > 0 {
		pc.HeartbeatTimeout = c.HeartbeatTimeout
	}
	if c.ElectionTimeout > 0 {
		pc.ElectionTimeout = c.ElectionTimeout
	}
	if c.LeaderLeaseTimeout > 0 {
		pc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	}
	if c.SnapshotThreshold > 0 {
		pc.SnapshotThreshold = c.SnapshotThreshold
	}
	if c.TrailingLogs > 0 {
		pc.TrailingLogs = c.TrailingLogs
	}
	if c.SnapshotInterval > 0 {
		pc.SnapshotInterval = c.SnapshotInterval
	}
	switch {
	case c.QuiesceAfter > 0:
		pc.QuiesceAfter = c.QuiesceAfter
	case c.QuiesceAfter < 0:
		pc.QuiesceAfter = 0
	}
	pc.TickIntervalMax = min(pc.TickIntervalMax, pc.HeartbeatTimeout)
	pc.GatherWait = c.ProposalGatherWait
	pc.OverlapItemsMin = c.ProposalOverlapItemsMin
	pc.Now = clock.Now
	return pc
}
