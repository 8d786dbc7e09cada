package client

import (
	"context"

	"github.com/ferrymq/ferry/wire"
)

// RemoveNode removes node id from the cluster for good: it leaves the
// catalog and the meta group, may not join again under that id, and each
// of its partition replicas moves to another node (partitions without a
// spare node run with one replica fewer until a node joins). It returns
// how many replicas moved. Removing a node that is not registered fails
// with ErrInvalidArgument, and so does removing the only replica of a
// partition.
//
//	moved, err := c.RemoveNode(ctx, "node4")
func (c *Client) RemoveNode(ctx context.Context, id string) (int, error) {
	var resp wire.RemoveNodeResponse
	err := c.call(ctx, nodeRoute{c}, wire.OpRemoveNode, wire.RemoveNodeRequest{ID: id}, &resp)
	return resp.Moved, err
}

// NodeStatus is one node's part in the cluster's shape: its state,
// whether it drains, its replica and preferred-leader counts, and its
// replicas joining or leaving.
type NodeStatus = wire.NodeStatus

// UnderReplicated is a partition with fewer caught-up replicas than its
// queue asks for, and why.
type UnderReplicated = wire.UnderReplicatedInfo

// MovingInfo is a partition with a replica move in flight: the replicas
// catching up to join it and those on their way out.
type MovingInfo = wire.MovingInfo

// NodeList is the answer of ListNodes.
type NodeList = wire.ListNodesResponse

// ListNodes returns every registered node's status, the partitions moving
// and the under-replicated partitions (cluster admin).
//
//	list, err := c.ListNodes(ctx)
func (c *Client) ListNodes(ctx context.Context) (*NodeList, error) {
	var resp wire.ListNodesResponse
	if err := c.call(ctx, nodeRoute{c}, wire.OpListNodes, wire.ListNodesRequest{}, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// DrainNode drains node id: it gets no new replicas, and its leaderships
// and replicas move to other nodes, a bounded number at a time, each move
// learner first. Follow progress with ListNodes (the node ends with 0
// replicas and 0 leaders); UndrainNode takes it back into placement.
func (c *Client) DrainNode(ctx context.Context, id string) (NodeStatus, error) {
	var resp wire.DrainNodeResponse
	err := c.call(ctx, nodeRoute{c}, wire.OpDrainNode, wire.DrainNodeRequest{ID: id}, &resp)
	return resp.Node, err
}

// UndrainNode takes a drained or draining node back into placement; moves
// already started complete.
func (c *Client) UndrainNode(ctx context.Context, id string) (NodeStatus, error) {
	var resp wire.DrainNodeResponse
	err := c.call(ctx, nodeRoute{c}, wire.OpDrainNode, wire.DrainNodeRequest{ID: id, Undrain: true}, &resp)
	return resp.Node, err
}

// RebalancePlan is the answer of Rebalance.
type RebalancePlan = wire.RebalanceResponse

// Rebalance returns one round of the moves and preferred-leader changes
// that even out replica and leader counts per node, and starts them unless
// dryRun (the cluster balances by itself unless that is turned off).
func (c *Client) Rebalance(ctx context.Context, dryRun bool) (*RebalancePlan, error) {
	var resp wire.RebalanceResponse
	if err := c.call(ctx, nodeRoute{c}, wire.OpRebalance, wire.RebalanceRequest{DryRun: dryRun}, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// SafeToStop is the answer of SafeToStop.
type SafeToStop = wire.SafeToStopResponse

// SafeToStop says whether node id can be stopped now without making a
// partition or the meta group unavailable, and if not, why.
func (c *Client) SafeToStop(ctx context.Context, id string) (*SafeToStop, error) {
	var resp wire.SafeToStopResponse
	if err := c.call(ctx, nodeRoute{c}, wire.OpSafeToStop, wire.SafeToStopRequest{ID: id}, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}
