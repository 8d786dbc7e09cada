package node

import (
	"context"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

func (n *Node) handleAck(ctx context.Context, r *wire.AckRequest) (*wire.AckResponse, error) {
	res, err := n.settle(ctx, r.Queue, r.Partition, r.Receipts, func(p *partition.Partition, valid []int) ([]error, error) {
		receipts := make([]fsm.Receipt, len(valid))
		for k, i := range valid {
			receipts[k] = receiptOf(r.Receipts[i])
		}
		return p.Ack(ctx, receipts)
	})
	return &wire.AckResponse{Results: res}, err
}

func (n *Node) handleExtend(ctx context.Context, r *wire.ExtendRequest) (*wire.ExtendResponse, error) {
	receipts := make([]wire.Receipt, len(r.Items))
	for i, it := range r.Items {
		receipts[i] = it.Receipt
	}
	res, err := n.settle(ctx, r.Queue, r.Partition, receipts, proposeSettle(ctx, func(valid []int) fsm.Command {
		c := &fsm.ExtendCmd{Items: make([]fsm.ExtendItem, len(valid))}
		for k, i := range valid {
			c.Items[k] = fsm.ExtendItem{Receipt: receiptOf(r.Items[i].Receipt), Visibility: r.Items[i].Visibility}
		}
		return fsm.Command{Type: fsm.CmdExtend, Extend: c}
	}))
	return &wire.ExtendResponse{Results: res}, err
}

func (n *Node) handleNack(ctx context.Context, r *wire.NackRequest) (*wire.NackResponse, error) {
	receipts := make([]wire.Receipt, len(r.Items))
	for i, it := range r.Items {
		receipts[i] = it.Receipt
	}
	res, err := n.settle(ctx, r.Queue, r.Partition, receipts, proposeSettle(ctx, func(valid []int) fsm.Command {
		c := &fsm.NackCmd{Items: make([]fsm.NackItem, len(valid))}
		for k, i := range valid {
			it := r.Items[i]
			c.Items[k] = fsm.NackItem{Receipt: receiptOf(it.Receipt), ExplicitDelay: it.ExplicitDelay, Delay: it.Delay, Reason: it.Reason}
		}
		return fsm.Command{Type: fsm.CmdNack, Nack: c}
	}))
	return &wire.NackResponse{Results: res}, err
}

func (n *Node) handleReject(ctx context.Context, r *wire.RejectRequest) (*wire.RejectResponse, error) {
	receipts := make([]wire.Receipt, len(r.Items))
	for i, it := range r.Items {
		receipts[i] = it.Receipt
	}
	res, err := n.settle(ctx, r.Queue, r.Partition, receipts, proposeSettle(ctx, func(valid []int) fsm.Command {
		c := &fsm.RejectCmd{Items: make([]fsm.RejectItem, len(valid))}
		for k, i := range valid {
			c.Items[k] = fsm.RejectItem{Receipt: receiptOf(r.Items[i].Receipt), Reason: r.Items[i].Reason}
		}
		return fsm.Command{Type: fsm.CmdReject, Reject: c}
	}))
	return &wire.RejectResponse{Results: res}, err
}

// handleDeadList reads dead letters from the partition leader's state.
func (n *Node) handleDeadList(ctx context.Context, queue string, index int, f wire.DeadFilter, bodies bool) (*wire.DeadListResponse, error) {
	p, _, err := n.leaderOf(ctx, queue, index)
	if err != nil {
		return nil, err
	}
	list := p.ListDead
	if bodies {
		list = p.PeekDead
	}
	letters, err := list(deadFilterOf(f))
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

// handleStats reports each requested partition from its local leader; a
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
		p, _, err := n.leaderOf(ctx, r.Queue, i)
		if err != nil {
			we := n.wireError(err)
			out.Partitions = append(out.Partitions, wire.PartitionStats{Partition: i, Code: we.Code, Error: we.Message})
			continue
		}
		out.Partitions = append(out.Partitions, statsOf(i, p.Stats(), p.Status()))
	}
	return out, nil
}
