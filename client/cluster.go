package client

import (
	"context"

	"github.com/ferrymq/ferry/wire"
)

// NodeState is a cluster member's state as the answering node sees it.
type NodeState = wire.NodeState

// Node states.
const (
	// NodeUnknown is a state this version does not know.
	NodeUnknown = wire.NodeUnknown
	// NodeAlive is a member that answers.
	NodeAlive = wire.NodeAlive
	// NodeSuspect is a member that missed probes and may be down.
	NodeSuspect = wire.NodeSuspect
	// NodeDead is a member declared failed; it may come back.
	NodeDead = wire.NodeDead
	// NodeLeft is a member that left the cluster on purpose.
	NodeLeft = wire.NodeLeft
)

// NodeInfo describes one cluster member.
type NodeInfo = wire.NodeInfo

// ClusterInfo is the cluster's membership and the placement of every
// queue, as one node knows it.
type ClusterInfo struct {
	// Nodes lists the known members.
	Nodes []NodeInfo
	// Queues lists the queues, sorted by name, with their partition
	// leaders.
	Queues []QueueInfo
}

// Cluster returns the cluster's nodes and queue placement, freshly
// loaded; the client's routing cache is refreshed with it.
//
//	ci, err := c.Cluster(ctx)
//	for _, n := range ci.Nodes {
//		fmt.Println(n.ID, n.ClientAddr, n.State)
//	}
func (c *Client) Cluster(ctx context.Context) (ClusterInfo, error) {
	var md wire.MetadataResponse
	if err := c.call(ctx, nodeRoute{c}, wire.OpMetadata, wire.MetadataRequest{}, &md); err != nil {
		return ClusterInfo{}, err
	}
	c.mu.Lock()
	c.meta.merge(md, "")
	c.mu.Unlock()
	return ClusterInfo{Nodes: md.Nodes, Queues: md.Queues}, nil
}
