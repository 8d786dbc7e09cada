package node

import (
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/mover"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/transport"
)

// bareConfig is a Config holding only what has no default: the node's
// identity, its addresses and Insecure.
func bareConfig(t *testing.T) Config {
	return Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:7001", ClientAddr: "127.0.0.1:7101",
		HTTPAddr: "127.0.0.1:7201", GossipAddr: "127.0.0.1:7301", Insecure: true}
}

// defaultedFields are the fields whose zero stands for a non-zero
// default: each zeroes one field of a DefaultConfig, reads it and gives
// the default it must have.
var defaultedFields = []struct {
	field string
	zero  func(*Config)
	get   func(Config) any
	want  any
}{
	{"ClusterName", func(c *Config) { c.ClusterName = "" }, func(c Config) any { return c.ClusterName }, DefaultClusterName},
	{"HeartbeatTimeout", func(c *Config) { c.HeartbeatTimeout = 0 }, func(c Config) any { return c.HeartbeatTimeout }, partitionDefaults.HeartbeatTimeout},
	{"ElectionTimeout", func(c *Config) { c.ElectionTimeout = 0 }, func(c Config) any { return c.ElectionTimeout }, partitionDefaults.ElectionTimeout},
	{"LeaderLeaseTimeout", func(c *Config) { c.LeaderLeaseTimeout = 0 }, func(c Config) any { return c.LeaderLeaseTimeout }, partition.DefaultLeaderLeaseTimeout},
	{"SnapshotThreshold", func(c *Config) { c.SnapshotThreshold = 0 }, func(c Config) any { return c.SnapshotThreshold }, partitionDefaults.SnapshotThreshold},
	{"TrailingLogs", func(c *Config) { c.TrailingLogs = 0 }, func(c Config) any { return c.TrailingLogs }, partitionDefaults.TrailingLogs},
	{"SnapshotInterval", func(c *Config) { c.SnapshotInterval = 0 }, func(c Config) any { return c.SnapshotInterval }, partitionDefaults.SnapshotInterval},
	{"QuiesceAfter", func(c *Config) { c.QuiesceAfter = 0 }, func(c Config) any { return c.QuiesceAfter }, partition.DefaultQuiesceAfter},
	{"ProposalGatherWait", func(c *Config) { c.ProposalGatherWait = 0 }, func(c Config) any { return c.ProposalGatherWait }, partition.DefaultGatherWait},
	{"ProposalOverlapItemsMin", func(c *Config) { c.ProposalOverlapItemsMin = 0 }, func(c Config) any { return c.ProposalOverlapItemsMin }, partition.DefaultOverlapItemsMin},
	{"ReconcileInterval", func(c *Config) { c.ReconcileInterval = 0 }, func(c Config) any { return c.ReconcileInterval }, DefaultReconcileInterval},
	{"Placement.DeadNodeTimeout", func(c *Config) { c.Placement.DeadNodeTimeout = 0 }, func(c Config) any { return c.Placement.DeadNodeTimeout }, DefaultDeadNodeTimeout},
	{"Placement.MovesMax", func(c *Config) { c.Placement.MovesMax = 0 }, func(c Config) any { return c.Placement.MovesMax }, DefaultMovesMax},
	{"Placement.CatchUpsMax", func(c *Config) { c.Placement.CatchUpsMax = 0 }, func(c Config) any { return c.Placement.CatchUpsMax }, mover.DefaultConfig().CatchUpsMax},
	{"Placement.CatchUpHold", func(c *Config) { c.Placement.CatchUpHold = 0 }, func(c Config) any { return c.Placement.CatchUpHold }, mover.DefaultConfig().HoldFor},
	{"Placement.SnapshotBytesPerSecond", func(c *Config) { c.Placement.SnapshotBytesPerSecond = 0 },
		func(c Config) any { return c.Placement.SnapshotBytesPerSecond }, int64(transport.DefaultSnapshotBytesPerSecond)},
	{"MaxQueues", func(c *Config) { c.MaxQueues = 0 }, func(c Config) any { return c.MaxQueues }, DefaultMaxQueues},
	{"MaxPartitions", func(c *Config) { c.MaxPartitions = 0 }, func(c Config) any { return c.MaxPartitions }, DefaultMaxPartitions},
	{"QueueCreateRate", func(c *Config) { c.QueueCreateRate = 0 }, func(c Config) any { return c.QueueCreateRate }, float64(DefaultQueueCreateRate)},
	{"QueueCreateBurst", func(c *Config) { c.QueueCreateBurst = 0 }, func(c Config) any { return c.QueueCreateBurst }, DefaultQueueCreateBurst},
	{"MaxConns", func(c *Config) { c.MaxConns = 0 }, func(c Config) any { return c.MaxConns }, DefaultMaxConns},
	{"MaxConnsPerIP", func(c *Config) { c.MaxConnsPerIP = 0 }, func(c Config) any { return c.MaxConnsPerIP }, DefaultMaxConnsPerIP},
	{"MaxHTTPConns", func(c *Config) { c.MaxHTTPConns = 0 }, func(c Config) any { return c.MaxHTTPConns }, DefaultMaxHTTPConns},
	{"MaxHTTPConnsPerIP", func(c *Config) { c.MaxHTTPConnsPerIP = 0 }, func(c Config) any { return c.MaxHTTPConnsPerIP }, DefaultMaxHTTPConnsPerIP},
	{"IdleTimeout", func(c *Config) { c.IdleTimeout = 0 }, func(c Config) any { return c.IdleTimeout }, DefaultIdleTimeout},
	{"FrameTimeout", func(c *Config) { c.FrameTimeout = 0 }, func(c Config) any { return c.FrameTimeout }, DefaultFrameTimeout},
	{"MaxClockOffset", func(c *Config) { c.MaxClockOffset = 0 }, func(c Config) any { return c.MaxClockOffset }, DefaultMaxClockOffset},
}

