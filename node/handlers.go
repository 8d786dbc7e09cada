package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

// handle serves one request and always returns a response for it. ctx
// bounds the request (the server gives it at most requestTimeoutMax, from a
// context shared with other requests: see requestDeadlines). tok is the
// connection's token (nil when auth is off); authErr, when set, refuses the
// request before it is even decoded (a revoked token).
func (n *Node) handle(ctx context.Context, req wire.Request, tok *auth.Token, authErr error) wire.Response {
	start := time.Now()
	var body any
	err := authErr
	if err == nil {
		body, err = n.dispatch(ctx, req, tok)
	}
	n.metrics.observe(req.Op, codeOf(err), time.Since(start))
	if err != nil {
		return wire.ErrorResponse(req.ID, n.wireError(err))
	}
	resp, err := wire.NewResponse(req.ID, body)
	if err != nil {
		return wire.ErrorResponse(req.ID, wire.Errorf(wire.CodeInternal, "encode response: %v", err))
	}
	return resp
}

// dispatch decodes a request, checks it against tok (nil: auth off) and
// serves it; listings are cut to the queues tok may see.
func (n *Node) dispatch(ctx context.Context, req wire.Request, tok *auth.Token) (any, error) {
	out, err := n.dispatchDecoded(ctx, req, tok)
	switch r := out.(type) {
	case *wire.MetadataResponse:
		if r != nil {
			r.Queues = visibleQueues(tok, r.Queues)
		}
	case *wire.ListQueuesResponse:
		if r != nil {
			r.Queues = visibleQueues(tok, r.Queues)
		}
	}
	return out, err
}

// dispatchDecoded decodes req's body, checks it against tok and hands it
// to the handler its op's entry of the request table names (routes.go).
func (n *Node) dispatchDecoded(ctx context.Context, req wire.Request, tok *auth.Token) (any, error) {
	rt, ok := routes[req.Op]
	in := wire.NewRequestBody(req.Op)
	if !ok || in == nil {
		return nil, wire.Errorf(wire.CodeMalformed, "unknown op %d", req.Op)
	}
	if err := req.Decode(in); err != nil {
		// A field out of its range is an invalid argument; anything else
		// that does not decode is malformed.
		if errors.Is(err, wire.ErrInvalidArgument) {
			return nil, fmt.Errorf("%s request: %w", req.Op, err)
		}
		return nil, wire.Errorf(wire.CodeMalformed, "%s request: %v", req.Op, err)
	}
	queue, op := rt.action(in)
	if err := authorizeAction(tok, queue, op); err != nil {
		return nil, err
	}
	return rt.serve(n, withCaller(ctx, tok), in)
}

// leaderOf returns the local leader replica of a queue partition, or a
// not-leader error pointing at the leader (or a replica that knows it).
func (n *Node) leaderOf(ctx context.Context, queue string, index int) (*partition.Partition, meta.Queue, error) {
	q, ok := n.meta.queue(ctx, queue)
	if !ok {
		return nil, q, wire.Errorf(wire.CodeQueueNotFound, "queue %q not found", queue)
	}
	if index < 0 || index >= len(q.Partitions) {
		return nil, q, wire.Errorf(wire.CodeInvalidArgument, "queue %q has no partition %d", queue, index)
	}
	group := q.GroupID(index)
	if p := n.replicas.get(group); p != nil {
		if p.IsLeader() {
			return p, q, nil
		}
		if id, addr := p.Leader(); id != "" && id != n.cfg.ID {
			return nil, q, &partition.NotLeaderError{LeaderID: id, LeaderAddr: addr}
		}
	}
	hint := n.leaderHint(q, index)
	if hint == "" {
		// Nobody else alive is known to lead or to be able to: sending
		// the client elsewhere would be a loop (or, naming this node, a
		// false answer). Most likely the partition has lost its quorum.
		return nil, q, wire.Errorf(wire.CodeUnavailable, "no leader for partition %d of queue %q (no quorum of its replicas reachable?)", index, queue)
	}
	return nil, q, &partition.NotLeaderError{LeaderID: hint}
}

// leaderHint names the node most likely to lead a partition: the gossiped
// leader, else the first replica that gossip says is alive; never this
// node (which would have answered from its own replica), and "" when no
// other node qualifies.
func (n *Node) leaderHint(q meta.Queue, index int) string {
	if id, ok := n.members.leaderOf(q.GroupID(index)); ok && id != n.cfg.ID {
		return id
	}
	alive := make(map[string]bool)
	for _, m := range n.members.members() {
		alive[m.ID] = true
	}
	for _, id := range q.Partitions[index].Replicas {
		if id != n.cfg.ID && alive[id] {
			return id
		}
	}
	return ""
}

