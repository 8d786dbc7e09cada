package node

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
	"github.com/hashicorp/raft"
)

// leaderAnnounceInterval is how often the node gossips the groups it leads
// when they changed.
const leaderAnnounceInterval = 100 * time.Millisecond

// replicaSet is the partition replicas this node runs, kept in step with the
// catalog's assignments.
type replicaSet struct {
	n           *Node
	reconciling sync.Mutex // one reconcile at a time (loop and catalog handlers)
	mu          sync.Mutex
	running     map[string]*replica  // by group id
	starting    map[string]bool      // group ids being opened (claimed by one starter)
	stepping    map[string]bool      // group ids whose membership a pass is stepping (moves.go)
	lastPrefer  map[string]time.Time // last leadership hand-over asked, by group id
	// handovers holds a slot per leadership hand-over in progress: they
	// run beside reconcile, which must not wait for elections.
	handovers chan struct{}
	handing   sync.WaitGroup

	// campaigns bounds this node's replicas campaigning at once.
	campaigns *partition.Campaigns
	// leaderChanges counts the leader changes every replica observed
	// (partition.Config.LeaderChanges); announced is what the last leader
	// table was built at.
	leaderChanges atomic.Uint64
	announced     leaderTableStamp
	// announceCost is how long the last leader table took to build.
	announceCost time.Duration
	// announcedReports are the move reports the last table carried;
	// announcedOpening whether it said the node was still opening.
	announcedReports []moveReport
	announcedOpening bool
	// behind is the last behindNodes answer, found at behindAt (the
	// announcing loop's own).
	behind   []string
	behindAt time.Time
	// opened is set once a reconcile pass has opened every replica the
	// catalog assigns this node (leader tables say so: safe-to-stop
	// waits for it on the other replicas' nodes).
	opened atomic.Bool
	// pass is what the last reconcile saw (reconcilepass.go).
	pass reconcilePass
	// catalog is this node's share of the catalog at the meta group's
	// last applied index (catalogview.go).
	catalog catalogView

	// afterCatalogRead, when set (tests only), runs in reconcile right
	// after it read the catalog.
	afterCatalogRead func()
	// applyLagOf, when set (tests only), stands in for a replica's
	// Partition.ApplyLag when reconcile decides whether it may vote.
	applyLagOf atomic.Pointer[func(*partition.Partition) uint64]
}

// handoversMax bounds the leadership hand-overs a node runs at once.
const handoversMax = 16

// preferInterval spaces out leadership hand-overs of one partition.
const preferInterval = 30 * time.Second

// replica is one running partition replica. It is never changed once in
// the set (readers use it without the lock): a changed assignment
// replaces it.
type replica struct {
	a meta.Assignment
	p *partition.Partition
	// syncedTerm is the leader term in which this replica, as leader,
	// last brought its group's members and config in line with a (zero:
	// not yet). Reconcile reads and writes it, under rs.reconciling; a
	// changed assignment gets a fresh replica value, so it starts at zero.
	syncedTerm uint64
	// awaitingVote is set while, as leader, it waits for a learner
	// recorded caught up to report that it votes (mover.AwaitingVote):
	// its assignment no longer shows a move, so runMoves steps it on
	// this flag rather than waiting for a reconcile pass.
	awaitingVote atomic.Bool
}

// sameAssignment reports whether two assignments of a group ask for the
// same thing.
func sameAssignment(a, b meta.Assignment) bool {
	return a.Queue == b.Queue && a.QueueID == b.QueueID && a.Index == b.Index && a.GroupID == b.GroupID &&
		a.Join == b.Join && a.Leave == b.Leave && a.Config == b.Config && slices.Equal(a.Replicas, b.Replicas) &&
		slices.Equal(a.Joining, b.Joining) && slices.Equal(a.Leaving, b.Leaving)
}

// newReplicaSet returns an empty set of replicas for n, with the node's
// bound on replicas campaigning at once.
func newReplicaSet(n *Node) *replicaSet {
	campaigns, err := partition.NewCampaigns(partition.DefaultCampaignsMax)
	if err != nil {
		panic(err) // a constant within bounds
	}
	return &replicaSet{n: n, running: map[string]*replica{}, starting: map[string]bool{}, stepping: map[string]bool{}, lastPrefer: map[string]time.Time{},
		handovers: make(chan struct{}, handoversMax), campaigns: campaigns}
}

// get returns the running replica of group, or nil.
func (rs *replicaSet) get(group string) *partition.Partition {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.running[group]; r != nil {
		return r.p
	}
	return nil
}

