package node

import (
	"sync"

	"github.com/ferrymq/ferry/meta"
)

// catalogView is this node's share of the catalog (its replica
// assignments and the nodes) as read at one applied index of the meta
// group. A reconcile pass and the move steps read it several times a
// second during a failover, when leader changes (not catalog changes)
// start them; reading the whole catalog each time was a tenth of a
// survivor's CPU with 10,000 partitions, most of it garbage for the
// collector. The view is read again only once the meta group applied
// something since.
type catalogView struct {
	mu       sync.Mutex
	valid    bool
	index    uint64 // the meta group's applied index read before the view
	assigned []meta.Assignment
	nodes    map[string]meta.Node
	current  bool
}

// assignedHere returns the partition replicas the catalog assigns this
// node, sorted by group id, and the catalog's nodes by id. current is
// false while the catalog still records another incarnation of this node
// (it lost its data and is not registered again yet): its assignments
// then describe replicas that are gone, which must not be started as if
// they were whole. The slice and map are shared by every caller until the
// catalog changes: read them, never write them.
func (rs *replicaSet) assignedHere() (assigned []meta.Assignment, nodes map[string]meta.Node, current bool) {
	// The index is read before the catalog: an apply during the read
	// moves it past the one recorded, so the next call reads again. The
	// view is never older than its index.
	index := rs.n.meta.raft.AppliedIndex()
	v := &rs.catalog
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.valid && v.index == index {
		return v.assigned, v.nodes, v.current
	}
	assigned, nodes, current = rs.readCatalog()
	v.valid, v.index, v.assigned, v.nodes, v.current = true, index, assigned, nodes, current
	return assigned, nodes, current
}

// readCatalog reads this node's assignments and the nodes from the meta
// group's state machine (see assignedHere).
func (rs *replicaSet) readCatalog() (assigned []meta.Assignment, nodes map[string]meta.Node, current bool) {
	nodes = map[string]meta.Node{}
	current = true
	rs.n.meta.view(func(f *meta.FSM) {
		if self, ok := f.Node(rs.n.cfg.ID); ok && self.Incarnation != 0 && self.Incarnation != rs.n.incarnation {
			current = false
			return
		}
		assigned = f.Assignments(rs.n.cfg.ID)
		for _, nd := range f.Nodes() {
			nodes[nd.ID] = nd
		}
	})
	return assigned, nodes, current
}
