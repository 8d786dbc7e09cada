package node

import (
	"fmt"
	"net"
	"regexp"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/partition"
)

// badField is the error of a Config field out of range:
// "node.Config.Field = value: rule", wrapping ErrInvalidConfig.
func badField(field string, v any, rule string) error {
	if s, ok := v.(string); ok {
		v = fmt.Sprintf("%q", s)
	}
	return fmt.Errorf("%w: node.Config.%s = %v: %s", ErrInvalidConfig, field, v, rule)
}

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate reports the first bad field, naming it ("node.Config.Field =
// value: rule"); the error wraps ErrInvalidConfig. Zero values are valid
// wherever a default exists (see Config); rules that tie fields together
// are checked with the defaults filled in.
func (c Config) Validate() error {
	for _, check := range []func() error{
		c.validateIdentity, c.validateRaft, c.validateProposals, c.validateCluster,
		c.Placement.validate, c.validateGossipKeys, c.validateLimits, c.validateTLS, c.validateConnLimits,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateIdentity checks the node's id, data directory and addresses.
func (c Config) validateIdentity() error {
	if !nodeIDPattern.MatchString(c.ID) {
		return badField("ID", c.ID, "1..64 of [A-Za-z0-9._-], starting with a letter or digit")
	}
	if c.DataDir == "" {
		return badField("DataDir", c.DataDir, "required")
	}
	for _, a := range []struct{ field, addr string }{
		{"RaftAddr", c.RaftAddr}, {"ClientAddr", c.ClientAddr}, {"HTTPAddr", c.HTTPAddr}, {"GossipAddr", c.GossipAddr},
	} {
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil || net.ParseIP(host) == nil || net.ParseIP(host).IsUnspecified() {
			return badField(a.field, a.addr, "must be ip:port with the node's own reachable IP")
		}
	}
	return nil
}

// validateRaft checks the raft timings and snapshot settings: none
// negative, and with the defaults filled in, the bounds raft itself
// enforces (named here by the node's field, not partition's).
func (c Config) validateRaft() error {
	for _, f := range []struct {
		field string
		v     time.Duration
	}{
		{"HeartbeatTimeout", c.HeartbeatTimeout}, {"ElectionTimeout", c.ElectionTimeout},
		{"LeaderLeaseTimeout", c.LeaderLeaseTimeout}, {"SnapshotInterval", c.SnapshotInterval},
	} {
		if f.v < 0 {
			return badField(f.field, f.v, "must not be negative (0 = the default)")
		}
	}
	d := c.withRaftDefaults()
	switch {
	case d.HeartbeatTimeout < 5*time.Millisecond:
		return badField("HeartbeatTimeout", c.HeartbeatTimeout, "must be at least 5ms")
	case d.ElectionTimeout < d.HeartbeatTimeout:
		return badField("ElectionTimeout", c.ElectionTimeout,
			fmt.Sprintf("must be at least HeartbeatTimeout (%v; 0 = the default %v)", d.HeartbeatTimeout, partition.DefaultConfig("", "", "").ElectionTimeout))
	case d.LeaderLeaseTimeout > d.HeartbeatTimeout:
		return badField("LeaderLeaseTimeout", c.LeaderLeaseTimeout,
			fmt.Sprintf("must be at most HeartbeatTimeout (%v; 0 = the default %v)", d.HeartbeatTimeout, partition.DefaultLeaderLeaseTimeout))
	case d.SnapshotInterval < 5*time.Millisecond:
		return badField("SnapshotInterval", c.SnapshotInterval, "must be at least 5ms")
	}
	return nil
}

// validateProposals checks the proposal settings (negative: off).
func (c Config) validateProposals() error {
	switch {
	case c.ProposalGatherWait > partition.GatherWaitMax:
		return badField("ProposalGatherWait", c.ProposalGatherWait,
			fmt.Sprintf("must be at most %v (0 = the default, negative = off)", partition.GatherWaitMax))
	case c.ProposalOverlapItemsMin > fsm.BatchMax:
		return badField("ProposalOverlapItemsMin", c.ProposalOverlapItemsMin,
			fmt.Sprintf("must be at most %d (0 = the default, negative = one proposal at a time)", fsm.BatchMax))
	}
	return nil
}

// validateCluster checks the settings of the node's place in the cluster.
func (c Config) validateCluster() error {
	switch {
	case c.BootstrapExpect < 0 || c.BootstrapExpect > 5:
		return badField("BootstrapExpect", c.BootstrapExpect, "must be between 0 (do not bootstrap) and 5")
	case c.ReconcileInterval < 0:
		return badField("ReconcileInterval", c.ReconcileInterval, "must not be negative (0 = the default)")
	case c.MaxClockOffset < 0 || c.MaxClockOffset > time.Hour:
		return badField("MaxClockOffset", c.MaxClockOffset, "must be between 0 (the default) and 1h")
	}
	return nil
}

// validateGossipKeys checks the keyring, naming the field but no key.
func (c Config) validateGossipKeys() error {
	if err := checkGossipKeys(c.GossipKeys); err != nil {
		return fmt.Errorf("node.Config.GossipKeys: %w", err)
	}
	return nil
}

// validateTLS checks that TLS material, in files or in memory, or Insecure
// is given, and only one of them.
func (c Config) validateTLS() error {
	files := c.TLSCertFile != "" || c.TLSKeyFile != "" || c.TLSCAFile != ""
	switch {
	case files && (c.TLSCertFile == "" || c.TLSKeyFile == "" || c.TLSCAFile == ""):
		return fmt.Errorf("%w: node.Config.TLSCertFile, TLSKeyFile and TLSCAFile must be set together", ErrInvalidConfig)
	case files && c.TLS != nil:
		return fmt.Errorf("%w: node.Config.TLS and the node.Config.TLS*File fields exclude each other", ErrInvalidConfig)
	case c.Insecure && (files || c.TLS != nil):
		return fmt.Errorf("%w: node.Config.Insecure is set together with TLS material", ErrInvalidConfig)
	case !c.Insecure && !files && c.TLS == nil:
		return fmt.Errorf("%w: no TLS material: set node.Config.TLSCertFile, TLSKeyFile and TLSCAFile (or node.Config.TLS), "+
			"or node.Config.Insecure to run in plaintext", ErrInvalidConfig)
	}
	return nil
}

// validateLimits checks the limits on queue creation (zero meaning the
// default).
func (c Config) validateLimits() error {
	switch {
	case c.MaxQueues < 0 || c.MaxQueues > meta.QueuesMax:
		return badField("MaxQueues", c.MaxQueues, fmt.Sprintf("must be between 0 (the default) and %d", meta.QueuesMax))
	case c.MaxPartitions < 0 || c.MaxPartitions > meta.QueuesMax*meta.PartitionsMax:
		return badField("MaxPartitions", c.MaxPartitions,
			fmt.Sprintf("must be between 0 (the default) and %d", meta.QueuesMax*meta.PartitionsMax))
	case c.QueueCreateRate < 0 || c.QueueCreateRate > 1e6 || c.QueueCreateRate != c.QueueCreateRate:
		return badField("QueueCreateRate", c.QueueCreateRate, "must be between 0 (the default) and 1000000 per second")
	case c.QueueCreateBurst < 0 || c.QueueCreateBurst > 1e6:
		return badField("QueueCreateBurst", c.QueueCreateBurst, "must be between 0 (the default) and 1000000")
	}
	return nil
}

// validateConnLimits checks the client connection limits (zero meaning the
// default).
func (c Config) validateConnLimits() error {
	d := c.withConnDefaults()
	switch {
	case c.MaxConns < 0:
		return badField("MaxConns", c.MaxConns, "must not be negative (0 = the default)")
	case c.MaxConnsPerIP < 0:
		return badField("MaxConnsPerIP", c.MaxConnsPerIP, "must not be negative (0 = the default)")
	case d.MaxConnsPerIP > d.MaxConns:
		return badField("MaxConnsPerIP", c.MaxConnsPerIP, fmt.Sprintf("must not exceed MaxConns (%d)", d.MaxConns))
	case c.MaxHTTPConns < 0:
		return badField("MaxHTTPConns", c.MaxHTTPConns, "must not be negative (0 = the default)")
	case c.MaxHTTPConnsPerIP < 0:
		return badField("MaxHTTPConnsPerIP", c.MaxHTTPConnsPerIP, "must not be negative (0 = the default)")
	case d.MaxHTTPConnsPerIP > d.MaxHTTPConns:
		return badField("MaxHTTPConnsPerIP", c.MaxHTTPConnsPerIP, fmt.Sprintf("must not exceed MaxHTTPConns (%d)", d.MaxHTTPConns))
	case c.IdleTimeout < 0 || (c.IdleTimeout > 0 && c.IdleTimeout < 100*time.Millisecond):
		return badField("IdleTimeout", c.IdleTimeout, "must be at least 100ms (0 = the default)")
	case c.FrameTimeout < 0 || (c.FrameTimeout > 0 && c.FrameTimeout < 100*time.Millisecond):
		return badField("FrameTimeout", c.FrameTimeout, "must be at least 100ms (0 = the default)")
	}
	return nil
}