// handleSend proposes a send to the partition leader. A message whose
// group belongs to another partition refuses the whole request; each
// other message is answered on its own (sent, duplicate or refused).
func (n *Node) handleSend(ctx context.Context, r *wire.SendRequest) (*wire.SendResponse, error) {
	p, q, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	msgs := make([]fsm.NewMessage, len(r.Messages))
	for i, m := range r.Messages {
		if m.Group != "" && wire.PartitionFor(m.Group, len(q.Partitions)) != r.Partition {
			return nil, wire.Errorf(wire.CodeInvalidArgument, "message %d: group %q belongs to partition %d", i, m.Group, wire.PartitionFor(m.Group, len(q.Partitions)))
		}
		msgs[i] = fsm.NewMessage{ID: m.ID, Group: m.Group, Headers: m.Headers, Body: m.Body, Delay: m.Delay, Priority: uint8(m.Priority)}
	}
	sent, err := p.Send(ctx, msgs)
	if err != nil {
		return nil, err
	}
	out := &wire.SendResponse{Results: make([]wire.SendResult, len(sent))}
	for i, o := range sent {
		out.Results[i] = wire.SendResult{Seq: o.Seq, Duplicate: o.Duplicate}
		if o.Err != nil {
			out.Results[i].Code, out.Results[i].Error = codeOf(o.Err), o.Err.Error()
		}
	}
	return out, nil
}

// receiveAnswerBytesMax is the byte budget of one receive: the frame limit
// less room for the response's own framing. The FSM leases only what fits,
// so every granted lease reaches the consumer in the answer.
const receiveAnswerBytesMax = wire.MaxFrameBytes - 64<<10

// handleReceive acks the receipts a receive carries and leases messages,
// long-polling up to its Wait (see partition.ReceiveAck). A request the
// FSM would refuse (fsm.ValidateReceive) or with a negative Wait is
// refused before the partition is looked up.
func (n *Node) handleReceive(ctx context.Context, r *wire.ReceiveRequest) (*wire.ReceiveResponse, error) {
	maxCount := r.Max
	if maxCount == 0 {
		maxCount = 1
	}
	rc := fsm.ReceiveCmd{Consumer: r.Consumer, Max: maxCount, Visibility: r.Visibility, MaxBytes: receiveAnswerBytesMax}
	if err := fsm.ValidateReceive(&rc, len(r.Acks)); err != nil {
		return nil, err
	}
	if err := r.CheckWait(); err != nil {
		return nil, err
	}
	p, _, err := n.leaderOf(ctx, r.Queue, r.Partition)
	if err != nil {
		return nil, err
	}
	n.consumers.saw(r.Queue, r.Partition, r.Consumer, time.Now()) // a partition this node leads: the key is real
	acks, valid := receiveAcksOf(r)
	settled, ds, err := p.ReceiveAck(ctx, pick(r.Acks, valid, receiptOf), rc, min(r.Wait, wire.ReceiveWaitMax))
	if err != nil {
		return nil, err
	}
	for k, i := range valid {
		acks[i] = itemResult(settled[k])
	}
	out := &wire.ReceiveResponse{Messages: make([]wire.Delivery, len(ds)), AckResults: acks}
	for i, d := range ds {
		out.Messages[i] = wire.Delivery{Partition: r.Partition, Seq: d.Receipt.Seq, Attempt: d.Receipt.Attempt, ID: d.ID,
			Group: d.Group, Headers: d.Headers, Body: d.Body, EnqueuedAt: d.EnqueuedAt, Deadline: d.Deadline, Priority: wire.Priority(d.Priority)}
	}
	return out, nil
}

// receiveAcksOf answers the acks a receive carries that name another
// partition and returns the indexes of the others, to be proposed.
func receiveAcksOf(r *wire.ReceiveRequest) ([]wire.ItemResult, []int) {
	if len(r.Acks) == 0 {
		return nil, nil
	}
	out := make([]wire.ItemResult, len(r.Acks))
	valid := make([]int, 0, len(r.Acks))
	for i, rc := range r.Acks {
		if rc.Partition != r.Partition {
			out[i] = wire.ItemResult{Code: wire.CodeInvalidArgument, Error: fmt.Sprintf("receipt of partition %d sent to partition %d", rc.Partition, r.Partition)}
			continue
		}
		valid = append(valid, i)
	}
	return out, valid
}