// all returns the running replicas.
func (rs *replicaSet) all() []*replica {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]*replica, 0, len(rs.running))
	for _, r := range rs.running {
		out = append(out, r)
	}
	return out
}

// reconcileGapMin is the least time between two reconciles that catalog
// changes start: a pass reads the whole catalog, and creates arriving
// hundreds a second must not keep a node doing nothing else. A create's
// own node opens its replicas at once (startQueue); the others within
// this gap.
const reconcileGapMin = 100 * time.Millisecond

// runReconcile brings the replicas in line with the catalog: after each
// catalog change (at most one pass per reconcileGapMin), and every
// ReconcileInterval when a pass is needed. It also announces the groups
// this node leads every leaderAnnounceInterval.
func (n *Node) runReconcile() {
	defer n.loops.Done()
	reconcile := time.NewTicker(n.cfg.ReconcileInterval)
	announce := time.NewTicker(leaderAnnounceInterval)
	defer reconcile.Stop()
	defer announce.Stop()
	var last time.Time
	var soon <-chan time.Time // armed while a change waits for the gap
	run := func() {
		soon = nil
		n.replicas.reconcile()
		last = time.Now()
	}
	for {
		select {
		case <-n.closing:
			return
		case <-n.meta.changed:
			if wait := reconcileGapMin - time.Since(last); wait > 0 {
				if soon == nil {
					soon = time.After(wait)
				}
				continue
			}
			run()
		case <-soon:
			run()
		case <-reconcile.C:
			if n.replicas.passNeeded() {
				run()
			}
		case <-announce.C:
			n.announceLeaders()
		}
	}
}

// leaderTableStamp is what a leader table was built at: the replicas'
// leader-change count, the meta group's leadership and term, and when.
type leaderTableStamp struct {
	changes  uint64
	metaTerm uint64 // 0 when this node did not lead the meta group
	at       time.Time
}

// leaderTableCostScale bounds how often the leader table is built while
// leaders change: not again within this many times the last build's
// duration. A node leading 5,000 groups took 10-15 ms a build, and during
// a failover's thousands of elections a build every announce tick was a
// tenth of its CPU; the table now lags the elections by a few hundred
// milliseconds at most.
const leaderTableCostScale = 20

// leaderTableAffordable reports whether a leader table may be built at
// stamp, the last one having been built at last and taken cost.
func leaderTableAffordable(last, stamp leaderTableStamp, cost time.Duration) bool {
	return stamp.at.Sub(last.at) >= leaderTableCostScale*cost
}

// leaderTableRebuild is how often the leader table is built again although
// no replica reported a change: raft reports a step-down just before its
// state leaves Leader, so a table built in between could miss it.
const leaderTableRebuild = time.Second

// announceLeaders gossips which groups (meta included) this node leads.
// It asks every replica only when one of them observed a change of
// leader, and otherwise every leaderTableRebuild.
func (n *Node) announceLeaders() {
	stamp := leaderTableStamp{changes: n.replicas.leaderChanges.Load(), at: time.Now()}
	if n.meta.isLeader() {
		stamp.metaTerm = n.meta.raft.CurrentTerm()
	}
	last := n.replicas.announced
	reports := n.reports.current()
	opening := !n.replicas.opened.Load()
	if stamp.changes == last.changes && stamp.metaTerm == last.metaTerm && stamp.at.Sub(last.at) < leaderTableRebuild &&
		slices.Equal(reports, n.replicas.announcedReports) && opening == n.replicas.announcedOpening {
		return
	}
	if !leaderTableAffordable(last, stamp, n.replicas.announceCost) {
		return // a failover's changes: a later tick builds it, with all of them
	}
	defer func() { n.replicas.announceCost = time.Since(stamp.at) }()
	n.replicas.announced, n.replicas.announcedReports, n.replicas.announcedOpening = stamp, reports, opening
	t := leaderTable{Groups: map[string]uint64{}, Reports: reports, Opening: opening}
	if stamp.metaTerm != 0 {
		t.Groups[meta.MetaGroupID] = stamp.metaTerm
	}
	var led []*replica
	for _, r := range n.replicas.all() {
		if term, ok := r.p.LeaderTerm(); ok {
			t.Groups[r.a.GroupID] = term
			led = append(led, r)
		}
	}
	t.Behind = n.replicas.behindNodes(led, stamp.at)
	n.members.announce(t)
}