// partitionDefaults are the partition settings the node's raft fields
// default to.
var partitionDefaults = partition.DefaultConfig("g", "n1", "dir")

// zeroIsTheDefault are the fields whose zero value is their default as it
// is (no bootstrap, no seeds, LAN gossip timings, no profiler, no tokens or
// gossip keys, slog.Default(), features on), or that have no default.
var zeroIsTheDefault = map[string]bool{
	"ID": true, "DataDir": true, "RaftAddr": true, "ClientAddr": true, "HTTPAddr": true, "GossipAddr": true,
	"Join": true, "BootstrapExpect": true, "NoRaftLogPrewrite": true, "Placement.NoBalance": true, "GossipFast": true,
	"TLSCertFile": true, "TLSKeyFile": true, "TLSCAFile": true, "TLS": true, "Insecure": true, "Pprof": true,
	"Tokens": true, "GossipKeys": true, "Logger": true, "forgeProof": true,
}

// Every field of Config is either in defaultedFields or in
// zeroIsTheDefault, so a new field cannot skip the rule unnoticed.
func TestConfig_EveryFieldFollowsTheRuleForZero(t *testing.T) {
	listed := map[string]bool{}
	for _, f := range defaultedFields {
		listed[f.field] = true
	}
	var walk func(prefix string, ty reflect.Type)
	walk = func(prefix string, ty reflect.Type) {
		for i := range ty.NumField() {
			f := ty.Field(i)
			name := prefix + f.Name
			if f.Type == reflect.TypeFor[PlacementConfig]() {
				walk(name+".", f.Type)
				continue
			}
			if listed[name] == zeroIsTheDefault[name] {
				t.Errorf("Config.%s: list it in defaultedFields (zero takes a default) or zeroIsTheDefault, once", name)
			}
		}
	}
	walk("", reflect.TypeFor[Config]())
}

// A field left at zero takes its documented default: zeroing any one of
// DefaultConfig gives DefaultConfig back once the defaults are filled in,
// and a Config holding only identity and addresses fills in to
// DefaultConfig.
func TestConfig_ZeroTakesTheDefault(t *testing.T) {
	def := DefaultConfig("n1", t.TempDir(), "127.0.0.1", 0)
	def.Insecure = true
	for _, f := range defaultedFields {
		if got := f.get(def); got != f.want {
			t.Errorf("DefaultConfig().%s = %v, want %v", f.field, got, f.want)
		}
		c := def
		f.zero(&c)
		if reflect.DeepEqual(c, def) {
			t.Errorf("%s: its default is its zero value; move it to zeroIsTheDefault", f.field)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s = 0: %v", f.field, err)
		}
		if got := c.WithDefaults(); !reflect.DeepEqual(got, def) {
			t.Errorf("%s = 0 fills in to %v, want %v", f.field, f.get(got), f.want)
		}
	}
	bare := bareConfig(t)
	want := DefaultConfig("n1", bare.DataDir, "127.0.0.1", 0)
	want.Insecure = true
	if err := bare.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := bare.WithDefaults(); !reflect.DeepEqual(got, want) {
		t.Fatalf("identity and addresses only fill in to\n%+v\nwant DefaultConfig\n%+v", got, want)
	}
	if again := want.WithDefaults(); !reflect.DeepEqual(again, want) {
		t.Fatalf("WithDefaults of a filled config changed it:\n%+v", again)
	}
}

