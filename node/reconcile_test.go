package node

import (
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/meta"
)

// A replica opened by a create (startQueue) while a reconcile is between its
// catalog read and its pass over the running replicas is not taken for a
// replica of a deleted queue: it keeps running, with its data. (Reconcile
// once read the catalog first and listed the replicas after, and removed
// such a replica.)
func TestReplicas_ReconcileKeepsAReplicaOpenedAfterItsCatalogRead(t *testing.T) {
	nodes := testNodes(t, 3)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "first", 1)
	nd := nodes[0]

	reading, proceed := make(chan struct{}), make(chan struct{})
	var first sync.Once
	nd.replicas.reconciling.Lock() // no reconcile of the loop's runs while the hook is set
	// The loop's own reconcile may reach the hook before the one started
	// below: whichever comes first holds the pass open; the other runs it
	// again after proceed is closed.
	nd.replicas.afterCatalogRead = func() {
		first.Do(func() { close(reading) })
		<-proceed
	}
	nd.replicas.reconciling.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		nd.replicas.reconcile()
	}()
	<-reading

	createQueueOn(t, leader, "second", 1)
	var group string
	testwait.Until(t, 10*time.Second, "the catalog of "+nd.ID()+" to hold the new queue", func() bool {
		nd.meta.view(func(f *meta.FSM) {
			if q, ok := f.Queue("second"); ok {
				group = q.GroupID(0)
			}
		})
		return group != ""
	})
	nd.replicas.startQueue("second")
	testwait.Until(t, 10*time.Second, "the new queue's replica to open", func() bool { return nd.replicas.get(group) != nil })
	opened := nd.replicas.get(group)

	close(proceed)
	<-done
	nd.replicas.reconciling.Lock()
	nd.replicas.afterCatalogRead = nil
	nd.replicas.reconciling.Unlock()
	if got := nd.replicas.get(group); got != opened {
		t.Fatalf("the replica of %s opened during the reconcile is %p after it, was %p (removed)", group, got, opened)
	}
}

// An idle node skips the periodic reconcile pass while nothing it
// depends on moved, and passes again once the catalog changes, a
// replica's leader changes, or the safety interval runs out.
func TestReplicas_PeriodicPassRunsOnlyWhenSomethingMoved(t *testing.T) {
	nodes := testNodes(t, 3)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "idle", 1)
	nd := nodes[0]
	testwait.Until(t, 15*time.Second, "a settled pass with nothing left to do", func() bool {
		nd.replicas.reconcile()
		return !nd.replicas.passNeeded()
	})

	createQueueOn(t, leader, "another", 1) // the catalog moves
	testwait.Until(t, 10*time.Second, "a pass asked for after a catalog change", nd.replicas.passNeeded)

	testwait.Until(t, 15*time.Second, "a settled pass again", func() bool {
		nd.replicas.reconcile()
		return !nd.replicas.passNeeded()
	})
	nd.replicas.leaderChanges.Add(1) // as a replica's raft reports a new leader
	if !nd.replicas.passNeeded() {
		t.Fatal("no pass asked for after a leader change")
	}

	testwait.Until(t, 15*time.Second, "a settled pass after the leader change", func() bool {
		nd.replicas.reconcile()
		return !nd.replicas.passNeeded()
	})
	nd.replicas.pass.mu.Lock()
	nd.replicas.pass.at = time.Now().Add(-reconcileFullInterval)
	nd.replicas.pass.mu.Unlock()
	if !nd.replicas.passNeeded() {
		t.Fatal("no pass asked for after the safety interval")
	}
}

