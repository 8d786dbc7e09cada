package mover

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fakeGroup is a raft group as its leader sees it, changed only through
// the Group methods, each of which checks prevIndex as raft does.
type fakeGroup struct {
	self    string
	term    uint64
	last    uint64
	cfgIdx  uint64
	servers []raft.ServerProgress
	changes int
	// failNext fails the next change with this error.
	failNext error
	// votesAfter holds, for a learner recorded caught up, how many more
	// wakes it answers as abstaining before its node applies the record;
	// wakes counts the wakes of each server.
	votesAfter map[string]int
	wakes      map[string]int
}

var errStaleConfig = errors.New("configuration changed since prevIndex")

func newFakeGroup(self string, voters ...string) *fakeGroup {
	g := &fakeGroup{self: self, term: 2, last: 100, cfgIdx: 1, votesAfter: map[string]int{}, wakes: map[string]int{}}
	for _, id := range voters {
		g.servers = append(g.servers, raft.ServerProgress{ID: raft.ServerID(id), Suffrage: raft.Voter, Match: 100, Abstain: raft.Votes})
	}
	return g
}

func (g *fakeGroup) Progress() (raft.ReplicationProgress, error) {
	return raft.ReplicationProgress{Term: g.term, CommitIndex: g.last, LastIndex: g.last, ConfigurationIndex: g.cfgIdx,
		Servers: slices.Clone(g.servers)}, nil
}

func (g *fakeGroup) change(prev uint64, fn func()) error {
	if g.failNext != nil {
		err := g.failNext
		g.failNext = nil
		return err
	}
	if prev != g.cfgIdx {
		return errStaleConfig
	}
	fn()
	g.last++
	g.cfgIdx = g.last
	g.changes++
	return nil
}

func (g *fakeGroup) AddLearner(id, _ string, prev uint64) error {
	return g.change(prev, func() {
		g.servers = append(g.servers, raft.ServerProgress{ID: raft.ServerID(id), Suffrage: raft.Nonvoter, Abstain: raft.Abstains})
	})
}

var errPromotedAbstaining = errors.New("promoted a learner that abstains")

func (g *fakeGroup) Promote(id, _ string, prev uint64) error {
	if s := g.server(id); s == nil || s.Abstain != raft.Votes {
		return errPromotedAbstaining
	}
	return g.change(prev, func() { g.server(id).Suffrage = raft.Voter })
}

// WakeFollower has the server answer: as voting once its node applied
// the caught-up record (see votesAfter), as abstaining before.
func (g *fakeGroup) WakeFollower(id string) bool {
	s := g.server(id)
	if s == nil {
		return false
	}
	g.wakes[id]++
	if n, recorded := g.votesAfter[id]; recorded {
		if n == 0 {
			s.Abstain = raft.Votes
		} else {
			g.votesAfter[id] = n - 1
		}
	}
	return true
}

func (g *fakeGroup) RemoveServer(id string, prev uint64) error {
	return g.change(prev, func() {
		g.servers = slices.DeleteFunc(g.servers, func(s raft.ServerProgress) bool { return string(s.ID) == id })
	})
}

func (g *fakeGroup) TransferLeadership(id, _ string) error {
	g.self = id
	return nil
}

func (g *fakeGroup) server(id string) *raft.ServerProgress {
	for i := range g.servers {
		if string(g.servers[i].ID) == id {
			return &g.servers[i]
		}
	}
	return nil
}

func (g *fakeGroup) voters() int {
	n := 0
	for _, s := range g.servers {
		if s.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// catchUp has every server acknowledge the whole log.
func (g *fakeGroup) catchUp() {
	for i := range g.servers {
		g.servers[i].Match = g.last
	}
}

type cluster map[string]bool // down nodes

func (c cluster) Alive(id string) bool { return !c[id] }

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newMover(t *testing.T, catchUps int) (*Mover, *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1000, 0)}
	cfg := DefaultConfig()
	cfg.CatchUpsMax, cfg.Now = catchUps, c.now
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

func addrs(ids ...string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		out[id] = id + ":7000"
	}
	return out
}

