package node

import (
	"context"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

func (n *Node) handleAck(ctx context.Context, r *wire.AckRequest) (*wire.AckResponse, error) {
	res, err := n.settle(ctx, r.Queue, r.Partition, r.Receipts, nil, func(p *partition.Partition, valid []int) ([]error, error) {
		return p.Ack(ctx, pick(r.Receipts, valid, receiptOf))
	})
	return &wire.AckResponse{Results: res}, err
}

func (n *Node) handleExtend(ctx context.Context, r *wire.ExtendRequest) (*wire.ExtendResponse, error) {
	receipts := pick(r.Items, nil, func(it wire.ExtendItem) wire.Receipt { return it.Receipt })
	check := func(i int) error { return checkExtendItem(r.Items[i]) }
	res, err := n.settle(ctx, r.Queue, r.Partition, receipts, check, proposeSettle(ctx, func(valid []int) fsm.Command {
		items := pick(r.Items, valid, func(it wire.ExtendItem) fsm.ExtendItem {
			return fsm.ExtendItem{Receipt: receiptOf(it.Receipt), Visibility: it.Visibility}
		})
		return fsm.Command{Type: fsm.CmdExtend, Extend: &fsm.ExtendCmd{Items: items}}
	}))
	return &wire.ExtendResponse{Results: res}, err
}

func (n *Node) handleNack(ctx context.Context, r *wire.NackRequest) (*wire.NackResponse, error) {
	receipts := pick(r.Items, nil, func(it wire.NackItem) wire.Receipt { return it.Receipt })
	check := func(i int) error { return checkNackItem(r.Items[i]) }
	res, err := n.settle(ctx, r.Queue, r.Partition, receipts, check, proposeSettle(ctx, func(valid []int) fsm.Command {
		items := pick(r.Items, valid, func(it wire.NackItem) fsm.NackItem {
			return fsm.NackItem{Receipt: receiptOf(it.Receipt), ExplicitDelay: it.ExplicitDelay, Delay: it.Delay, Reason: it.Reason, Release: it.Release}
		})
		return fsm.Command{Type: fsm.CmdNack, Nack: &fsm.NackCmd{Items: items}}
	}))
	return &wire.NackResponse{Results: res}, err
}

func (n *Node) handleReject(ctx context.Context, r *wire.RejectRequest) (*wire.RejectResponse, error) {
	receipts := pick(r.Items, nil, func(it wire.RejectItem) wire.Receipt { return it.Receipt })
	res, err := n.settle(ctx, r.Queue, r.Partition, receipts, nil, proposeSettle(ctx, func(valid []int) fsm.Command {
		items := pick(r.Items, valid, func(it wire.RejectItem) fsm.RejectItem {
			return fsm.RejectItem{Receipt: receiptOf(it.Receipt), Reason: it.Reason}
		})
		return fsm.Command{Type: fsm.CmdReject, Reject: &fsm.RejectCmd{Items: items}}
	}))
	return &wire.RejectResponse{Results: res}, err
}

// handleDeadList reads dead letters from the partition leader's state,
// once it holds every write confirmed before (ReadBarrier).
func (n *Node) handleDeadList(ctx context.Context, queue string, index int, f wire.DeadFilter, bodies bool) (*wire.DeadListResponse, error) {
	p, _, err := n.leaderOf(ctx, queue, index)
	if err != nil {
		return nil, err
	}
	letters, err := p.LeaderDead(ctx, deadFilterOf(f), bodies)
	if err != nil {
		return nil, err
	}
	out := &wire.DeadListResponse{Letters: make([]wire.DeadLetter, len(letters))}
	for i, d := range letters {
		out.Letters[i] = deadLetterOf(index, d)
	}
	return out, nil
}

// handleDeadChange proposes a redrive or a dead-letter deletion.
func (n *Node) handleDeadChange(ctx context.Context, queue string, index int, t fsm.CommandType, f wire.DeadFilter) (*wire.DeadRedriveResponse, error) {
	if err := checkDeadFilter(f); err != nil {
		return nil, err
	}
	p, _, err := n.leaderOf(ctx, queue, index)
	if err != nil {
		return nil, err
	}
	filter := deadFilterOf(f)
	c := fsm.Command{Type: t, Redrive: &filter}
	if t == fsm.CmdDeleteDead {
		c = fsm.Command{Type: t, DeleteDead: &filter}
	}
	res, err := p.Propose(ctx, c)
	if err == nil {
		err = res.Err
	}
	return &wire.DeadRedriveResponse{Count: res.Count}, err
}

func (n *Node) handlePurge(ctx context.Context, r *wire.PurgeRequest) (*wire.PurgeResponse, error) {
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	res, err := p.Propose(ctx, fsm.Command{Type: fsm.CmdPurge})
	if err == nil {
		err = res.Err
	}
	return &wire.PurgeResponse{Count: res.Count}, err
}

// handlePeek reads ready messages from the partition leader, which
// confirms its leadership first.
func (n *Node) handlePeek(ctx context.Context, r *wire.PeekRequest) (*wire.PeekResponse, error) {
	if r.Max < 1 || r.Max > wire.PeekMax || r.MaxBytes < 0 || r.MaxBytes > wire.PeekBytesMax {
		return nil, wire.Errorf(wire.CodeInvalidArgument, "peek max %d (want 1..%d), max bytes %d (want 0..%d)",
			r.Max, wire.PeekMax, r.MaxBytes, wire.PeekBytesMax)
	}
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	budget := r.MaxBytes
	if budget == 0 {
		budget = wire.PeekBytesMax
	}
	res, err := p.Peek(ctx, fsm.PeekFilter{Max: r.Max, MaxBytes: budget, AfterSeq: r.AfterSeq})
	if err != nil {
		return nil, err
	}
	out := &wire.PeekResponse{Messages: make([]wire.PeekedMessage, len(res.Messages)), Next: res.Next}
	for i, m := range res.Messages {
		out.Messages[i] = wire.PeekedMessage{Partition: r.Partition, Seq: m.Seq, ID: m.ID, Group: m.Group,
			Headers: m.Headers, Body: m.Body, EnqueuedAt: m.EnqueuedAt, Attempts: m.Attempts, Blocked: m.Blocked}
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

// pick converts the items at the given indexes (all items when indexes is
// nil), keeping their order.
func pick[T, U any](items []T, indexes []int, conv func(T) U) []U {
	if indexes == nil {
		out := make([]U, len(items))
		for i, it := range items {
			out[i] = conv(it)
		}
		return out
	}
	out := make([]U, len(indexes))
	for k, i := range indexes {
		out[k] = conv(items[i])
	}
	return out
}
