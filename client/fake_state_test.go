package client_test

// The fake's state is kept by the state machines a node runs: the catalog
// by a meta.FSM, each partition by an fsm.FSM. Every request that changes
// something becomes one of their commands, stamped with the fake's clock,
// and their results (or errors) become the answer, converted as a node's
// handlers convert them. No queue rule lives here: leases, acks, nacks,
// backoff, dead letters, deduplication, limits and catalog checks are
// theirs, so the fake cannot drift from them. The conversions (wire to
// state machine types, errors to codes) mirror package node's, which are
// not exported.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wire"
)

// fakeQueue is the partitions of one catalog queue.
type fakeQueue struct {
	parts []*fakePart
}

// fakePart is one partition: its state machine and the node leading it.
type fakePart struct {
	sm     *fsm.FSM
	leader int
}

// receiveAnswerBytesMax is the byte budget of one receive's leases, as a
// node gives it: the frame limit less room for the response's framing.
const receiveAnswerBytesMax = wire.MaxFrameBytes - 64<<10

// register adds a node to the catalog, so that queues can be placed.
func (fc *fakeCluster) register(n *fakeNode) {
	res := fc.catalog.ApplyCommand(meta.Command{Type: meta.CmdRegisterNode, At: fc.clock().UnixNano(),
		RegisterNode: &meta.RegisterNodeCmd{Node: meta.Node{ID: n.id, RaftAddr: n.addr, ClientAddr: n.addr}}})
	if res.Err != nil {
		panic(fmt.Sprintf("fake: register %s: %v", n.id, res.Err))
	}
}

// addQueue creates a queue directly (no request). The zero fields of cfg
// take the catalog's defaults, except the retry backoff: 10 ms to 100 ms,
// so that tests that nack do not wait seconds.
func (fc *fakeCluster) addQueue(name string, cfg wire.QueueConfig) {
	def := wireConfigOf(meta.DefaultQueueConfig())
	def.BackoffBase, def.BackoffMax = 10*time.Millisecond, 100*time.Millisecond
	nonZeroFields(cfg).Apply(&def, cfg)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if _, err := fc.createLocked(name, def); err != nil {
		panic(fmt.Sprintf("fake: add queue %q: %v", name, err))
	}
}

// nonZeroFields names the fields of c that are not zero.
func nonZeroFields(c wire.QueueConfig) wire.ConfigFields {
	var f wire.ConfigFields
	for bit := wire.ConfigFields(1); bit&wire.AllConfigFields != 0; bit <<= 1 {
		var one wire.QueueConfig
		bit.Apply(&one, c)
		if one != (wire.QueueConfig{}) {
			f |= bit
		}
	}
	return f
}

// setLeader moves the leadership of a partition to a node.
func (fc *fakeCluster) setLeader(queue string, part, node int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.queues[queue].parts[part].leader = node
	fc.metaIndex++
}

// createLocked creates a queue in the catalog and a state machine per
// partition, partition p led by node p % nodes.
func (fc *fakeCluster) createLocked(name string, cfg wire.QueueConfig) (wire.QueueInfo, error) {
	res := fc.catalog.ApplyCommand(meta.Command{Type: meta.CmdCreateQueue, At: fc.clock().UnixNano(),
		CreateQueue: &meta.CreateQueueCmd{Name: name, Config: catalogConfigOf(cfg)}})
	if res.Err != nil {
		return wire.QueueInfo{}, res.Err
	}
	q := &fakeQueue{}
	for i := range res.Queue.Partitions {
		sm, err := fsm.New(res.Queue.Config.Queue, fsm.NewMemBodyStore())
		if err != nil {
			return wire.QueueInfo{}, err
		}
		q.parts = append(q.parts, &fakePart{sm: sm, leader: i % len(fc.nodes)})
	}
	fc.queues[name] = q
	fc.metaIndex++
	return fc.infoLocked(res.Queue), nil
}

