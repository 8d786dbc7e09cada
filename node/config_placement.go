package node

import (
	"fmt"
	"time"

	"github.com/ferrymq/ferry/mover"
	"github.com/ferrymq/ferry/transport"
)

// PlacementConfig holds how the cluster changes shape: replica moves,
// dead-node replacement and balancing (see docs/operations.md, "Changing
// the cluster's shape"). Its fields follow Config's rule: zero takes the
// default, and what can be turned off is turned off by an explicit value.
type PlacementConfig struct {
	// DeadNodeTimeout is how long a node must be dead (gossip's view, as
	// the meta leader sees it) before its replicas are rebuilt on live
	// nodes. Zero takes DefaultDeadNodeTimeout; a negative value turns
	// replacement off.
	DeadNodeTimeout time.Duration
	// MovesMax bounds the partitions moving at once in the whole cluster
	// (drains, replacements and balancing together). Zero takes
	// DefaultMovesMax; at most MovesLimit.
	MovesMax int
	// CatchUpsMax bounds the replicas catching up at once in the groups
	// one node leads. Zero takes mover.DefaultConfig's; at most
	// mover.CatchUpsLimit.
	CatchUpsMax int
	// CatchUpHold is how long a new replica must stay caught up before it
	// votes. Zero takes mover.DefaultConfig's; at most 1m.
	CatchUpHold time.Duration
	// SnapshotBytesPerSecond bounds the bytes per second this node streams
	// snapshots at, to all peers together (transport.SharedConfig). Zero
	// takes transport.DefaultSnapshotBytesPerSecond; negative is
	// unlimited.
	SnapshotBytesPerSecond int64
	// NoBalance stops the meta leader from moving replicas and preferred
	// leaders by itself until their counts per node differ by at most
	// one; balancing is on by default (false). An explicit rebalance
	// (Node's RebalanceRequest, `ferry cluster rebalance`) still runs.
	NoBalance bool
}

// Placement defaults.
const (
	// DefaultDeadNodeTimeout is how long a node may be dead before its
	// replicas are rebuilt elsewhere.
	DefaultDeadNodeTimeout = 5 * time.Minute
	// DefaultMovesMax is the default bound on partitions moving at once.
	DefaultMovesMax = 8
	// MovesLimit is the largest MovesMax.
	MovesLimit = 1024
)

// validate names the first bad field.
func (c PlacementConfig) validate() error {
	bad := func(field string, v any, rule string) error { return badField("Placement."+field, v, rule) }
	switch {
	case c.MovesMax < 0 || c.MovesMax > MovesLimit:
		return bad("MovesMax", c.MovesMax, fmt.Sprintf("must be between 0 (the default) and %d", MovesLimit))
	case c.CatchUpsMax < 0 || c.CatchUpsMax > mover.CatchUpsLimit:
		return bad("CatchUpsMax", c.CatchUpsMax, fmt.Sprintf("must be between 0 (the default) and %d", mover.CatchUpsLimit))
	case c.CatchUpHold < 0 || c.CatchUpHold > time.Minute:
		return bad("CatchUpHold", c.CatchUpHold, "must be between 0 (the default) and 1m")
	}
	return nil
}

// withDefaults returns c with its zero fields set to their defaults.
func (c PlacementConfig) withDefaults() PlacementConfig {
	mc := mover.DefaultConfig()
	if c.DeadNodeTimeout == 0 {
		c.DeadNodeTimeout = DefaultDeadNodeTimeout
	}
	if c.MovesMax == 0 {
		c.MovesMax = DefaultMovesMax
	}
	if c.CatchUpsMax == 0 {
		c.CatchUpsMax = mc.CatchUpsMax
	}
	if c.CatchUpHold == 0 {
		c.CatchUpHold = mc.HoldFor
	}
	if c.SnapshotBytesPerSecond == 0 {
		c.SnapshotBytesPerSecond = transport.DefaultSnapshotBytesPerSecond
	}
	return c
}

// replacementAfter returns how long a node must be dead before its
// replicas are rebuilt elsewhere, and false when replacement is off.
func (c PlacementConfig) replacementAfter() (time.Duration, bool) {
	d := c.withDefaults().DeadNodeTimeout
	return d, d > 0
}

// moverConfig returns the partition leaders' mover settings.
func (c Config) moverConfig() mover.Config {
	pc := c.Placement.withDefaults()
	mc := mover.DefaultConfig()
	mc.CatchUpsMax, mc.HoldFor = pc.CatchUpsMax, pc.CatchUpHold
	return mc
}