// run steps the group until it settles, applying the records the mover
// asks for to the placement as the catalog would, advancing the clock
// and letting learners catch up; check runs after every step.
func run(t *testing.T, m *Mover, c *clock, g *fakeGroup, pl *Placement, down cluster, check func(Step)) []Action {
	t.Helper()
	var actions []Action
	for i := 0; i < 100; i++ {
		pl.Self = g.self
		step, err := m.Step(g, *pl, down)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if check != nil {
			check(step)
		}
		if (step.Action != Waiting && step.Action != AwaitingVote) || len(actions) == 0 || actions[len(actions)-1] != step.Action {
			actions = append(actions, step.Action)
		}
		switch step.Action {
		case Settled:
			return actions
		case CaughtUp:
			pl.Joining = slices.DeleteFunc(pl.Joining, func(id string) bool { return id == step.Node })
			if _, lags := g.votesAfter[step.Node]; !lags {
				g.votesAfter[step.Node] = 0
			}
		case Left:
			pl.Leaving = slices.DeleteFunc(pl.Leaving, func(id string) bool { return id == step.Node })
		case Waiting:
			g.catchUp()
			c.t = c.t.Add(400 * time.Millisecond)
		}
	}
	t.Fatalf("never settled: %v", actions)
	return nil
}

// A move adds the new replica as a learner, promotes it only after it has
// held the leader's log for HoldFor, has the catalog record it, and only
// then removes the leaving replica and has that recorded; the group never
// has fewer than two voters, and every change is one at a time.
func TestMover_MoveIsLearnerFirst(t *testing.T) {
	m, c := newMover(t, 4)
	g := newFakeGroup("a", "a", "b", "c")
	pl := &Placement{GroupID: "q1-0", Replicas: []string{"a", "b", "d"}, Joining: []string{"d"}, Leaving: []string{"c"}, Addrs: addrs("a", "b", "c", "d")}
	var promotedAt time.Time
	addedAt := c.t
	actions := run(t, m, c, g, pl, cluster{}, func(s Step) {
		if g.voters() < 2 {
			t.Fatalf("after %v: %d voters", s, g.voters())
		}
		if s.Action == Promoted {
			promotedAt = c.t
		}
	})
	want := []Action{AddedLearner, Waiting, CaughtUp, AwaitingVote, Promoted, Removed, Left, Settled}
	if !slices.Equal(actions, want) {
		t.Fatalf("actions %v, want %v", actions, want)
	}
	if promotedAt.Sub(addedAt) < time.Second {
		t.Fatalf("promoted %v after being added: HoldFor is 1 s", promotedAt.Sub(addedAt))
	}
	if g.server("c") != nil || g.server("d").Suffrage != raft.Voter || g.changes != 3 {
		t.Fatalf("group %+v after %d changes", g.servers, g.changes)
	}
	if m.CatchingUp() != 0 {
		t.Fatalf("%d catch-ups left after settling", m.CatchingUp())
	}
}

// A learner that falls behind is not promoted: the hold restarts.
func TestMover_LearnerBehindIsNotPromoted(t *testing.T) {
	m, c := newMover(t, 4)
	g := newFakeGroup("a", "a", "b")
	pl := Placement{GroupID: "g", Self: "a", Replicas: []string{"a", "b", "d"}, Joining: []string{"d"}, Addrs: addrs("a", "b", "d")}
	if s, err := m.Step(g, pl, cluster{}); err != nil || s.Action != AddedLearner {
		t.Fatalf("%v %v", s, err)
	}
	for range 10 {
		g.server("d").Match = g.last - 65 // past LagMax
		c.t = c.t.Add(time.Second)
		if s, _ := m.Step(g, pl, cluster{}); s.Action != Waiting {
			t.Fatalf("a learner 65 entries behind: %v", s)
		}
	}
	g.catchUp()
	if s, _ := m.Step(g, pl, cluster{}); s.Action != Waiting {
		t.Fatalf("reported caught up on the first caught-up check: %v", s)
	}
	c.t = c.t.Add(time.Second)
	if s, _ := m.Step(g, pl, cluster{}); s.Action != CaughtUp {
		t.Fatalf("not reported caught up after holding for 1 s: %v", s)
	}
	if g.server("d").Suffrage != raft.Nonvoter {
		t.Fatal("promoted before the catalog recorded it caught up")
	}
	pl.Joining = nil
	g.votesAfter["d"] = 0 // its node applied the record
	if s, _ := m.Step(g, pl, cluster{}); s.Action != AwaitingVote || s.Node != "d" || g.server("d").Suffrage != raft.Nonvoter || g.wakes["d"] != 1 {
		t.Fatalf("promoted on an answer that said it abstains (%v, %d wakes)", s, g.wakes["d"])
	}
	if s, _ := m.Step(g, pl, cluster{}); s.Action != Promoted {
		t.Fatalf("not promoted once recorded and voting: %v", s)
	}
}

