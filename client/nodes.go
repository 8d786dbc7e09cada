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
