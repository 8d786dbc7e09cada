package node

import (
	"sync"
	"time"
)

// reconcileFullInterval is the longest a node goes without a reconcile
// pass over every replica, however settled it looked: a safety net under
// the stamp below.
const reconcileFullInterval = 30 * time.Second

// reconcileStamp is what a reconcile pass depends on besides the clock:
// the catalog (its version: raft's applied index moves when an entry is
// handed to the state machine, before the catalog changes, so a pass
// stamped with it could read the catalog without the entry and still
// look current until reconcileFullInterval), the replicas' leaders
// (their change count) and the members gossip reports.
type reconcileStamp struct {
	catalog       uint64
	leaderChanges uint64
	memberChanges uint64
}

// reconcilePass is what the last reconcile pass saw, so that the periodic
// pass can be skipped while nothing it depends on moved: with thousands of
// replicas a pass reads the whole catalog and every replica, and most
// passes of an idle node found nothing to do.
type reconcilePass struct {
	mu      sync.Mutex
	stamp   reconcileStamp
	settled bool // the pass started and removed nothing and every leader was in step
	at      time.Time
}

// passStamp reads the stamp before a pass reads what it covers: a change
// during the pass then moves the stamp past the one recorded.
func (rs *replicaSet) passStamp() reconcileStamp {
	return reconcileStamp{
		catalog:       rs.n.meta.catalogVersion(),
		leaderChanges: rs.leaderChanges.Load(),
		memberChanges: rs.n.members.changes.Load(),
	}
}

// passDone records a finished pass.
func (rs *replicaSet) passDone(stamp reconcileStamp, settled bool) {
	p := &rs.pass
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stamp, p.settled, p.at = stamp, settled, time.Now()
}

// passNeeded reports whether the periodic reconcile must run: the last
// pass left work (a start, a removal, a leader not in step, a hand-over
// wanted), something it depends on changed since, or reconcileFullInterval
// passed.
func (rs *replicaSet) passNeeded() bool {
	p := &rs.pass
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.settled || p.stamp != rs.passStamp() || time.Since(p.at) >= reconcileFullInterval
}
