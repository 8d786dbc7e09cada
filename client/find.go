package client

import (
	"context"

	"github.com/ferrymq/ferry/wire"
)

// MessageInfo is one message as FindMessage reports it: its partition
// and seq, state ("ready", "delayed", "leased" or "dead"), attempts, the
// consumer that received it last (holding it, when leased), when a
// delayed message becomes ready or a lease runs out (VisibleAt, Unix
// nanoseconds), the dead letter's details, and its failure history.
type MessageInfo = wire.MessageInfo

// FindMessage looks the messages with this id up in every partition of
// the queue, in any state, without leasing them or reading their bodies.
// An id is unique within the queue's dedup window; one sent again after
// it, or redriven, may be found more than once. Each partition's leader
// walks its messages: it is an operator's lookup, not for a request path.
//
//	ms, err := c.FindMessage(ctx, "orders", "order-42")
func (c *Client) FindMessage(ctx context.Context, queue, id string) ([]MessageInfo, error) {
	n, err := c.partitions(ctx, queue)
	if err != nil {
		return nil, err
	}
	var out []MessageInfo
	for p := range n {
		var resp wire.FindMessageResponse
		req := wire.FindMessageRequest{Queue: queue, Partition: p, ID: id}
		if err := c.call(ctx, partRoute{c, queue, p}, wire.OpFindMessage, req, &resp); err != nil {
			return out, err
		}
		out = append(out, resp.Messages...)
	}
	return out, nil
}

// DeleteMessage deletes every message with this id from the queue, in any
// state, and returns how many it deleted (0, and ErrMessageNotFound, when
// there is none). A consumer holding one of them gets ErrMessageNotFound
// for its ack, extend, nack or reject. A dead letter is deleted as
// DeleteDeadLetters would.
func (c *Client) DeleteMessage(ctx context.Context, queue, id string) (int, error) {
	return c.deleteMessages(ctx, queue, id, false)
}

// CancelMessage deletes the messages with this id that were never
// delivered (ready or delayed at their first attempt: a scheduled or
// queued message nobody has seen) and returns how many; it fails with
// ErrMessageNotFound when none was left to cancel.
func (c *Client) CancelMessage(ctx context.Context, queue, id string) (int, error) {
	return c.deleteMessages(ctx, queue, id, true)
}

func (c *Client) deleteMessages(ctx context.Context, queue, id string, undelivered bool) (int, error) {
	found, err := c.FindMessage(ctx, queue, id)
	if err != nil {
		return 0, err
	}
	deleted := 0
	var last error
	for _, m := range found {
		var resp wire.DeleteMessageResponse
		req := wire.DeleteMessageRequest{Queue: queue, Partition: m.Partition, Seq: m.Seq, ID: m.ID, Undelivered: undelivered}
		if err := c.call(ctx, partRoute{c, queue, m.Partition}, wire.OpDeleteMessage, req, &resp); err != nil {
			last = err
			continue
		}
		deleted += resp.Deleted
	}
	if deleted == 0 {
		if last == nil {
			last = wire.Errorf(wire.CodeMessageNotFound, "no message %q in queue %s", id, queue)
		}
		return 0, last
	}
	return deleted, nil
}