// behindNodes returns the nodes (sorted) with a replica behind in one of
// the groups of led, found again at most every leaderTableRebuild (in
// between, during a failover's many rebuilds, the last answer stands).
func (rs *replicaSet) behindNodes(led []*replica, now time.Time) []string {
	if now.Sub(rs.behindAt) < leaderTableRebuild {
		return rs.behind
	}
	found := map[string]bool{}
	for _, r := range led {
		for _, id := range replicaBehind(r.p) {
			found[id] = true
		}
	}
	rs.behind, rs.behindAt = slices.Sorted(maps.Keys(found)), now
	return rs.behind
}

// behindSlack is how many entries a replica may trail its leader's commit
// index and still count as caught up for safe-to-stop (followers trail by
// the appends in flight).
const behindSlack = 64

// replicaBehind returns the nodes whose replica of the group p leads
// trails the commit index by more than behindSlack entries, by the
// leader's view (none when p does not lead).
func replicaBehind(p *partition.Partition) []string {
	prog, err := p.Progress()
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range prog.Servers {
		if s.Match+behindSlack < prog.CommitIndex {
			out = append(out, string(s.ID))
		}
	}
	return out
}

// reconcile starts replicas newly assigned to this node, stops those whose
// queue was deleted, and has leaders adopt the catalog's queue config.
func (rs *replicaSet) reconcile() {
	rs.reconciling.Lock()
	defer rs.reconciling.Unlock()
	// The running replicas are listed before the catalog is read: a
	// replica that startQueue opened after a catalog read, for a queue
	// created after it, would otherwise look deleted and be removed (its
	// data with it) while it serves.
	stamp := rs.passStamp()
	running := rs.all()
	assigned, nodes, current := rs.assignedHere()
	if !current {
		rs.passDone(stamp, false)
		return
	}
	if rs.afterCatalogRead != nil {
		rs.afterCatalogRead()
	}
	want := map[string]meta.Assignment{}
	for _, a := range assigned {
		want[a.GroupID] = a
	}
	settled := true
	for _, r := range running {
		if _, ok := want[r.a.GroupID]; !ok {
			rs.remove(r)
			settled = false
		}
	}
	var starts []meta.Assignment
	for _, a := range assigned {
		rs.mu.Lock()
		r := rs.running[a.GroupID]
		if r != nil && !sameAssignment(r.a, a) {
			r = &replica{a: a, p: r.p}
			rs.running[a.GroupID] = r
		}
		rs.mu.Unlock()
		if r != nil && r.p.Abstaining() != a.Join && !rs.setAbstain(r, a.Join) {
			settled = false // asks again at the next pass
		}
		if r == nil {
			starts = append(starts, a)
			continue
		}
		if !rs.syncLeader(r, nodes) {
			settled = false
		}
	}
	rs.startAll(starts, nodes)
	rs.opened.Store(true)
	rs.passDone(stamp, settled && len(starts) == 0)
}

// applyLagMax is how many committed entries a replica's state machine may
// have left to apply when it stops abstaining. The mover promotes a
// learner once its log matches the leader's; a learner fed by a snapshot
// may then still be applying thousands of entries, and as a voter it
// could not serve for as long as that takes if it had to lead. Holding
// its vote back holds the promotion (mover.AwaitingVote).
const applyLagMax = 256

// setAbstain turns r's abstaining on, or off once its state machine is
// within applyLagMax of its commit index, and reports whether it did.
func (rs *replicaSet) setAbstain(r *replica, on bool) bool {
	lag := r.p.ApplyLag
	if f := rs.applyLagOf.Load(); f != nil {
		lag = func() uint64 { return (*f)(r.p) }
	}
	if !on && lag() > applyLagMax {
		return false
	}
	// Recorded caught up (and applied): it may vote from now on.
	r.p.SetAbstain(on)
	return true
}

// syncLeader has a leading replica bring its group's members and config
// in line with its assignment, once per assignment and leader term (a
// pass over thousands of replicas asks each group's raft nothing when
// nothing changed), and hand leadership to the preferred replica.
//
// It reports whether the replica is settled: not leading, or leading in
// step with its assignment with no hand-over wanted.
func (rs *replicaSet) syncLeader(r *replica, nodes map[string]meta.Node) bool {
	term, leading := r.p.LeaderTerm()
	if !leading {
		return true
	}
	if r.syncedTerm != term && rs.stepMembers(r, nodes) && rs.syncConfig(r) {
		r.syncedTerm = term
	}
	wanted := rs.preferLeader(r, nodes)
	return r.syncedTerm == term && !wanted
}

