package jsonview

import "github.com/ferrymq/ferry/wire"

// NodeStatus is one node's part in the cluster's shape, as `ferry node ls
// --json` and GET /v1/nodes give it. state is "alive", "suspect", "dead",
// "left" or "unknown"; lifecycle adds what placement does with it:
// "active", "draining", "drained", "dead" (gossip sees it dead) or
// "removed" (removed for good; it may not join again).
type NodeStatus struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Lifecycle string `json:"lifecycle"`
	Replicas  int    `json:"replicas"`
	Leaders   int    `json:"preferred_leaders"`
	Leading   int    `json:"leading"`
	Joining   int    `json:"joining"`
	Leaving   int    `json:"leaving"`
	DeadForMS int64  `json:"dead_for_ms,omitempty"`
	Stuck     string `json:"stuck,omitempty"`
}

// Lifecycle names what placement does with a node.
func Lifecycle(s wire.NodeStatus) string {
	switch {
	case s.Removed:
		return "removed"
	case s.Draining && s.Replicas == 0 && s.Leaving == 0 && s.Leading == 0:
		return "drained"
	case s.Draining:
		return "draining"
	case s.State == wire.NodeDead || s.State == wire.NodeLeft:
		return "dead"
	}
	return "active"
}

// NodeStatusOf renders a wire node status.
func NodeStatusOf(s wire.NodeStatus) NodeStatus {
	return NodeStatus{ID: s.ID, State: Enum(s.State.String()), Lifecycle: Lifecycle(s), Replicas: s.Replicas,
		Leaders: s.Leaders, Leading: s.Leading, Joining: s.Joining, Leaving: s.Leaving, DeadForMS: s.DeadForMillis, Stuck: s.Stuck}
}

// UnderReplicated is a partition with fewer caught-up replicas than its
// queue asks for.
type UnderReplicated struct {
	Queue     string `json:"queue"`
	Partition int    `json:"partition"`
	CaughtUp  int    `json:"caught_up"`
	Want      int    `json:"want"`
	Reason    string `json:"reason"`
}

// Moving is a partition with a move in progress.
type Moving struct {
	Queue     string   `json:"queue"`
	Partition int      `json:"partition"`
	Joining   []string `json:"joining"`
	Leaving   []string `json:"leaving"`
}

// Nodes is the answer of `ferry node ls --json` and GET /v1/nodes.
type Nodes struct {
	Nodes                []NodeStatus      `json:"nodes"`
	MovesInFlight        int               `json:"moves_in_flight"`
	Moving               []Moving          `json:"moving"`
	UnderReplicated      []UnderReplicated `json:"under_replicated"`
	UnderReplicatedTotal int               `json:"under_replicated_total"`
}

// NodesOf renders a node listing.
func NodesOf(l *wire.ListNodesResponse) Nodes {
	out := Nodes{Nodes: []NodeStatus{}, UnderReplicated: []UnderReplicated{}, Moving: []Moving{}, MovesInFlight: l.MovesInFlight,
		UnderReplicatedTotal: l.UnderReplicatedTotal}
	for _, m := range l.Moving {
		out.Moving = append(out.Moving, Moving{Queue: m.Queue, Partition: m.Partition,
			Joining: append([]string{}, m.Joining...), Leaving: append([]string{}, m.Leaving...)})
	}
	for _, s := range l.Nodes {
		out.Nodes = append(out.Nodes, NodeStatusOf(s))
	}
	for _, u := range l.UnderReplicated {
		out.UnderReplicated = append(out.UnderReplicated, UnderReplicated{Queue: u.Queue, Partition: u.Partition,
			CaughtUp: u.CaughtUp, Want: u.Want, Reason: u.Reason})
	}
	return out
}