// A voter that lost its data (joining again) is removed and re-added as a
// learner, but only while the other voters can commit without it.
func TestMover_WipedVoterRejoinsAsALearner(t *testing.T) {
	m, c := newMover(t, 4)
	g := newFakeGroup("a", "a", "b", "c")
	pl := &Placement{GroupID: "g", Self: "a", Replicas: []string{"a", "b", "c"}, Joining: []string{"c"}, Addrs: addrs("a", "b", "c")}
	if s, _ := m.Step(g, *pl, cluster{"b": true}); s.Action != Waiting || g.changes != 0 {
		t.Fatalf("with b down: %v, %d changes", s, g.changes)
	}
	actions := run(t, m, c, g, pl, cluster{}, nil)
	want := []Action{RemovedToRejoin, AddedLearner, Waiting, CaughtUp, AwaitingVote, Promoted, Settled}
	if !slices.Equal(actions, want) {
		t.Fatalf("actions %v, want %v", actions, want)
	}
}

// A leaving leader hands leadership to an up, placed voter; the new
// leader removes it.
func TestMover_LeavingLeaderHandsOverFirst(t *testing.T) {
	m, c := newMover(t, 4)
	g := newFakeGroup("a", "a", "b", "c")
	pl := &Placement{GroupID: "g", Replicas: []string{"b", "c", "d"}, Joining: []string{"d"}, Leaving: []string{"a"}, Addrs: addrs("a", "b", "c", "d")}
	actions := run(t, m, c, g, pl, cluster{"b": true}, nil)
	want := []Action{AddedLearner, Waiting, CaughtUp, AwaitingVote, Promoted, HandedOver, Removed, Left, Settled}
	if !slices.Equal(actions, want) {
		t.Fatalf("actions %v, want %v", actions, want)
	}
	if g.self != "c" {
		t.Fatalf("handed to %s; b is down, c is the first up voter", g.self)
	}
}

// Catch-ups are bounded across the groups a node leads; a slot frees when
// its replica is recorded caught up.
func TestMover_CatchUpsAreBounded(t *testing.T) {
	m, c := newMover(t, 1)
	g1, g2 := newFakeGroup("a", "a", "b"), newFakeGroup("a", "a", "b")
	pl1 := &Placement{GroupID: "g1", Self: "a", Replicas: []string{"a", "b", "d"}, Joining: []string{"d"}, Addrs: addrs("a", "b", "d")}
	pl2 := &Placement{GroupID: "g2", Self: "a", Replicas: []string{"a", "b", "e"}, Joining: []string{"e"}, Addrs: addrs("a", "b", "e")}
	if s, _ := m.Step(g1, *pl1, cluster{}); s.Action != AddedLearner {
		t.Fatal(s)
	}
	if s, _ := m.Step(g2, *pl2, cluster{}); s.Action != Waiting || g2.changes != 0 {
		t.Fatalf("second catch-up with one slot: %v", s)
	}
	run(t, m, c, g1, pl1, cluster{}, nil)
	if s, _ := m.Step(g2, *pl2, cluster{}); s.Action != AddedLearner {
		t.Fatalf("after the first settled: %v", s)
	}
}