// Start runs a Config holding only identity and addresses with every
// tuning knob DefaultConfig has.
func TestConfig_StartFillsTheDefaults(t *testing.T) {
	cfg := bareConfig(t)
	cfg.RaftAddr, cfg.ClientAddr, cfg.HTTPAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", freePort(t)
	cfg.Logger = slog.New(slog.DiscardHandler)
	nd, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Close() })
	want := DefaultConfig(cfg.ID, cfg.DataDir, "127.0.0.1", 0)
	want.RaftAddr, want.ClientAddr, want.HTTPAddr, want.GossipAddr = cfg.RaftAddr, cfg.ClientAddr, cfg.HTTPAddr, cfg.GossipAddr
	want.Insecure, want.Logger = true, cfg.Logger
	if !reflect.DeepEqual(nd.cfg, want) {
		t.Fatalf("Start runs\n%+v\nwant DefaultConfig's\n%+v", nd.cfg, want)
	}
	if got := nd.cfg.partitionConfig(partition.DefaultConfig("g", "n1", t.TempDir())); got.GatherWait != partition.DefaultGatherWait ||
		got.OverlapItemsMin != partition.DefaultOverlapItemsMin || got.QuiesceAfter != partition.DefaultQuiesceAfter {
		t.Fatalf("partitions get gather wait %v, overlap %d, quiesce after %v: want the defaults",
			got.GatherWait, got.OverlapItemsMin, got.QuiesceAfter)
	}
	if !nd.cfg.logStoreConfig().PreallocateSegments {
		t.Fatal("pre-written raft log segments off by default")
	}
}

// Each feature that can be turned off is turned off by its explicit value
// (valid, and kept by WithDefaults), and is on at zero.
func TestConfig_OffValuesTurnFeaturesOff(t *testing.T) {
	pc := func(c Config) partition.Config { return c.partitionConfig(partition.DefaultConfig("g", "n1", "dir")) }
	for _, tc := range []struct {
		field string
		off   func(*Config)
		isOff func(Config) bool
	}{
		{"QuiesceAfter", func(c *Config) { c.QuiesceAfter = -1 }, func(c Config) bool { return pc(c).QuiesceAfter == 0 }},
		{"QuiesceAfter", func(c *Config) { c.QuiesceAfter = -time.Hour }, func(c Config) bool { return pc(c).QuiesceAfter == 0 }},
		{"ProposalGatherWait", func(c *Config) { c.ProposalGatherWait = -1 }, func(c Config) bool { return pc(c).GatherWait == 0 }},
		{"ProposalOverlapItemsMin", func(c *Config) { c.ProposalOverlapItemsMin = -1 }, func(c Config) bool { return pc(c).OverlapItemsMin == 0 }},
		{"NoRaftLogPrewrite", func(c *Config) { c.NoRaftLogPrewrite = true }, func(c Config) bool { return !c.logStoreConfig().PreallocateSegments }},
		{"Placement.DeadNodeTimeout", func(c *Config) { c.Placement.DeadNodeTimeout = -1 }, func(c Config) bool {
			_, on := c.Placement.replacementAfter()
			return !on
		}},
		{"Placement.NoBalance", func(c *Config) { c.Placement.NoBalance = true }, func(c Config) bool { return c.Placement.NoBalance }},
		{"Placement.SnapshotBytesPerSecond (unlimited)", func(c *Config) { c.Placement.SnapshotBytesPerSecond = -1 },
			func(c Config) bool { return c.Placement.SnapshotBytesPerSecond < 0 }},
	} {
		bare := bareConfig(t)
		if tc.isOff(bare.WithDefaults()) {
			t.Errorf("%s: off at zero, want on", tc.field)
		}
		tc.off(&bare)
		if err := bare.Validate(); err != nil {
			t.Errorf("%s off: %v", tc.field, err)
		}
		if !tc.isOff(bare) || !tc.isOff(bare.WithDefaults()) {
			t.Errorf("%s: the off value did not turn it off (or WithDefaults undid it)", tc.field)
		}
	}
}

