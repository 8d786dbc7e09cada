package main

import (
	"flag"
	"time"

	"github.com/ferrymq/ferry/node"
)

// placementOptions tune how the cluster changes shape (node.PlacementConfig).
type placementOptions struct {
	deadNodeTimeout       time.Duration
	movesMax, catchUpsMax int
	snapshotRate          int64
	noBalance             bool
}

func (p *placementOptions) register(fs *flag.FlagSet) {
	fs.DurationVar(&p.deadNodeTimeout, "dead-node-timeout", node.DefaultDeadNodeTimeout,
		"rebuild the replicas of a node dead for this long on live nodes (0 or negative = never)")
	fs.IntVar(&p.movesMax, "moves-max", node.DefaultMovesMax, "most partitions moving at once in the cluster (drains, replacements, balancing)")
	fs.IntVar(&p.catchUpsMax, "catch-ups-max", 0, "most new replicas catching up at once in the partitions one node leads (0 = default 32)")
	fs.Int64Var(&p.snapshotRate, "snapshot-rate", 0, "bytes per second this node streams snapshots at, to all peers together (0 = default 64 MiB/s, negative = unlimited)")
	fs.BoolVar(&p.noBalance, "no-balance", false, "do not move replicas and leaders by themselves to even out their counts per node")
}

// apply sets cfg.Placement. -dead-node-timeout 0 means "never", as its
// help says: node.Config spells that with a negative timeout (its zero is
// the default), so apply passes 0 on as -1.
func (p placementOptions) apply(cfg *node.Config) {
	cfg.Placement.DeadNodeTimeout, cfg.Placement.MovesMax, cfg.Placement.CatchUpsMax = offWhenZero(p.deadNodeTimeout), p.movesMax, p.catchUpsMax
	cfg.Placement.SnapshotBytesPerSecond = p.snapshotRate
	cfg.Placement.NoBalance = p.noBalance
}