// changeCatalog applies a create, update or delete request.
func (fc *fakeCluster) changeCatalog(body any) (any, error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	switch b := body.(type) {
	case *wire.CreateQueueRequest:
		cfg := wireConfigOf(meta.DefaultQueueConfig())
		b.Set.Apply(&cfg, b.Config)
		info, err := fc.createLocked(b.Name, cfg)
		return wire.CreateQueueResponse{Queue: info}, err
	case *wire.UpdateQueueRequest:
		cur, ok := fc.catalog.Queue(b.Name)
		if !ok {
			return nil, fmt.Errorf("%w: %q", meta.ErrQueueNotFound, b.Name)
		}
		cfg := wireConfigOf(cur.Config)
		b.Set.Apply(&cfg, b.Config)
		res := fc.catalog.ApplyCommand(meta.Command{Type: meta.CmdUpdateQueue, At: fc.clock().UnixNano(),
			UpdateQueue: &meta.UpdateQueueCmd{Name: b.Name, Config: catalogConfigOf(cfg)}})
		if res.Err != nil {
			return nil, res.Err
		}
		for _, p := range fc.queues[b.Name].parts {
			if r := fc.applyLocked(p, fsm.Command{Type: fsm.CmdSetConfig, SetConfig: &res.Queue.Config.Queue}); r.Err != nil {
				return nil, r.Err
			}
		}
		fc.metaIndex++
		return wire.UpdateQueueResponse{Queue: fc.infoLocked(res.Queue)}, nil
	case *wire.DeleteQueueRequest:
		res := fc.catalog.ApplyCommand(meta.Command{Type: meta.CmdDeleteQueue, At: fc.clock().UnixNano(),
			DeleteQueue: &meta.DeleteQueueCmd{Name: b.Name}})
		if res.Err != nil {
			return nil, res.Err
		}
		delete(fc.queues, b.Name)
		fc.metaIndex++
		return wire.DeleteQueueResponse{}, nil
	}
	return nil, wire.Errorf(wire.CodeMalformed, "not a catalog op")
}

// partLocked returns a partition of a queue.
func (fc *fakeCluster) partLocked(queue string, index int) (*fakePart, error) {
	q := fc.queues[queue]
	if q == nil {
		return nil, wire.Errorf(wire.CodeQueueNotFound, "queue %q not found", queue)
	}
	if index < 0 || index >= len(q.parts) {
		return nil, wire.Errorf(wire.CodeInvalidArgument, "queue %q has no partition %d", queue, index)
	}
	return q.parts[index], nil
}

// infoLocked renders a catalog queue with the fake's leaders.
func (fc *fakeCluster) infoLocked(mq meta.Queue) wire.QueueInfo {
	qi := wire.QueueInfo{Name: mq.Name, Config: wireConfigOf(mq.Config)}
	for i, p := range fc.queues[mq.Name].parts {
		n := fc.nodes[p.leader]
		qi.Partitions = append(qi.Partitions, wire.PartitionInfo{Index: i, Leader: n.id, LeaderAddr: n.addr})
	}
	return qi
}

// metadata answers a metadata request: every node, and one queue or all.
func (fc *fakeCluster) metadata(queue string) (any, error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	md := wire.MetadataResponse{MetaIndex: fc.metaIndex}
	for _, n := range fc.nodes {
		md.Nodes = append(md.Nodes, wire.NodeInfo{ID: n.id, ClientAddr: n.addr, State: wire.NodeAlive})
	}
	if queue != "" {
		mq, ok := fc.catalog.Queue(queue)
		if !ok {
			return nil, wire.Errorf(wire.CodeQueueNotFound, "queue %q not found", queue)
		}
		md.Queues = []wire.QueueInfo{fc.infoLocked(mq)}
		return md, nil
	}
	md.Queues = fc.listQueuesLocked("")
	return md, nil
}

// listQueues answers a list-queues request.
func (fc *fakeCluster) listQueues(prefix string) any {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return wire.ListQueuesResponse{Queues: fc.listQueuesLocked(prefix)}
}

// listQueuesLocked lists the queues whose name starts with prefix, by
// name.
func (fc *fakeCluster) listQueuesLocked(prefix string) []wire.QueueInfo {
	var out []wire.QueueInfo
	for _, mq := range fc.catalog.Queues() {
		if strings.HasPrefix(mq.Name, prefix) {
			out = append(out, fc.infoLocked(mq))
		}
	}
	return out
}

// stats answers as a real node does: figures for the partitions node
// leads, a not-leader entry for the others.
func (fc *fakeCluster) stats(node int, req wire.QueueStatsRequest) (any, error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	q := fc.queues[req.Queue]
	if q == nil {
		return nil, wire.Errorf(wire.CodeQueueNotFound, "queue %q not found", req.Queue)
	}
	resp := wire.QueueStatsResponse{Queue: req.Queue}
	for i, p := range q.parts {
		if len(req.Partitions) > 0 && !slices.Contains(req.Partitions, i) {
			continue
		}
		if p.leader != node {
			resp.Partitions = append(resp.Partitions, wire.PartitionStats{Partition: i,
				Code: wire.CodeNotLeader, Error: "not the leader"})
			continue
		}
		resp.Partitions = append(resp.Partitions, statsOf(i, fc.nodes[node].id, p.sm.Stats()))
	}
	return resp, nil
}

