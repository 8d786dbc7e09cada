package client

import (
	"context"

	"github.com/ferrymq/ferry/wire"
)

// DeleteMatchingSampleMax is the most ids a DeleteMatching result lists.
const DeleteMatchingSampleMax = 20

// MatchedMessage names one message a DeleteMatching selected.
type MatchedMessage struct {
	Partition int
	Seq       uint64
	ID        string
	State     string
}

// DeleteMatchingResult is what DeleteMatching found and did.
type DeleteMatchingResult struct {
	// Matched counts the messages that matched the filter when they were
	// listed.
	Matched int
	// Deleted counts those deleted (0 on a dry run); fewer than Matched
	// when some were acked, expired or moved to another state in between.
	Deleted int
	// Sample lists the first matched messages, at most
	// DeleteMatchingSampleMax.
	Sample []MatchedMessage
}

// DeleteMatching deletes the live messages of the queue that f selects
// (ready ones by default) and reports how many matched and how many were
// deleted; with dryRun it only counts them (and lists a sample), changing
// nothing. A consumer holding a deleted message gets ErrMessageNotFound
// for its ack, extend, nack or reject. Dead letters are never deleted.
//
// It pages through each partition with a peek that returns no bodies,
// deleting each page (at most wire.PeekMax messages) in one replicated
// step that names the messages by seq and id and deletes only those still
// in f's states. The guarantee: nothing outside the filter is ever
// deleted (group, headers and age cannot stop matching; the state is
// checked again when the delete applies); a message that starts matching
// while it runs (sent, or moved into one of the states, behind the page
// already listed, or ahead of it) may or may not be deleted. On failure
// the result covers what was done so far. A partition whose leader
// answers a filtered peek without message states (a server from before
// filters, which would list every ready message) fails with
// ErrMalformed before anything of it is deleted.
//
//	res, err := c.DeleteMatching(ctx, "orders", client.MessageFilter{Group: "acct-42", States: []string{client.StateAll}}, false)
func (c *Client) DeleteMatching(ctx context.Context, queue string, f MessageFilter, dryRun bool) (DeleteMatchingResult, error) {
	var out DeleteMatchingResult
	if err := f.check(); err != nil {
		return out, err
	}
	n, err := c.partitions(ctx, queue)
	if err != nil {
		return out, err
	}
	for p := range n {
		if err := c.deleteMatchingIn(ctx, queue, p, f, dryRun, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// deleteMatchingIn is DeleteMatching on partition p.
func (c *Client) deleteMatchingIn(ctx context.Context, queue string, p int, f MessageFilter, dryRun bool, out *DeleteMatchingResult) error {
	after := uint64(0)
	for {
		req := wire.PeekRequest{Queue: queue, Partition: p, Max: wire.PeekMax, AfterSeq: after, NoBodies: true}
		f.request(&req)
		var resp wire.PeekResponse
		if err := c.call(ctx, partRoute{c, queue, p}, wire.OpPeek, req, &resp); err != nil {
			return err
		}
		items := make([]wire.MessageRef, 0, len(resp.Messages))
		for _, m := range resp.Messages {
			if err := f.checkAnswer(m); err != nil {
				return err // nothing of this page is deleted
			}
			items = append(items, wire.MessageRef{Seq: m.Seq, ID: m.ID})
			if len(out.Sample) < DeleteMatchingSampleMax {
				out.Sample = append(out.Sample, MatchedMessage{Partition: p, Seq: m.Seq, ID: m.ID, State: peekedOf(m).State})
			}
		}
		out.Matched += len(items)
		if !dryRun && len(items) > 0 {
			var del wire.DeleteMessagesResponse
			dreq := wire.DeleteMessagesRequest{Queue: queue, Partition: p, Items: items, States: deleteStates(f.States)}
			if err := c.call(ctx, partRoute{c, queue, p}, wire.OpDeleteMessages, dreq, &del); err != nil {
				return err
			}
			out.Deleted += del.Deleted
		}
		if resp.Next == 0 || resp.Next <= after {
			return nil
		}
		after = resp.Next
	}
}

// deleteStates is the state list of a bulk delete: a filter naming none
// selects ready messages (as a peek does), while a delete naming none
// would take any state.
func deleteStates(states []string) []string {
	if len(states) == 0 {
		return []string{StateReady}
	}
	return states
}