// The catalog view is read once per version of the catalog: passes
// started by leader changes (thousands during a failover) share one read,
// and a catalog change is seen by the very next call (the version moves
// with the apply, under the catalog's lock; raft's applied index moves
// when raft hands the entry over, not when the catalog changes, and a
// view keyed by it missed the change for up to a reconcile interval).
func TestReplicas_CatalogReadOncePerMetaIndex(t *testing.T) {
	nodes := testNodes(t, 3)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "first", 1)
	nd := nodes[0]
	var a1 []meta.Assignment
	testwait.Until(t, 10*time.Second, nd.ID()+" to be assigned the first queue", func() bool {
		a1, _, _ = nd.replicas.assignedHere()
		return len(a1) == 1
	})
	version := func() (v uint64) {
		nd.meta.view(func(*meta.FSM) { v = nd.meta.version })
		return v
	}
	checked := false
	for range 20 { // the meta group applies now and then (registrations): find a still moment
		before := version()
		a1, _, _ = nd.replicas.assignedHere()
		a2, nodes2, _ := nd.replicas.assignedHere()
		if version() != before {
			continue
		}
		if len(a2) != 1 || &a2[0] != &a1[0] {
			t.Fatal("the catalog was read again at the same meta index")
		}
		if len(nodes2) != 3 {
			t.Fatalf("the view holds %d nodes, want 3", len(nodes2))
		}
		checked = true
		break
	}
	if !checked {
		t.Fatal("the meta group's applied index never stood still for two reads")
	}

	createQueueOn(t, leader, "second", 1)
	testwait.Until(t, 10*time.Second, nd.ID()+" to see the second queue", func() bool {
		a, _, _ := nd.replicas.assignedHere()
		return len(a) == 2
	})

	// A change is seen as soon as the catalog holds it, whatever raft's
	// applied index says.
	nd.replicas.catalog.mu.Lock()
	stale := nd.replicas.catalog.version
	nd.replicas.catalog.mu.Unlock()
	nd.meta.mu.Lock()
	nd.meta.version++ // as Apply does with a change
	nd.meta.mu.Unlock()
	nd.replicas.assignedHere()
	nd.replicas.catalog.mu.Lock()
	got := nd.replicas.catalog.version
	nd.replicas.catalog.mu.Unlock()
	if got == stale {
		t.Fatal("the view was not read again after the catalog's version moved")
	}
}

// The leader table is not built again within leaderTableCostScale times
// its last build's duration, however many leaders changed meanwhile.
func TestLeaderTable_BuiltNoMoreOftenThanItsCostAllows(t *testing.T) {
	at := time.Unix(1000, 0)
	last := leaderTableStamp{changes: 1, at: at}
	cost := 15 * time.Millisecond
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{
		{0, false}, {100 * time.Millisecond, false}, {leaderTableCostScale*cost - time.Millisecond, false},
		{leaderTableCostScale * cost, true}, {time.Second, true},
	} {
		stamp := leaderTableStamp{changes: 500, at: at.Add(tc.after)}
		if got := leaderTableAffordable(last, stamp, cost); got != tc.want {
			t.Errorf("%v after a build that took %v: affordable %v, want %v", tc.after, cost, got, tc.want)
		}
	}
	if !leaderTableAffordable(last, leaderTableStamp{at: at.Add(leaderAnnounceInterval)}, 0) {
		t.Error("a table that cost nothing waits longer than the announce interval")
	}
}

// A catalog change applied after a pass read the catalog asks for another
// pass, even when raft's applied index had counted the entry before the
// pass began (raft hands entries to the state machine and moves its
// applied index at once; the catalog changes when the state machine gets
// to them). Stamped with raft's index, such a pass looked current and a
// replica kept its old assignment until the safety interval: a learner
// recorded caught up went on abstaining, and its move waited 30 s.
func TestReplicas_CatalogChangeAfterThePassReadItAsksForAnother(t *testing.T) {
	nodes := testNodes(t, 3)
	leader := metaLeader(t, nodes)
	createQueueOn(t, leader, "idle", 1)
	nd := nodes[0]
	testwait.Until(t, 15*time.Second, "a settled pass with nothing left to do", func() bool {
		nd.replicas.reconcile()
		return !nd.replicas.passNeeded()
	})
	// As the state machine applying an entry raft already counted: the
	// catalog moves, raft's applied index does not.
	nd.replicas.afterCatalogRead = func() {
		nd.meta.mu.Lock()
		nd.meta.version++
		nd.meta.queues = nil
		nd.meta.mu.Unlock()
	}
	nd.replicas.reconcile()
	nd.replicas.afterCatalogRead = nil
	if !nd.replicas.passNeeded() {
		t.Fatal("no pass asked for after a catalog change the pass did not read")
	}
}