// applyLocked stamps c with the fake's clock and applies it to p, then
// counts the leases held and wakes the long polls (unless c is a receive
// that leased nothing, which would only wake them for nothing).
func (fc *fakeCluster) applyLocked(p *fakePart, c fsm.Command) fsm.Result {
	c.At = fc.clock().UnixNano()
	res := p.sm.ApplyCommand(c)
	n := 0
	for _, q := range fc.queues {
		for _, qp := range q.parts {
			n += int(qp.sm.Stats().InFlight)
		}
	}
	fc.inFlight, fc.inFlightHi = n, max(fc.inFlightHi, n)
	if (c.Type != fsm.CmdReceive && c.Type != fsm.CmdReceiveAck) || len(res.Delivered) > 0 {
		fc.notifyLocked()
	}
	return res
}

// receiveAckLocked applies one receive of p, partition req.Partition,
// with its acks if it carries any; acks naming another partition fail
// alone.
func (fc *fakeCluster) receiveAckLocked(p *fakePart, req wire.ReceiveRequest) (wire.ReceiveResponse, error) {
	rc := fsm.ReceiveCmd{Consumer: req.Consumer, Max: max(req.Max, 1), Visibility: req.Visibility,
		MaxBytes: receiveAnswerBytesMax}
	var out wire.ReceiveResponse
	var res fsm.Result
	if len(req.Acks) == 0 {
		res = fc.applyLocked(p, fsm.Command{Type: fsm.CmdReceive, Receive: &rc})
	} else {
		var err error
		out.AckResults, err = fc.settleLocked(p, req.Partition, req.Acks, func(valid []int) fsm.Command {
			return fsm.Command{Type: fsm.CmdReceiveAck, ReceiveAck: &fsm.ReceiveAckCmd{
				Receipts: pick(req.Acks, valid, receiptOf), Receive: rc}}
		}, &res)
		if err != nil {
			return wire.ReceiveResponse{}, err
		}
		if res.Type == 0 { // every ack named another partition
			res = fc.applyLocked(p, fsm.Command{Type: fsm.CmdReceive, Receive: &rc})
		}
	}
	if res.Err != nil {
		return wire.ReceiveResponse{}, res.Err
	}
	for _, d := range res.Delivered {
		out.Messages = append(out.Messages, wire.Delivery{Partition: req.Partition, Seq: d.Receipt.Seq,
			Attempt: d.Receipt.Attempt, ID: d.ID, Group: d.Group, Headers: d.Headers, Body: d.Body,
			EnqueuedAt: d.EnqueuedAt, Deadline: d.Deadline, Priority: wire.Priority(d.Priority)})
	}
	return out, nil
}