// startQueue starts this node's replicas of queue name that are not
// running yet, and touches no other: a queue's create answers once its
// replicas here are open, without a pass over every queue or replica of
// the node (which, with thousands, made creates queue behind each other).
func (rs *replicaSet) startQueue(name string) {
	var assigned []meta.Assignment
	nodes := map[string]meta.Node{}
	rs.n.meta.view(func(f *meta.FSM) {
		if self, ok := f.Node(rs.n.cfg.ID); ok && self.Incarnation != 0 && self.Incarnation != rs.n.incarnation {
			return // see assignedHere
		}
		assigned = f.QueueAssignments(name, rs.n.cfg.ID)
		for _, nd := range f.Nodes() {
			nodes[nd.ID] = nd
		}
	})
	rs.startMissing(assigned, nodes)
}

// startMissing starts those of assigned that are not running.
func (rs *replicaSet) startMissing(assigned []meta.Assignment, nodes map[string]meta.Node) {
	var starts []meta.Assignment
	rs.mu.Lock()
	for _, a := range assigned {
		if rs.running[a.GroupID] == nil {
			starts = append(starts, a)
		}
	}
	rs.mu.Unlock()
	rs.startAll(starts, nodes)
}

// startAll opens the replicas of starts that no other starter has claimed.
func (rs *replicaSet) startAll(starts []meta.Assignment, nodes map[string]meta.Node) {
	claimed := starts[:0:0]
	rs.mu.Lock()
	for _, a := range starts {
		if rs.running[a.GroupID] == nil && !rs.starting[a.GroupID] {
			rs.starting[a.GroupID] = true
			claimed = append(claimed, a)
		}
	}
	rs.mu.Unlock()
	inParallel(len(claimed), func(i int) {
		rs.start(claimed[i], nodes)
		rs.mu.Lock()
		delete(rs.starting, claimed[i].GroupID)
		rs.mu.Unlock()
	})
}

// replicaOpenersMax bounds how many replicas a node opens or closes at
// once. Opening replays a replica's log and closing may wait for a
// leadership hand-over: done one after another, one slow partition would
// hold up every other, and a node with a hundred partitions would take a
// hundred times as long to come up or stop.
const replicaOpenersMax = 16

// inParallel runs fn(0..n-1) on at most replicaOpenersMax goroutines and
// waits for all of them.
func inParallel(n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, replicaOpenersMax) {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// dir is the data directory of group's replica: DataDir/partitions/group.
func (rs *replicaSet) dir(group string) string {
	return filepath.Join(rs.n.cfg.DataDir, "partitions", group)
}

// start opens the replica of an assignment. Peers come from the catalog's
// node registry; every replica passes the same list when bootstrapping.
func (rs *replicaSet) start(a meta.Assignment, nodes map[string]meta.Node) {
	peers := make([]raft.Server, 0, len(a.Replicas))
	for _, id := range a.Replicas {
		if a.Join || a.Leave {
			// Joining (placed after the partition was created, or on a
			// node that lost its data): the replica starts without
			// bootstrapping, abstains, and the partition's leader adds
			// it (stepMembers). Leaving: the group exists already.
			peers = nil
			break
		}
		nd, ok := nodes[id]
		if !ok {
			return // registry not caught up yet; next reconcile
		}
		peers = append(peers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(nd.RaftAddr), Suffrage: raft.Voter})
	}
	trans, err := rs.n.raftNet.Group(a.GroupID)
	if err != nil {
		rs.n.logger.Error("cannot register raft group", "group", a.GroupID, "err", err)
		return
	}
	pc := rs.n.cfg.partitionConfig(partition.DefaultConfig(a.GroupID, rs.n.cfg.ID, rs.dir(a.GroupID)))
	pc.Transport = trans
	pc.Liveness = rs.n.raftNet
	pc.Campaigns = rs.campaigns
	pc.LeaderChanges = &rs.leaderChanges
	pc.Logs = rs.n.logs
	pc.Peers = peers
	pc.Abstain = a.Join
	pc.Queue = a.Config
	pc.ClockVerified, pc.ClockHealthy = rs.n.clock.verified, rs.n.clock.healthy
	pc.Logger = rs.n.logger.With("queue", a.Queue, "partition", a.Index)
	p, err := partition.Open(pc)
	if err != nil {
		trans.Close()
		rs.n.logger.Error("cannot open partition replica", "group", a.GroupID, "err", err)
		return
	}
	rs.mu.Lock()
	rs.running[a.GroupID] = &replica{a: a, p: p}
	rs.mu.Unlock()
	rs.n.logger.Info("partition replica started", "queue", a.Queue, "partition", a.Index, "group", a.GroupID)
}

