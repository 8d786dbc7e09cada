package node

import (
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"time"

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
	// ReconcileInterval is how often the node compares its replicas with
	// the catalog (it also reacts to every catalog change at once).
	ReconcileInterval time.Duration
	// GossipFast selects memberlist's local-network timings (fast failure
	// detection), for loopback clusters and tests.
	GossipFast bool
	Logger     *slog.Logger
}

// DefaultConfig returns defaults for node id storing data in dir, listening
// on ip with the usual ports (7001 raft, 7101 client, 7201 HTTP, 7301
// gossip) plus offset.
func DefaultConfig(id, dir, ip string, offset int) Config {
	addr := func(port int) string { return net.JoinHostPort(ip, fmt.Sprint(port+offset)) }
	return Config{
		ID: id, DataDir: dir,
		RaftAddr: addr(7001), ClientAddr: addr(7101), HTTPAddr: addr(7201), GossipAddr: addr(7301),
		ClusterName:       "ferry",
		ReconcileInterval: 2 * time.Second,
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
	return nil
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
	pc.TickIntervalMax = min(pc.TickIntervalMax, pc.HeartbeatTimeout)
	return pc
}
