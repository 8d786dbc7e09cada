package partition

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/raftutil"
	"github.com/ferrymq/ferry/wal"
	"github.com/ferrymq/ferry/wal/raftlog"
	"github.com/hashicorp/raft"
)

// Config describes one partition replica.
type Config struct {
	// GroupID names the raft group (printable ASCII, no spaces).
	GroupID string
	// NodeID is this node's raft server id.
	NodeID string
	// Dir is the replica's own directory: its snapshots, and its body
	// records (payloads in no local entry, a wal.Log in Dir/wal). The raft
	// log is not there unless Logs is nil.
	Dir string
	// Logs is the node's shared raft log store; the replica's entries, term
	// and vote go to its group GroupID there, and the payloads with them.
	// Nil makes the replica open a store of its own in Dir/log (tests,
	// single replicas).
	Logs *raftlog.Store
	// WALFiles bounds the open segment files of the replica's body records
	// together with every other wal.Log given the same cache, and closes
	// them while the replica is idle (wal.FileCache). Nil means the
	// process's shared cache (SharedWALFiles), which every replica of every
	// node in the process then uses.
	WALFiles *wal.FileCache
	// Transport carries the group's raft traffic.
	Transport raft.Transport
	// Liveness, when set, tells the group whether a peer node is up (the
	// node's shared raft transport probes its peers); with QuiesceAfter it
	// lets an idle group quiesce. Nil: the group never quiesces.
	Liveness raft.Liveness
	// Campaigns, when set, bounds how many replicas of the node campaign
	// at once (one value per node, shared by its replicas). Nil: no bound.
	Campaigns *Campaigns
	// LeaderChanges, when set, counts the changes of leader the replica
	// observes (one counter per node, shared by its replicas), so that a
	// node can tell whether any replica's leader changed without asking
	// each of thousands. Nil: not counted.
	LeaderChanges *atomic.Uint64
	// QuiesceAfter is how long a leader's log must go without a new entry
	// before it stops heartbeating the followers that have everything (see
	// raft.Config.QuiesceAfter in third_party/raft). Zero: never.
	QuiesceAfter time.Duration
	// Peers is the initial voter set (including this node) used to bootstrap
	// a group that has no state yet. Every replica must pass the same list.
	Peers []raft.Server
	// Abstain starts the replica abstaining from elections (see
	// raft.Config.Abstain in third_party/raft): a joining replica, new or
	// on a node that lost its data, until the catalog records it caught
	// up (SetAbstain).
	Abstain bool
	// Queue is the queue config the FSM starts with (raft replays the
	// replicated one over it).
	Queue fsm.QueueConfig

	// HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout and
	// CommitTimeout are raft's timings.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// MaxAppendEntries bounds how many proposals one disk write and one
	// replication round carry (group commit). With entries of at most
	// ProposalBytesMax (merged sends) it also bounds the entry data a
	// leader loads to catch up a lagging follower: 64 x 1 MiB. Concurrent
	// sends are merged into few entries, so a larger count buys nothing.
	MaxAppendEntries int
	// SnapshotThreshold is how many log entries trigger a snapshot;
	// TrailingLogs how many entries stay after one, so that a lagging
	// follower catches up from the log rather than by snapshot install.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// ApplyTimeout bounds how long a proposal waits to be handed to raft.
	ApplyTimeout time.Duration
	// GatherWait is how long a merged proposal waits for the next of the
	// requests still expected: as many as the previous proposal answered
	// plus those that queued during it (clients that were just answered
	// usually send again at once). Gathering goes on while they keep
	// coming, at most four GatherWaits in all, and ends early once they
	// are queued or the proposal is full, so a lone synchronous client
	// never waits; it keeps concurrent synchronous clients in one proposal
	// per round instead of cohorts taking alternate rounds. Zero: no
	// waiting. At most GatherWaitMax.
	GatherWait time.Duration
	// OverlapItemsMin is how many items (sends or acks) must wait, with a
	// merged proposal of their kind in flight, for a second one to start
	// before the first is answered (or a quarter of ProposalBytesMax in
	// bytes): the leader then writes the second while the followers store
	// the first. Below it proposals go one at a time, which is best for
	// short queues on shared disks (see ProposalsInFlightMax). Zero: one
	// at a time always.
	OverlapItemsMin int
	// TickIntervalMax is how long a leader waits before it tries a tick
	// again after one failed. Ticks are otherwise proposed only when the
	// FSM's next deadline comes (see tickTimer): a follower, or a leader
	// with nothing pending, proposes none.
	TickIntervalMax time.Duration
	// CompactInterval is how often every replica copies payloads out of
	// old entries and compacts its body records, run by the process's
	// shared scheduler (to within its 250 ms sweep).
	CompactInterval time.Duration

	// DiskReserveBytes is the free space below which the leader refuses
	// sends with ErrDiskFull (receives and acks go on). Zero means
	// DefaultDiskReserveBytes.
	DiskReserveBytes uint64

	// Now is the clock stamped into commands; nil means time.Now.
	Now func() time.Time
	// MaxClockStep bounds how far one command may move the partition's
	// clock forward (fsm.FSM.SetMaxClockStep); 0: no bound. Every replica
	// of a group must use the same value.
	MaxClockStep time.Duration
	// ClockVerified reports whether this node's clock was checked against
	// the other nodes', and found within bounds, after since. A leader
	// whose clock is more than MaxClockStep ahead of the partition's (after
	// the partition was leaderless for a while) moves the partition's
	// clock only once it returns true. Nil means always true.
	ClockVerified func(since time.Time) bool
	// ClockHealthy reports whether this node's clock may stamp commands
	// (it is not known to be off the other nodes' by more than the node's
	// bound); while it returns false, Propose refuses with
	// ErrClockUnverified. Nil means always true.
	ClockHealthy func() bool
	Logger       *slog.Logger
}