// A change decided from a configuration that changed since fails, frees
// its slot, and the next step decides again.
func TestMover_StaleConfigurationChangeIsRetried(t *testing.T) {
	m, c := newMover(t, 1)
	g := newFakeGroup("a", "a", "b")
	pl := &Placement{GroupID: "g", Self: "a", Replicas: []string{"a", "b", "d"}, Joining: []string{"d"}, Addrs: addrs("a", "b", "d")}
	g.failNext = errStaleConfig
	if _, err := m.Step(g, *pl, cluster{}); !errors.Is(err, errStaleConfig) {
		t.Fatalf("err %v", err)
	}
	if m.CatchingUp() != 0 {
		t.Fatal("a failed add kept its slot")
	}
	run(t, m, c, g, pl, cluster{}, nil)
}

// A new leader term forgets the old term's catch-up progress: a learner
// is held again from the new leader's log.
func TestMover_NewTermStartsOver(t *testing.T) {
	m, c := newMover(t, 4)
	g := newFakeGroup("a", "a", "b")
	pl := Placement{GroupID: "g", Self: "a", Replicas: []string{"a", "b", "d"}, Joining: []string{"d"}, Addrs: addrs("a", "b", "d")}
	m.Step(g, pl, cluster{})
	g.catchUp()
	m.Step(g, pl, cluster{})
	c.t = c.t.Add(900 * time.Millisecond)
	g.term++
	g.last += 10
	g.catchUp()
	m.Step(g, pl, cluster{})
	c.t = c.t.Add(200 * time.Millisecond)
	if s, _ := m.Step(g, pl, cluster{}); s.Action != Waiting {
		t.Fatalf("%v on the old term's hold", s)
	}
}

func TestMover_ConfigValidateNamesTheField(t *testing.T) {
	for field, edit := range map[string]func(*Config){
		"HoldFor":     func(c *Config) { c.HoldFor = -1 },
		"CatchUpsMax": func(c *Config) { c.CatchUpsMax = 0 },
		"Idle":        func(c *Config) { c.Idle = 0 },
	} {
		c := DefaultConfig()
		edit(&c)
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s: %v", field, err)
		}
	}
}

// A learner an earlier leader added and the catalog recorded caught up is
// checked again by the new leader and promoted.
func TestMover_RecordedLearnerIsPromotedByTheNextLeader(t *testing.T) {
	m, c := newMover(t, 4)
	g := newFakeGroup("b", "a", "b", "c")
	g.servers = append(g.servers, raft.ServerProgress{ID: "d", Suffrage: raft.Nonvoter})
	g.votesAfter["d"] = 0 // recorded: it votes once it answers this leader
	pl := &Placement{GroupID: "g", Replicas: []string{"b", "c", "d"}, Leaving: []string{"a"}, Addrs: addrs("a", "b", "c", "d")}
	actions := run(t, m, c, g, pl, cluster{"a": true}, nil)
	want := []Action{Waiting, AwaitingVote, Promoted, Removed, Left, Settled}
	if !slices.Equal(actions, want) {
		t.Fatalf("actions %v, want %v", actions, want)
	}
}

// A learner recorded caught up whose node has not applied the record yet
// still abstains: it is not promoted (a voter that cannot vote would
// leave the group unable to elect with one voter down) but woken, until
// its answers say it votes; then it is promoted and the move finishes.
func TestMover_LearnerStillAbstainingIsNotPromoted(t *testing.T) {
	m, c := newMover(t, 4)
	g := newFakeGroup("a", "a", "b", "c")
	g.votesAfter["d"] = 3 // its node applies the record after three wakes
	pl := &Placement{GroupID: "q1-0", Replicas: []string{"a", "b", "d"}, Joining: []string{"d"}, Leaving: []string{"c"}, Addrs: addrs("a", "b", "c", "d")}
	actions := run(t, m, c, g, pl, cluster{}, func(s Step) {
		if s.Action == Promoted && g.wakes["d"] < 4 {
			t.Fatalf("promoted after %d wakes: it abstained until the fourth", g.wakes["d"])
		}
	})
	want := []Action{AddedLearner, Waiting, CaughtUp, AwaitingVote, Promoted, Removed, Left, Settled}
	if !slices.Equal(actions, want) {
		t.Fatalf("actions %v, want %v", actions, want)
	}
	if g.server("d").Suffrage != raft.Voter || g.server("c") != nil {
		t.Fatalf("group %+v", g.servers)
	}
}