// partOpLocked applies a partition request other than a receive to p,
// partition index.
func (fc *fakeCluster) partOpLocked(p *fakePart, index int, body any) (any, error) {
	switch b := body.(type) {
	case *wire.SendRequest:
		return fc.sendLocked(p, index, b)
	case *wire.AckRequest:
		res, err := fc.settleLocked(p, index, b.Receipts, func(valid []int) fsm.Command {
			return fsm.Command{Type: fsm.CmdAck, Ack: &fsm.AckCmd{Receipts: pick(b.Receipts, valid, receiptOf)}}
		}, nil)
		return wire.AckResponse{Results: res}, err
	case *wire.ExtendRequest:
		receipts := pick(b.Items, nil, func(it wire.ExtendItem) wire.Receipt { return it.Receipt })
		res, err := fc.settleLocked(p, index, receipts, func(valid []int) fsm.Command {
			return fsm.Command{Type: fsm.CmdExtend, Extend: &fsm.ExtendCmd{Items: pick(b.Items, valid, extendItemOf)}}
		}, nil)
		return wire.ExtendResponse{Results: res}, err
	case *wire.NackRequest:
		receipts := pick(b.Items, nil, func(it wire.NackItem) wire.Receipt { return it.Receipt })
		res, err := fc.settleLocked(p, index, receipts, func(valid []int) fsm.Command {
			return fsm.Command{Type: fsm.CmdNack, Nack: &fsm.NackCmd{Items: pick(b.Items, valid, nackItemOf)}}
		}, nil)
		return wire.NackResponse{Results: res}, err
	case *wire.RejectRequest:
		receipts := pick(b.Items, nil, func(it wire.RejectItem) wire.Receipt { return it.Receipt })
		res, err := fc.settleLocked(p, index, receipts, func(valid []int) fsm.Command {
			return fsm.Command{Type: fsm.CmdReject, Reject: &fsm.RejectCmd{Items: pick(b.Items, valid, rejectItemOf)}}
		}, nil)
		return wire.RejectResponse{Results: res}, err
	case *wire.PurgeRequest:
		t := fsm.CmdPurge
		if b.IncludeLeased {
			t = fsm.CmdPurgeAll
		}
		res := fc.applyLocked(p, fsm.Command{Type: t})
		return wire.PurgeResponse{Count: res.Count}, res.Err
	case *wire.PeekRequest:
		return peekLocked(p, index, b)
	case *wire.DeleteMessagesRequest:
		states, err := fsm.ParseStates(b.States)
		if err != nil {
			return nil, err
		}
		c := fsm.DeleteMessagesCmd{States: states}
		for _, it := range b.Items {
			c.Items = append(c.Items, fsm.MessageRef{Seq: it.Seq, ID: it.ID})
		}
		res := fc.applyLocked(p, fsm.Command{Type: fsm.CmdDeleteMessages, DeleteMany: &c})
		return wire.DeleteMessagesResponse{Deleted: res.Count}, res.Err
	}
	return fc.deadOpLocked(p, index, body)
}

// peekLocked serves a peek of p, partition index, as a node does.
func peekLocked(p *fakePart, index int, r *wire.PeekRequest) (any, error) {
	if err := r.CheckBounds(); err != nil {
		return nil, err
	}
	states, err := fsm.ParseStates(r.States)
	if err != nil {
		return nil, err
	}
	res, err := p.sm.Peek(fsm.PeekFilter{Max: r.Max, MaxBytes: cmp.Or(r.MaxBytes, wire.PeekBytesMax), AfterSeq: r.AfterSeq,
		States: states, Group: r.Group, HeaderKey: r.HeaderKey, HeaderValue: r.HeaderValue, MinAge: r.OlderThan, NoBodies: r.NoBodies})
	if err != nil {
		return nil, err
	}
	out := wire.PeekResponse{Next: res.Next}
	for _, m := range res.Messages {
		out.Messages = append(out.Messages, wire.PeekedMessage{Partition: index, Seq: m.Seq, ID: m.ID, Group: m.Group,
			Headers: m.Headers, Body: m.Body, EnqueuedAt: m.EnqueuedAt, Attempts: m.Attempts, Blocked: m.Blocked,
			Priority: wire.Priority(m.Priority), State: string(m.State), VisibleAt: m.VisibleAt, Consumer: m.Consumer})
	}
	return out, nil
}

// sendLocked applies a send. A message whose group belongs to another
// partition refuses the whole request, as on a node.
func (fc *fakeCluster) sendLocked(p *fakePart, index int, r *wire.SendRequest) (any, error) {
	parts := len(fc.queues[r.Queue].parts)
	msgs := make([]fsm.NewMessage, len(r.Messages))
	for i, m := range r.Messages {
		if m.Group != "" && wire.PartitionFor(m.Group, parts) != index {
			return nil, wire.Errorf(wire.CodeInvalidArgument, "message %d: group %q belongs to partition %d",
				i, m.Group, wire.PartitionFor(m.Group, parts))
		}
		msgs[i] = fsm.NewMessage{ID: m.ID, Group: m.Group, Headers: m.Headers, Body: m.Body, Delay: m.Delay,
			Priority: uint8(m.Priority)}
	}
	res := fc.applyLocked(p, fsm.Command{Type: fsm.CmdSend, Send: &fsm.SendCmd{Messages: msgs}})
	if res.Err != nil {
		return nil, res.Err
	}
	out := wire.SendResponse{Results: make([]wire.SendResult, len(res.Sent))}
	for i, o := range res.Sent {
		out.Results[i] = wire.SendResult{Seq: o.Seq, Duplicate: o.Duplicate}
		if o.Err != nil {
			out.Results[i].Code, out.Results[i].Error = codeOf(o.Err), o.Err.Error()
		}
	}
	return out, nil
}

