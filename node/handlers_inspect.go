package node

import (
	"context"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wire"
)

// handlePeek reads the messages a peek selects from the partition
// leader, which confirms its leadership first. Bounds out of range
// (wire.PeekRequest.CheckBounds) are refused before the partition is
// looked up; the filters are checked by fsm.
func (n *Node) handlePeek(ctx context.Context, r *wire.PeekRequest) (*wire.PeekResponse, error) {
	if err := r.CheckBounds(); err != nil {
		return nil, err
	}
	f, err := peekFilterOf(r)
	if err != nil {
		return nil, err
	}
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	res, err := p.Peek(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &wire.PeekResponse{Messages: make([]wire.PeekedMessage, len(res.Messages)), Next: res.Next}
	for i, m := range res.Messages {
		out.Messages[i] = peekedOf(r.Partition, m)
	}
	return out, nil
}

// handleStats reports each requested partition from its local leader, once
// the leader's state holds every write confirmed before (ReadBarrier); a
// partition led elsewhere carries a not-leader code and the leader's
// address in Error, so the client can ask there.
func (n *Node) handleStats(ctx context.Context, r *wire.QueueStatsRequest) (*wire.QueueStatsResponse, error) {
	_, q, err := n.leaderOf(ctx, r.Queue, 0)
	if q.Name == "" {
		return nil, err
	}
	indexes := r.Partitions
	if len(indexes) == 0 {
		for i := range q.Partitions {
			indexes = append(indexes, i)
		}
	}
	out := &wire.QueueStatsResponse{Queue: q.Name}
	for _, i := range indexes {
		var st fsm.Stats
		p, _, err := n.leaderOf(ctx, r.Queue, i)
		if err == nil {
			st, err = p.LeaderStats(ctx)
		}
		if err != nil {
			we := n.wireError(err)
			out.Partitions = append(out.Partitions, wire.PartitionStats{Partition: i, Code: we.Code, Error: we.Message})
			continue
		}
		out.Partitions = append(out.Partitions, statsOf(i, st, p.Status()))
	}
	return out, nil
}

// handleFindMessage looks a message up by id on the partition's leader.
func (n *Node) handleFindMessage(ctx context.Context, r *wire.FindMessageRequest) (*wire.FindMessageResponse, error) {
	if r.ID == "" || len(r.ID) > fsm.IDBytesMax {
		return nil, wire.Errorf(wire.CodeInvalidArgument, "find needs an id of 1..%d bytes", fsm.IDBytesMax)
	}
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	found, err := p.Find(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	out := &wire.FindMessageResponse{}
	for _, m := range found {
		out.Messages = append(out.Messages, messageInfoOf(r.Partition, m))
	}
	return out, nil
}

// handleDeleteMessage deletes one message by seq and id on the
// partition's leader.
func (n *Node) handleDeleteMessage(ctx context.Context, r *wire.DeleteMessageRequest) (*wire.DeleteMessageResponse, error) {
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	if err := p.DeleteMessage(ctx, r.Seq, r.ID, r.Undelivered); err != nil {
		return nil, err
	}
	return &wire.DeleteMessageResponse{Deleted: 1}, nil
}

// handleDeleteMessages deletes a batch of messages by seq and id, within
// a state set, on the partition's leader.
func (n *Node) handleDeleteMessages(ctx context.Context, r *wire.DeleteMessagesRequest) (*wire.DeleteMessagesResponse, error) {
	if err := r.CheckBounds(); err != nil {
		return nil, err
	}
	states, err := fsm.ParseStates(r.States)
	if err != nil {
		return nil, err
	}
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	items := make([]fsm.MessageRef, len(r.Items))
	for i, it := range r.Items {
		items[i] = fsm.MessageRef{Seq: it.Seq, ID: it.ID}
	}
	deleted, err := p.DeleteMessages(ctx, items, states)
	if err != nil {
		return nil, err
	}
	return &wire.DeleteMessagesResponse{Deleted: deleted}, nil
}

// handlePause pauses or resumes a partition's deliveries on its leader,
// in the name of the request's token.
func (n *Node) handlePause(ctx context.Context, r *wire.PauseRequest) (*wire.PauseResponse, error) {
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	st, err := p.SetPaused(ctx, r.Paused, callerName(ctx))
	if err != nil {
		return nil, err
	}
	return &wire.PauseResponse{Paused: st.Paused, PausedBy: st.By, PausedAt: st.At}, nil
}

// handlePurge deletes the ready and delayed messages of a partition on
// its leader, and the leased ones too when asked.
func (n *Node) handlePurge(ctx context.Context, r *wire.PurgeRequest) (*wire.PurgeResponse, error) {
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	count, err := p.Purge(ctx, r.IncludeLeased)
	if err != nil {
		return nil, err
	}
	return &wire.PurgeResponse{Count: count}, nil
}