// remove stops a replica whose queue left the catalog and deletes its data.
func (rs *replicaSet) remove(r *replica) {
	rs.mu.Lock()
	delete(rs.running, r.a.GroupID)
	rs.mu.Unlock()
	rs.n.mover.Forget(r.a.GroupID)
	r.p.Close()
	if err := rs.n.logs.DropGroup(r.a.GroupID); err != nil {
		rs.n.logger.Error("dropping the partition's raft log failed", "group", r.a.GroupID, "err", err)
	}
	if err := os.RemoveAll(rs.dir(r.a.GroupID)); err != nil {
		rs.n.logger.Error("removing partition data failed", "group", r.a.GroupID, "err", err)
	}
	rs.n.logger.Info("partition replica removed", "queue", r.a.Queue, "partition", r.a.Index)
}

// preferLeader has a leader that is not its partition's preferred replica
// (the first in the placement, which the catalog spreads across nodes) hand
// leadership to it, so that partition leaders do not pile up on the node
// that happened to start first. Only an alive preferred replica is asked,
// and each partition is asked at most once per preferInterval.
func (rs *replicaSet) preferLeader(r *replica, nodes map[string]meta.Node) (wanted bool) {
	if len(r.a.Replicas) == 0 || !r.p.IsLeader() {
		return false
	}
	preferred := r.a.Replicas[0]
	nd, ok := nodes[preferred]
	if preferred == rs.n.cfg.ID || !ok || rs.n.members.state(preferred) != wire.NodeAlive {
		return false
	}
	if rs.campaigns.InUse() > 0 || rs.campaigns.Waiting() > 0 {
		return true // elections pending here: a hand-over would add one to each
	}
	rs.mu.Lock()
	last := rs.lastPrefer[r.a.GroupID]
	if time.Since(last) < preferInterval {
		rs.mu.Unlock()
		return true
	}
	select {
	case rs.handovers <- struct{}{}:
	default:
		rs.mu.Unlock()
		return true // enough hand-overs running: a later pass asks again
	}
	rs.lastPrefer[r.a.GroupID] = time.Now()
	rs.handing.Add(1)
	rs.mu.Unlock()
	go func() {
		defer rs.handing.Done()
		defer func() { <-rs.handovers }()
		if err := r.p.TransferLeadership(preferred, nd.RaftAddr); err != nil {
			rs.n.logger.Debug("handing leadership to the preferred replica failed", "group", r.a.GroupID, "to", preferred, "err", err)
			return
		}
		rs.n.logger.Info("handed leadership to the preferred replica", "group", r.a.GroupID, "to", preferred)
	}()
	return true
}

// syncConfig has a leader propose the catalog's queue config when its FSM
// still runs another one, and reports whether it now runs the catalog's
// (or leads no more).
func (rs *replicaSet) syncConfig(r *replica) bool {
	if !r.p.IsLeader() || r.p.Config() == r.a.Config {
		return true
	}
	cfg := r.a.Config
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := r.p.Propose(ctx, fsm.Command{Type: fsm.CmdSetConfig, SetConfig: &cfg})
	if err != nil || res.Err != nil {
		rs.n.logger.Warn("applying queue config failed", "group", r.a.GroupID, "err", err, "result", res.Err)
		return false
	}
	return true
}

// giveUpAll asks every replica this node leads, in a group with other
// voters, to hand leadership to its most caught-up follower, at most
// replicaOpenersMax at once, and waits for them for at most within (the
// rest go on while the replicas close; Partition.Close tries again). It
// returns how many replicas led.
func (rs *replicaSet) giveUpAll(within time.Duration) int {
	var led []*replica
	for _, r := range rs.all() {
		if r.p.IsLeader() && len(r.p.Status().Voters) > 1 {
			led = append(led, r)
		}
	}
	if len(led) == 0 {
		return 0
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		inParallel(len(led), func(i int) {
			if err := led[i].p.GiveUpLeadership(); err != nil {
				rs.n.logger.Debug("handing leadership over before stopping failed", "group", led[i].a.GroupID, "err", err)
			}
		})
	}()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		rs.n.logger.Warn("leaderships still being handed over when the node stops", "after", within)
	}
	return len(led)
}

// closeAll waits for leadership hand-overs in progress, then closes every
// replica, in parallel, and empties the set.
func (rs *replicaSet) closeAll() {
	rs.handing.Wait()
	all := rs.all()
	inParallel(len(all), func(i int) { all[i].p.Close() })
	rs.mu.Lock()
	rs.running = map[string]*replica{}
	rs.mu.Unlock()
}
