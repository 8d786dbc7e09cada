package node

import (
	"fmt"
	"time"

	"github.com/ferrymq/ferry/mover"
)

// PlacementConfig holds how the cluster changes shape: replica moves,
// dead-node replacement and balancing (see docs/operations.md, "Changing
// the cluster's shape").
type PlacementConfig struct {
	// DeadNodeTimeout is how long a node must be dead (gossip's view, as
	// the meta leader sees it) before its replicas are rebuilt on live
	// nodes. Zero turns replacement off; DefaultConfig sets
	// DefaultDeadNodeTimeout.
	DeadNodeTimeout time.Duration
	// MovesMax bounds the partitions moving at once in the whole cluster
	// (drains, replacements and balancing together). Zero takes
	// DefaultMovesMax.
	MovesMax int
	// CatchUpsMax bounds the replicas catching up at once in the groups
	// one node leads. Zero takes mover.DefaultConfig's.
	CatchUpsMax int
	// CatchUpHold is how long a new replica must stay caught up before it
	// votes. Zero takes mover.DefaultConfig's.
	CatchUpHold time.Duration
	// SnapshotBytesPerSecond bounds the bytes per second this node streams
	// snapshots at, to all peers together (transport.SharedConfig). Zero
	// takes transport's default; negative is unlimited.
	SnapshotBytesPerSecond int64
	// Balance lets the meta leader move replicas and preferred leaders
	// until their counts per node differ by at most one. DefaultConfig
	// sets it.
	Balance bool
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
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("%w: Config.Placement.%s = %v: %s", ErrInvalidConfig, field, v, rule)
	}
	switch {
	case c.DeadNodeTimeout < 0:
		return bad("DeadNodeTimeout", c.DeadNodeTimeout, "must not be negative (0 turns replacement off)")
	case c.MovesMax < 0 || c.MovesMax > MovesLimit:
		return bad("MovesMax", c.MovesMax, fmt.Sprintf("must be between 0 (the default) and %d", MovesLimit))
	case c.CatchUpsMax < 0 || c.CatchUpsMax > mover.CatchUpsLimit:
		return bad("CatchUpsMax", c.CatchUpsMax, fmt.Sprintf("must be between 0 (the default) and %d", mover.CatchUpsLimit))
	case c.CatchUpHold < 0 || c.CatchUpHold > time.Minute:
		return bad("CatchUpHold", c.CatchUpHold, "must be between 0 (the default) and 1m")
	}
	return nil
}

// movesMax returns MovesMax or its default.
func (c PlacementConfig) movesMax() int {
	if c.MovesMax == 0 {
		return DefaultMovesMax
	}
	return c.MovesMax
}

// moverConfig returns the partition leaders' mover settings.
func (c Config) moverConfig() mover.Config {
	mc := mover.DefaultConfig()
	if c.Placement.CatchUpsMax > 0 {
		mc.CatchUpsMax = c.Placement.CatchUpsMax
	}
	if c.Placement.CatchUpHold > 0 {
		mc.HoldFor = c.Placement.CatchUpHold
	}
	return mc
}
