package node

import (
	"context"
	"fmt"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

// handleAck deletes the messages of an ack's receipts, answering each
// receipt on its own.
func (n *Node) handleAck(ctx context.Context, r *wire.AckRequest) (*wire.AckResponse, error) {
	res, err := n.settle(ctx, r.Queue, r.Partition, r.Receipts, func(p *partition.Partition, valid []int) ([]error, error) {
		return p.Ack(ctx, pick(r.Receipts, valid, receiptOf))
	})
	return &wire.AckResponse{Results: res}, err
}

// handleExtend moves the deadlines of an extend's leases, answering each
// item on its own.
func (n *Node) handleExtend(ctx context.Context, r *wire.ExtendRequest) (*wire.ExtendResponse, error) {
	receipts := pick(r.Items, nil, func(it wire.ExtendItem) wire.Receipt { return it.Receipt })
	res, err := n.settle(ctx, r.Queue, r.Partition, receipts, func(p *partition.Partition, valid []int) ([]error, error) {
		return p.Extend(ctx, pick(r.Items, valid, extendItemOf))
	})
	return &wire.ExtendResponse{Results: res}, err
}

// handleNack gives a nack's leased messages back for retries, answering
// each item on its own.
func (n *Node) handleNack(ctx context.Context, r *wire.NackRequest) (*wire.NackResponse, error) {
	receipts := pick(r.Items, nil, func(it wire.NackItem) wire.Receipt { return it.Receipt })
	res, err := n.settle(ctx, r.Queue, r.Partition, receipts, func(p *partition.Partition, valid []int) ([]error, error) {
		return p.Nack(ctx, pick(r.Items, valid, nackItemOf))
	})
	return &wire.NackResponse{Results: res}, err
}

// handleReject dead-letters a reject's leased messages, answering each
// item on its own.
func (n *Node) handleReject(ctx context.Context, r *wire.RejectRequest) (*wire.RejectResponse, error) {
	receipts := pick(r.Items, nil, func(it wire.RejectItem) wire.Receipt { return it.Receipt })
	res, err := n.settle(ctx, r.Queue, r.Partition, receipts, func(p *partition.Partition, valid []int) ([]error, error) {
		return p.Reject(ctx, pick(r.Items, valid, rejectItemOf))
	})
	return &wire.RejectResponse{Results: res}, err
}

// settle runs a per-item operation of the partition leader on the items
// whose receipt names this partition and maps its per-item errors back;
// an item naming another partition fails alone and is not passed on. A
// batch the FSM would refuse for its size (fsm.CheckBatch) is refused
// before the partition is looked up.
func (n *Node) settle(ctx context.Context, queue string, index int, receipts []wire.Receipt,
	run func(p *partition.Partition, valid []int) ([]error, error)) ([]wire.ItemResult, error) {
	if err := fsm.CheckBatch(len(receipts)); err != nil {
		return nil, err
	}
	p, _, err := n.leaderOf(ctx, queue, index)
	if err != nil {
		return nil, err
	}
	out := make([]wire.ItemResult, len(receipts))
	var valid []int
	for i, rc := range receipts {
		if rc.Partition != index {
			out[i] = wire.ItemResult{Code: wire.CodeInvalidArgument, Error: fmt.Sprintf("receipt of partition %d sent to partition %d", rc.Partition, index)}
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return out, nil
	}
	errs, err := run(p, valid)
	if err != nil {
		return nil, err
	}
	for k, i := range valid {
		out[i] = itemResult(errs[k])
	}
	return out, nil
}