// DefaultGatherWait is Config.GatherWait in DefaultConfig: about one
// client's turnaround on loopback with TLS (answer written, next request
// read and decoded), a fraction of a raft round. Gathering ends 250 us
// after the last expected request came, or after 1 ms in all.
const DefaultGatherWait = 250 * time.Microsecond

// GatherWaitMax bounds Config.GatherWait.
const GatherWaitMax = 10 * time.Millisecond

// DefaultOverlapItemsMin is Config.OverlapItemsMin in DefaultConfig:
// fsm.BatchMax, so that a second proposal starts while one is in flight
// only once a whole proposal's worth of items (or a quarter of
// ProposalBytesMax) waits. Overlap was built so that the leader wrote one
// proposal while the followers stored the other; since the leader writes
// its log beside replication (raft's ReplicateBeforeStore), one proposal
// already overlaps those writes, and a second in flight mostly split the
// waiting requests into smaller proposals, each a raft round with an
// fdatasync on every replica, on machines where the CPU bounds the rounds.
// Interleaved runs on the 2-core test machine (three nodes, one disk,
// TLS; `FERRYD_ARGS=-proposal-overlap-items=N STAGES=1
// scripts/cpu-per-message.sh`), 16 (the previous default) against 1000,
// three of each: per 200,000 messages the leader wrote its log
// 3,162-3,386 times against 2,168-2,278 with 4 x 64 pipelined sends
// (41,964/35,881/42,422 msgs/s against 41,338/43,696/38,840; CPU per
// message of the nodes and the client 39/44/37 us against 36/34/38), and
// 2,332-2,395 against 1,363-1,452 with the async Publisher at 4 x 64
// (49,602/47,445/47,803 against 53,164/49,224/58,842 msgs/s; 34/32/32
// against 28/30/24 us); 64 synchronous clients 2,101-2,125 writes per
// 40,000 messages against 1,512-1,539 (13,024-14,471 against
// 13,068-14,954 msgs/s). Sixteen synchronous clients rarely reach either
// threshold, and 64 KiB messages ran as fast with overlap as without
// (1,118-1,412 msgs/s). On a machine with spare cores and a slow disk per
// node a lower value may keep more rounds in flight.
const DefaultOverlapItemsMin = fsm.BatchMax

// DefaultLeaderLeaseTimeout is how long a leader goes without answers from
// a quorum before it steps down: the HeartbeatTimeout, the most raft
// allows. Reads never rely on it (they verify leadership with a round of
// real answers), so a longer lease costs only a later step-down of a cut-off
// leader; a shorter one stepped leaders down by the hundred when a node
// was busy electing the groups of a dead one, and fed that load.
const DefaultLeaderLeaseTimeout = 500 * time.Millisecond

// DefaultQuiesceAfter is how long an idle partition keeps heartbeating
// after its last entry: long enough that a queue in steady use (a send or
// a tick every few seconds) does not flap between states, short enough
// that thousands of idle queues cost nothing within seconds.
const DefaultQuiesceAfter = 2 * time.Second

// DefaultConfig returns production defaults for a replica of group on node.
// CommitTimeout is 1 s: it paces the empty AppendEntries an idle leader
// sends each follower to spread the commit index (raft's own 50 ms cost
// each idle group about 25 RPCs a second per follower, more than its
// heartbeats). Confirms do not wait for it: a send is confirmed once a
// majority stored its entry and the leader applied it. Only an idle
// follower's apply of the last entries waits for it, and no read is
// served from a follower (a new leader's first read waits for its term's
// barrier).
//
// Heartbeat and election timeouts of 500 ms bring a partition back within
// 2 s of its leader's crash (scripts/failover-check.sh: kill -9 of the
// leader until sends confirm again, 2.6-2.7 s at 1 s, 1.0-1.6 s at 500 ms);
// followers still get ten heartbeats (one per HeartbeatTimeout/10) per
// timeout, which is what keeps a loaded machine from starting needless
// elections.
func DefaultConfig(groupID, nodeID, dir string) Config {
	return Config{
		GroupID: groupID, NodeID: nodeID, Dir: dir,
		Queue:              fsm.DefaultQueueConfig(),
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: DefaultLeaderLeaseTimeout,
		CommitTimeout:      time.Second,
		QuiesceAfter:       DefaultQuiesceAfter,
		MaxAppendEntries:   64,
		SnapshotThreshold:  8192,
		TrailingLogs:       10240,
		SnapshotInterval:   120 * time.Second,
		ApplyTimeout:       5 * time.Second,
		GatherWait:         DefaultGatherWait,
		OverlapItemsMin:    DefaultOverlapItemsMin,
		TickIntervalMax:    250 * time.Millisecond,
		CompactInterval:    10 * time.Second,
		MaxClockStep:       DefaultMaxClockStep,
	}
}