// A value out of range is refused with an error naming its field.
func TestConfig_ValidateNamesTheBadField(t *testing.T) {
	for _, tc := range []struct {
		field  string
		mutate func(*Config)
	}{
		{"ID", func(c *Config) { c.ID = "" }},
		{"ID", func(c *Config) { c.ID = "-x" }},
		{"DataDir", func(c *Config) { c.DataDir = "" }},
		{"RaftAddr", func(c *Config) { c.RaftAddr = "0.0.0.0:7001" }},
		{"GossipAddr", func(c *Config) { c.GossipAddr = "node:7301" }},
		{"BootstrapExpect", func(c *Config) { c.BootstrapExpect = -1 }},
		{"BootstrapExpect", func(c *Config) { c.BootstrapExpect = 6 }},
		{"HeartbeatTimeout", func(c *Config) { c.HeartbeatTimeout = -time.Second }},
		{"HeartbeatTimeout", func(c *Config) { c.HeartbeatTimeout, c.LeaderLeaseTimeout = time.Millisecond, time.Millisecond }},
		{"ElectionTimeout", func(c *Config) { c.ElectionTimeout = -1 }},
		{"ElectionTimeout", func(c *Config) { c.HeartbeatTimeout, c.ElectionTimeout = 2*time.Second, 0 }},
		{"LeaderLeaseTimeout", func(c *Config) { c.LeaderLeaseTimeout = -1 }},
		{"LeaderLeaseTimeout", func(c *Config) { c.HeartbeatTimeout, c.LeaderLeaseTimeout = 100*time.Millisecond, 0 }},
		{"SnapshotInterval", func(c *Config) { c.SnapshotInterval = -1 }},
		{"SnapshotInterval", func(c *Config) { c.SnapshotInterval = time.Millisecond }},
		{"ProposalGatherWait", func(c *Config) { c.ProposalGatherWait = partition.GatherWaitMax + 1 }},
		{"ProposalOverlapItemsMin", func(c *Config) { c.ProposalOverlapItemsMin = fsm.BatchMax + 1 }},
		{"ReconcileInterval", func(c *Config) { c.ReconcileInterval = -time.Second }},
		{"MaxClockOffset", func(c *Config) { c.MaxClockOffset = -1 }},
		{"MaxClockOffset", func(c *Config) { c.MaxClockOffset = 2 * time.Hour }},
		{"Placement.MovesMax", func(c *Config) { c.Placement.MovesMax = -1 }},
		{"Placement.MovesMax", func(c *Config) { c.Placement.MovesMax = MovesLimit + 1 }},
		{"Placement.CatchUpsMax", func(c *Config) { c.Placement.CatchUpsMax = mover.CatchUpsLimit + 1 }},
		{"Placement.CatchUpHold", func(c *Config) { c.Placement.CatchUpHold = -1 }},
		{"Placement.CatchUpHold", func(c *Config) { c.Placement.CatchUpHold = 2 * time.Minute }},
		{"MaxQueues", func(c *Config) { c.MaxQueues = -1 }},
		{"MaxPartitions", func(c *Config) { c.MaxPartitions = -1 }},
		{"QueueCreateRate", func(c *Config) { c.QueueCreateRate = -1 }},
		{"QueueCreateBurst", func(c *Config) { c.QueueCreateBurst = -1 }},
		{"MaxConns", func(c *Config) { c.MaxConns = -1 }},
		{"MaxConnsPerIP", func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 10, 11 }},
		{"IdleTimeout", func(c *Config) { c.IdleTimeout = time.Millisecond }},
		{"FrameTimeout", func(c *Config) { c.FrameTimeout = -1 }},
	} {
		c := bareConfig(t)
		tc.mutate(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "node.Config."+tc.field+" = ") {
			t.Errorf("%s: %v, want an invalid config error naming node.Config.%s", tc.field, err, tc.field)
		}
	}
	c := bareConfig(t)
	c.GossipKeys = [][]byte{[]byte("short")}
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "node.Config.GossipKeys") {
		t.Errorf("a 5-byte gossip key: %v, want an invalid config error naming node.Config.GossipKeys", err)
	}
}
