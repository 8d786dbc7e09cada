package wire

// NodeStatus is one node's part in the cluster's shape, as the answering
// node knows it (the catalog, and gossip for State).
type NodeStatus struct {
	ID    string    `msgpack:"id"`
	State NodeState `msgpack:"state"`
	// Draining is set from `node drain` until `node undrain`.
	Draining bool `msgpack:"draining,omitempty"`
	// Replicas counts the partition replicas placed on it; Leaders those
	// where it is the preferred leader.
	Replicas int `msgpack:"replicas"`
	Leaders  int `msgpack:"leaders"`
	// Joining counts its replicas still catching up; Leaving the replicas
	// a move is taking away from it.
	Joining int `msgpack:"joining,omitempty"`
	Leaving int `msgpack:"leaving,omitempty"`
	// Leading counts the raft groups it leads now (gossip's leader
	// tables, the meta group included).
	Leading int `msgpack:"leading,omitempty"`
	// DeadForMillis is how long gossip has seen it dead, 0 when it is not.
	DeadForMillis int64 `msgpack:"dead_for_ms,omitempty"`
	// Stuck explains a drain that cannot finish (nowhere to move a
	// replica to); empty otherwise.
	Stuck string `msgpack:"stuck,omitempty"`
	// Removed is set for a node removed for good (`node remove`): it is
	// no longer registered, and its id may not join again. The catalog
	// remembers the last meta.RemovedMax removed ids.
	Removed bool `msgpack:"removed,omitempty"`
}

// UnderReplicatedInfo is a partition with fewer caught-up replicas than
// its queue asks for, and why.
type UnderReplicatedInfo struct {
	Queue     string `msgpack:"queue"`
	Partition int    `msgpack:"partition"`
	CaughtUp  int    `msgpack:"caught_up"`
	Want      int    `msgpack:"want"`
	Reason    string `msgpack:"reason"`
}

// MovingInfo is a partition with a move in progress: Joining are the
// replicas catching up to join it, Leaving those on their way out.
type MovingInfo struct {
	Queue     string   `msgpack:"queue"`
	Partition int      `msgpack:"partition"`
	Joining   []string `msgpack:"joining,omitempty"`
	Leaving   []string `msgpack:"leaving,omitempty"`
}

// ListNodesRequest asks any node for every node's status.
type ListNodesRequest struct{}

// ListNodesResponse lists the registered nodes by id, then the nodes
// removed for good that the catalog remembers (NodeStatus.Removed), the
// partitions
// moving (at most MovingListMax; MovesInFlight counts them all), and the
// under-replicated partitions (at most UnderReplicatedListMax;
// UnderReplicatedTotal counts them all).
type ListNodesResponse struct {
	Nodes                []NodeStatus          `msgpack:"nodes,omitempty"`
	MovesInFlight        int                   `msgpack:"moves_in_flight"`
	Moving               []MovingInfo          `msgpack:"moving,omitempty"`
	UnderReplicated      []UnderReplicatedInfo `msgpack:"under_replicated,omitempty"`
	UnderReplicatedTotal int                   `msgpack:"under_replicated_total"`
}

// UnderReplicatedListMax bounds the under-replicated partitions a
// ListNodesResponse names; MovingListMax the moving ones.
const (
	UnderReplicatedListMax = 100
	MovingListMax          = 100
)

// DrainNodeRequest drains node ID (its leaderships, then its replicas,
// move to other nodes, and it gets no new ones), or with Undrain takes it
// back into placement. Served by the meta leader.
type DrainNodeRequest struct {
	ID      string `msgpack:"id"`
	Undrain bool   `msgpack:"undrain,omitempty"`
}

// DrainNodeResponse is the node's status right after the change.
type DrainNodeResponse struct {
	Node NodeStatus `msgpack:"node"`
}

// MoveInfo is one replica move of a rebalance plan.
type MoveInfo struct {
	Queue     string `msgpack:"queue"`
	Partition int    `msgpack:"partition"`
	From      string `msgpack:"from"`
	To        string `msgpack:"to"`
}

// LeaderChangeInfo is one preferred-leader change of a rebalance plan.
type LeaderChangeInfo struct {
	Queue     string `msgpack:"queue"`
	Partition int    `msgpack:"partition"`
	To        string `msgpack:"to"`
}

// RebalanceRequest asks the meta leader for the moves that would even out
// replica and leader counts now (one round, at most the cluster's moves
// limit), and starts them unless DryRun.
type RebalanceRequest struct {
	DryRun bool `msgpack:"dry_run,omitempty"`
}

// RebalanceResponse is the plan, and whether it was started.
type RebalanceResponse struct {
	Moves   []MoveInfo         `msgpack:"moves,omitempty"`
	Leaders []LeaderChangeInfo `msgpack:"leaders,omitempty"`
	Started bool               `msgpack:"started,omitempty"`
}

// SafeToStopRequest asks whether node ID can be stopped now without making
// any partition or the meta group unavailable.
type SafeToStopRequest struct {
	ID string `msgpack:"id"`
}

// SafeToStopResponse answers SafeToStopRequest. Safe is set when every
// partition the node hosts, and the meta group, keeps a caught-up majority
// on alive nodes without it; Reasons says what stands in the way, at most
// SafeToStopReasonsMax of them. Leads counts the groups it leads now: a
// SIGTERM hands them over before it stops, so they do not make it unsafe.
type SafeToStopResponse struct {
	Safe    bool     `msgpack:"safe"`
	Leads   int      `msgpack:"leads"`
	Reasons []string `msgpack:"reasons,omitempty"`
}

// SafeToStopReasonsMax bounds SafeToStopResponse.Reasons.
const SafeToStopReasonsMax = 20
