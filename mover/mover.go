package mover

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Group is one partition's raft group as its leader drives it
// (partition.Partition implements it).
type Group interface {
	Progress() (raft.ReplicationProgress, error)
	AddLearner(id, addr string, prevIndex uint64) error
	Promote(id, addr string, prevIndex uint64) error
	RemoveServer(id string, prevIndex uint64) error
	TransferLeadership(id, addr string) error
	// WakeFollower ends the quiescence of the replica on node id, so that
	// it answers heartbeats again (Progress then shows what it says of
	// its abstaining); it reports whether the leader replicates to it.
	WakeFollower(id string) bool
}

// Placement is what the catalog asks of one group.
type Placement struct {
	// GroupID names the group (the mover's state is kept per group).
	GroupID string
	// Self is the leader's node id.
	Self string
	// Replicas are the placed replicas; Joining those not recorded as
	// caught up; Leaving the nodes a move takes the group away from.
	Replicas, Joining, Leaving []string
	// Addrs holds the raft address of every placed node.
	Addrs map[string]string
}

// Cluster is what the mover asks of the rest of the cluster.
type Cluster interface {
	// Alive reports whether a node is up (membership's view).
	Alive(id string) bool
}

// Action is what one Step did.
type Action int

// Actions. Settled: the group matches its placement and nothing is left
// to record. Waiting: a replica is catching up, or a change waits for a
// slot or for a safe moment. The others made one change, or ask the
// caller to record one (CaughtUp, Left).
const (
	Settled Action = iota
	Waiting
	AddedLearner
	Promoted
	RemovedToRejoin
	Removed
	HandedOver
	// CaughtUp asks the caller to record that Step's Node caught up.
	CaughtUp
	// Left asks the caller to record that Step's Node left the group.
	Left
	// AwaitingVote: Step's Node is recorded caught up but its answers
	// still say it abstains; it was woken, and the caller steps the
	// group again soon (its node applies the record within moments).
	AwaitingVote
)

var actionNames = [...]string{"settled", "waiting", "added-learner", "promoted", "removed-to-rejoin", "removed", "handed-over", "caught-up", "left",
	"awaiting-vote"}

// String names the action.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Step is the outcome of one call: the action and the node it concerns.
type Step struct {
	Action Action
	Node   string
}

// Config holds the mover's limits. DefaultConfig gives working values.
type Config struct {
	// HoldFor is how long a learner must stay caught up before it is
	// promoted.
	HoldFor time.Duration
	// LagMax is how many entries behind the leader's last index a learner
	// may be and still count as caught up (entries appended while it was
	// checked).
	LagMax uint64
	// CatchUpsMax bounds the replicas catching up at once in groups this
	// node leads.
	CatchUpsMax int
	// Idle is how long a group's state is kept without a Step (after
	// leadership moved away); its catch-up slots are then freed.
	Idle time.Duration
	// Now is the clock (tests set it). Nil: time.Now.
	Now func() time.Time
}

// DefaultConfig returns the defaults: hold 1 s, lag 64 entries, 32
// catch-ups at once, forget a group after 30 s without a step.
func DefaultConfig() Config {
	return Config{HoldFor: time.Second, LagMax: 64, CatchUpsMax: 32, Idle: 30 * time.Second}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.HoldFor < 0:
		return fmt.Errorf("%w: HoldFor %v: must not be negative", ErrInvalidConfig, c.HoldFor)
	case c.CatchUpsMax < 1 || c.CatchUpsMax > CatchUpsLimit:
		return fmt.Errorf("%w: CatchUpsMax %d: must be 1..%d", ErrInvalidConfig, c.CatchUpsMax, CatchUpsLimit)
	case c.Idle <= 0:
		return fmt.Errorf("%w: Idle %v: must be positive", ErrInvalidConfig, c.Idle)
	}
	return nil
}

// CatchUpsLimit is the largest CatchUpsMax.
const CatchUpsLimit = 4096

// Errors.
var (
	// ErrInvalidConfig is returned by New for a bad Config.
	ErrInvalidConfig = errors.New("invalid mover config")
	// ErrNoAddress is returned when a placed node's raft address is
	// unknown (not registered yet).
	ErrNoAddress = errors.New("no raft address for a placed node")
)

// Mover drives the groups one node leads. It is safe for concurrent use;
// Steps of one group must not run concurrently (the caller's passes are
// serial).
type Mover struct {
	cfg Config
	mu  sync.Mutex
	// groups holds per-group state, reset when the leader's term changes.
	groups map[string]*groupState
}

type groupState struct {
	term    uint64
	touched time.Time
	joins   map[string]*joinState
}

// joinState tracks one replica catching up under this leader and term.
type joinState struct {
	// target is the leader's last index when the replica was first seen
	// in the group: it must hold at least that much.
	target uint64
	// since is when it was first seen caught up in an unbroken series of
	// checks; zero while behind.
	since time.Time
	// promoted is set once this leader made it a voter.
	promoted bool
}

// New returns a Mover, or an error naming the bad field of cfg.
func New(cfg Config) (*Mover, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Mover{cfg: cfg, groups: map[string]*groupState{}}, nil
}

// CatchingUp returns how many replicas are catching up in groups led here.
func (m *Mover) CatchingUp() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.catchingUpLocked()
}

func (m *Mover) catchingUpLocked() int {
	n := 0
	now := m.cfg.Now()
	for id, g := range m.groups {
		if now.Sub(g.touched) > m.cfg.Idle {
			delete(m.groups, id)
			continue
		}
		for _, j := range g.joins {
			if !j.promoted {
				n++
			}
		}
	}
	return n
}

// Forget drops a group's state (its leadership ended or it was removed).
func (m *Mover) Forget(group string) {
	m.mu.Lock()
	delete(m.groups, group)
	m.mu.Unlock()
}

// state returns the group's state for term, fresh when the term changed.
func (m *Mover) state(group string, term uint64) *groupState {
	g := m.groups[group]
	if g == nil || g.term != term {
		g = &groupState{term: term, joins: map[string]*joinState{}}
		m.groups[group] = g
	}
	g.touched = m.cfg.Now()
	return g
}

// Step takes the group one step toward the placement (see the package
// comment) and says what it did. An error leaves the step to be tried
// again; raft.ErrNotLeader-like errors come from the Group as it maps
// them.
func (m *Mover) Step(g Group, pl Placement, c Cluster) (Step, error) {
	prog, err := g.Progress()
	if err != nil {
		return Step{Action: Waiting}, err
	}
	servers := make(map[string]raft.ServerProgress, len(prog.Servers))
	for _, s := range prog.Servers {
		servers[string(s.ID)] = s
	}
	if joining := mustJoin(pl, servers); len(joining) > 0 {
		m.mu.Lock()
		st := m.state(pl.GroupID, prog.Term)
		m.mu.Unlock()
		return m.stepJoins(g, pl, c, prog, servers, st, joining)
	}
	m.Forget(pl.GroupID)
	return stepLeaves(g, pl, c, prog, servers)
}

// mustJoin lists the placed replicas that are not settled voters: those
// the catalog lists as joining, and any placed replica the group lacks
// or holds as a non-voter.
func mustJoin(pl Placement, servers map[string]raft.ServerProgress) []string {
	out := slices.Clone(pl.Joining)
	for _, id := range pl.Replicas {
		s, in := servers[id]
		if (!in || s.Suffrage != raft.Voter) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