// Validate reports the first bad field, naming it.
func (c Config) Validate() error {
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("%w: Config.%s = %v: %s", ErrInvalidConfig, field, v, rule)
	}
	switch {
	case c.GroupID == "":
		return bad("GroupID", `""`, "required")
	case c.NodeID == "":
		return bad("NodeID", `""`, "required")
	case c.Dir == "":
		return bad("Dir", `""`, "required")
	case c.Transport == nil:
		return bad("Transport", nil, "required")
	case c.HeartbeatTimeout < 5*time.Millisecond:
		return bad("HeartbeatTimeout", c.HeartbeatTimeout, "must be at least 5ms")
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return bad("ElectionTimeout", c.ElectionTimeout, "must be at least HeartbeatTimeout")
	case c.LeaderLeaseTimeout <= 0 || c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return bad("LeaderLeaseTimeout", c.LeaderLeaseTimeout, "must be positive and at most HeartbeatTimeout")
	case c.CommitTimeout <= 0:
		return bad("CommitTimeout", c.CommitTimeout, "must be positive")
	case c.QuiesceAfter < 0:
		return bad("QuiesceAfter", c.QuiesceAfter, "must not be negative")
	case c.MaxAppendEntries < 1 || c.MaxAppendEntries > 1024:
		return bad("MaxAppendEntries", c.MaxAppendEntries, "must be between 1 and 1024")
	case c.SnapshotThreshold < 1:
		return bad("SnapshotThreshold", c.SnapshotThreshold, "must be positive")
	case c.SnapshotInterval < 5*time.Millisecond:
		return bad("SnapshotInterval", c.SnapshotInterval, "must be at least 5ms")
	case c.ApplyTimeout <= 0:
		return bad("ApplyTimeout", c.ApplyTimeout, "must be positive")
	case c.GatherWait < 0 || c.GatherWait > GatherWaitMax:
		return bad("GatherWait", c.GatherWait, fmt.Sprintf("must be between 0 and %v", GatherWaitMax))
	case c.OverlapItemsMin < 0 || c.OverlapItemsMin > fsm.BatchMax:
		return bad("OverlapItemsMin", c.OverlapItemsMin, fmt.Sprintf("must be between 0 and %d", fsm.BatchMax))
	case c.MaxClockStep < 0:
		return bad("MaxClockStep", c.MaxClockStep, "must not be negative")
	case c.TickIntervalMax <= 0:
		return bad("TickIntervalMax", c.TickIntervalMax, "must be positive")
	case c.CompactInterval <= 0:
		return bad("CompactInterval", c.CompactInterval, "must be positive")
	}
	if err := c.Queue.Validate(); err != nil {
		return fmt.Errorf("%w: Config.Queue: %w", ErrInvalidConfig, err)
	}
	return nil
}

func (c Config) raftConfig(logger *slog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	if c.Liveness != nil {
		rc.Liveness, rc.QuiesceAfter = c.Liveness, c.QuiesceAfter
	}
	if c.Campaigns != nil {
		rc.Campaigns = c.Campaigns
		rc.CampaignSeed = campaignSeed(c.GroupID)
	}
	rc.MaxAppendEntries = c.MaxAppendEntries
	rc.BatchApplyCh = true
	rc.NoLegacyTelemetry = true // per-peer series come labelled; the old per-name ones would be dropped
	rc.NoLogAgeGauge = true     // not exported (node/raftmetrics.go): a goroutine and a timer per leader for nothing
	// The leader sends new entries while it writes them (boundedLogCache
	// stages them), so a synchronous send waits for one fdatasync and a
	// round trip instead of two fdatasyncs in a row (FORK.md). It was
	// off while the node package's move tests stalled with it on: a
	// learner answering its own promotion before the leader's write
	// returned was not counted, and with another voter down the
	// promotion never committed in an idle group (fixed in the fork).
	rc.ReplicateBeforeStore = true
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	rc.SnapshotInterval = c.SnapshotInterval
	rc.Logger = raftutil.RaftLogger(logger)
	rc.Abstain = c.Abstain
	return rc
}

// campaignSeed is the group's raft.Config.CampaignSeed: a hash of its id,
// the same on every replica, so that after a node's loss the survivors
// share the first turn to campaign across their groups instead of one of
// them (the first in every group's configuration order) holding it for
// all.
func campaignSeed(groupID string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(groupID))
	return h.Sum64()
}
