package node

import (
	"sync"

	"github.com/ferrymq/ferry/meta"
)

// catalogView is this node's share of the catalog (its replica
// assignments and the nodes) as read at one version of the meta group's
// state machine (metaGroup.version). A reconcile pass and the move steps
// read it several times a second during a failover, when leader changes
// (not catalog changes) start them; reading the whole catalog each time
// was a tenth of a survivor's CPU with 10,000 partitions, most of it
// garbage for the collector. The view is read again once the catalog
// changed.
type catalogView struct {
	mu       sync.Mutex
	valid    bool
	version  uint64 // the metaGroup.version it was read at
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
	v := &rs.catalog
	v.mu.Lock()
	defer v.mu.Unlock()
	g := rs.n.meta
	g.view(func(f *meta.FSM) {
		// Under the meta group's lock: the version and the catalog
		// read agree.
		if v.valid && v.version == g.version {
			return
		}
		v.assigned, v.nodes, v.current = readCatalog(f, rs.n.cfg.ID, rs.n.incarnation)
		v.valid, v.version = true, g.version
	})
	return v.assigned, v.nodes, v.current
}

// readCatalog reads node self's assignments and the nodes from the
// catalog (see assignedHere); incarnation is this process's.
func readCatalog(f *meta.FSM, self string, incarnation uint64) (assigned []meta.Assignment, nodes map[string]meta.Node, current bool) {
	nodes = map[string]meta.Node{}
	if nd, ok := f.Node(self); ok && nd.Incarnation != 0 && nd.Incarnation != incarnation {
		return nil, nodes, false
	}
	assigned = f.Assignments(self)
	for _, nd := range f.Nodes() {
		nodes[nd.ID] = nd
	}
	return assigned, nodes, true
}