// settleLocked applies the command cmd builds from the items whose
// receipt names partition index, and answers each item; an item naming
// another partition fails alone, as on a node. The command's result goes
// to *res too when res is not nil.
func (fc *fakeCluster) settleLocked(p *fakePart, index int, receipts []wire.Receipt,
	cmd func(valid []int) fsm.Command, res *fsm.Result) ([]wire.ItemResult, error) {
	out := make([]wire.ItemResult, len(receipts))
	var valid []int
	for i, r := range receipts {
		if r.Partition != index {
			out[i] = wire.ItemResult{Code: wire.CodeInvalidArgument,
				Error: fmt.Sprintf("receipt of partition %d sent to partition %d", r.Partition, index)}
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) == 0 && len(receipts) > 0 {
		return out, nil
	}
	r := fc.applyLocked(p, cmd(valid))
	if res != nil {
		*res = r
	}
	if r.Err != nil {
		return nil, r.Err
	}
	for k, i := range valid {
		out[i] = itemOf(r.Settled[k])
	}
	return out, nil
}

// deadOpLocked applies a dead-letter request to p, partition index.
func (fc *fakeCluster) deadOpLocked(p *fakePart, index int, body any) (any, error) {
	switch b := body.(type) {
	case *wire.DeadListRequest:
		letters, err := p.sm.ListDead(deadFilterOf(b.Filter))
		return wire.DeadListResponse{Letters: lettersOf(index, letters)}, err
	case *wire.DeadPeekRequest:
		letters, more, err := p.sm.PeekDead(deadFilterOf(b.Filter), wire.PeekBytesMax)
		resp := wire.DeadPeekResponse{Letters: lettersOf(index, letters)}
		if more {
			resp.Next = letters[len(letters)-1].Seq
		}
		return resp, err
	case *wire.DeadRedriveRequest:
		f := deadFilterOf(b.Filter)
		res := fc.applyLocked(p, fsm.Command{Type: fsm.CmdRedrive, Redrive: &f})
		return wire.DeadRedriveResponse{Count: res.Count}, res.Err
	case *wire.DeadDeleteRequest:
		f := deadFilterOf(b.Filter)
		res := fc.applyLocked(p, fsm.Command{Type: fsm.CmdDeleteDead, DeleteDead: &f})
		return wire.DeadDeleteResponse{Count: res.Count}, res.Err
	}
	return nil, wire.Errorf(wire.CodeMalformed, "unexpected request %T", body)
}

// The conversions below mirror package node's (convert.go).

// stateCodes maps the state machines' errors to wire codes.
var stateCodes = []struct {
	err  error
	code wire.Code
}{
	{fsm.ErrInvalidConfig, wire.CodeInvalidConfig}, // meta.ErrInvalidConfig too
	{fsm.ErrInvalidArgument, wire.CodeInvalidArgument},
	{fsm.ErrMessageTooLarge, wire.CodeMessageTooLarge},
	{fsm.ErrQueueFull, wire.CodeQueueFull},
	{fsm.ErrLeaseLost, wire.CodeLeaseLost},
	{fsm.ErrNotFound, wire.CodeMessageNotFound},
	{fsm.ErrClockStep, wire.CodeUnavailable},
	{meta.ErrInvalidArgument, wire.CodeInvalidArgument},
	{meta.ErrInvalidName, wire.CodeInvalidArgument},
	{meta.ErrNotEnoughNodes, wire.CodeInvalidConfig},
	{meta.ErrQueueNotFound, wire.CodeQueueNotFound},
	{meta.ErrQueueExists, wire.CodeQueueExists},
	{meta.ErrLimitExceeded, wire.CodeLimitExceeded},
}

// codeOf is the wire code of an error of the fake or its state machines.
func codeOf(err error) wire.Code {
	var we *wire.Error
	if err == nil || errors.As(err, &we) {
		return wire.CodeOf(err)
	}
	for _, c := range stateCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return wire.CodeInternal
}

// wireErrorOf is err as a node puts it on the wire.
func wireErrorOf(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	return &wire.Error{Code: codeOf(err), Message: err.Error()}
}

// itemOf is the per-item form of err.
func itemOf(err error) wire.ItemResult {
	if err == nil {
		return wire.ItemResult{}
	}
	return wire.ItemResult{Code: codeOf(err), Error: err.Error()}
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

// receiptOf is the state machine's form of a receipt (its partition is
// the caller's to check).
func receiptOf(r wire.Receipt) fsm.Receipt { return fsm.Receipt{Seq: r.Seq, Attempt: r.Attempt} }

// extendItemOf is the state machine's form of an extend item.
func extendItemOf(it wire.ExtendItem) fsm.ExtendItem {
	return fsm.ExtendItem{Receipt: receiptOf(it.Receipt), Visibility: it.Visibility}
}

// nackItemOf is the state machine's form of a nack item.
func nackItemOf(it wire.NackItem) fsm.NackItem {
	return fsm.NackItem{Receipt: receiptOf(it.Receipt), ExplicitDelay: it.ExplicitDelay, Delay: it.Delay,
		Reason: it.Reason, Release: it.Release}
}

// rejectItemOf is the state machine's form of a reject item.
func rejectItemOf(it wire.RejectItem) fsm.RejectItem {
	return fsm.RejectItem{Receipt: receiptOf(it.Receipt), Reason: it.Reason}
}

// deadFilterOf is the state machine's form of a dead-letter filter.
func deadFilterOf(f wire.DeadFilter) fsm.DeadFilter {
	return fsm.DeadFilter{Seqs: f.Seqs, Reason: fsm.DeadReason(f.Reason), Group: f.Group,
		FromAt: f.FromAt, ToAt: f.ToAt, AfterSeq: f.AfterSeq, Limit: f.Limit, Text: f.Text}
}

// lettersOf converts dead letters of partition index to the wire.
func lettersOf(index int, ds []fsm.DeadLetter) []wire.DeadLetter {
	var out []wire.DeadLetter
	for _, d := range ds {
		l := wire.DeadLetter{
			Partition: index, Seq: d.Seq, ID: d.ID, Group: d.Group, Headers: d.Headers, Body: d.Body,
			Bytes: d.Bytes, Attempts: d.Attempts, FirstEnqueuedAt: d.FirstEnqueuedAt, EnqueuedAt: d.EnqueuedAt,
			FirstDeliveredAt: d.FirstDeliveredAt, LastDeliveredAt: d.LastDeliveredAt, DeadAt: d.DeadAt,
			Reason: wire.DeadReason(d.Reason), ReasonText: d.ReasonText, LastConsumer: d.LastConsumer,
			Priority: wire.Priority(d.Priority),
		}
		for _, e := range d.History {
			l.History = append(l.History, wire.Event{Kind: wire.EventKind(e.Kind), At: e.At, Attempt: e.Attempt,
				Consumer: e.Consumer, Reason: e.Reason})
		}
		out = append(out, l)
	}
	return out
}

// statsOf renders a partition's stats as reported by leader.
func statsOf(index int, leader string, st fsm.Stats) wire.PartitionStats {
	c := st.Counters
	return wire.PartitionStats{
		Partition: index, Leader: leader,
		Ready: st.Ready, Eligible: st.Eligible, Delayed: st.Delayed, InFlight: st.InFlight, Dead: st.Dead,
		Bytes: st.Bytes, DeadBytes: st.DeadBytes, OldestEligibleAge: st.OldestEligibleAge, Groups: st.Groups,
		LastSeq: st.LastSeq,
		Counters: wire.Counters{Sent: c.Sent, Duplicates: c.Duplicates, Leased: c.Leased, Acked: c.Acked,
			Nacked: c.Nacked, Rejected: c.Rejected, Expired: c.Expired, DeadLettered: c.DeadLettered,
			Redriven: c.Redriven, DeadDeleted: c.DeadDeleted, Purged: c.Purged, RetentionExpired: c.RetentionExpired,
			DeadEvicted: c.DeadEvicted, DeadExpired: c.DeadExpired, DedupEvicted: c.DedupEvicted},
	}
}

// wireConfigOf renders a catalog config for the wire, setting by setting
// through fsm's settings table (as node does).
func wireConfigOf(c meta.QueueConfig) wire.QueueConfig {
	w := wire.QueueConfig{Partitions: c.Partitions, Replicas: c.Replicas}
	for _, s := range fsm.Settings() {
		f, _ := wire.ConfigFieldNamed(s.Name)
		w.Set(f, s.Get(c.Queue))
	}
	return w
}

// catalogConfigOf is the inverse of wireConfigOf.
func catalogConfigOf(w wire.QueueConfig) meta.QueueConfig {
	c := meta.QueueConfig{Partitions: w.Partitions, Replicas: w.Replicas}
	for _, s := range fsm.Settings() {
		f, _ := wire.ConfigFieldNamed(s.Name)
		s.Set(&c.Queue, w.Get(f))
	}
	return c
}
