package client_test

import (
	"slices"
	"strings"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// fakeQueue is one queue of the fake.
type fakeQueue struct {
	name  string
	cfg   wire.QueueConfig
	parts []*fakePart
}

// fakePart is one partition: live messages in seq order, dead letters,
// the dedup table.
type fakePart struct {
	index   int
	leader  int
	lastSeq uint64
	msgs    []*fakeMsg
	dead    []*fakeMsg
	dedup   map[string]uint64
}

type fakeMsg struct {
	seq        uint64
	m          wire.Message
	enqueued   time.Time
	visibleAt  time.Time
	attempts   uint32
	leased     bool
	deadline   time.Time
	deadAt     time.Time
	deadReason wire.DeadReason
	reason     string
}

func (m *fakeMsg) bytes() int {
	n := len(m.m.Body)
	for k, v := range m.m.Headers {
		n += len(k) + len(v)
	}
	return n
}

// addQueue creates a queue directly (no request), with partition p led by
// node p % nodes. The fake's defaults fill the zero fields of cfg.
func (fc *fakeCluster) addQueue(name string, cfg wire.QueueConfig) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.addQueueLocked(name, cfg)
}

func (fc *fakeCluster) addQueueLocked(name string, cfg wire.QueueConfig) *fakeQueue {
	def := wire.QueueConfig{Partitions: 1, Replicas: 3, VisibilityTimeout: 30 * time.Second, MaxReceives: 10,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond, DedupWindow: 5 * time.Minute,
		MaxMessageBytes: 1 << 20}
	nonZeroFields(cfg).Apply(&def, cfg)
	q := &fakeQueue{name: name, cfg: def}
	for i := range def.Partitions {
		q.parts = append(q.parts, &fakePart{index: i, leader: i % len(fc.nodes), dedup: map[string]uint64{}})
	}
	fc.queues[name] = q
	fc.metaIndex++
	return q
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

func (fc *fakeCluster) partLocked(queue string, part int) (*fakePart, error) {
	q := fc.queues[queue]
	if q == nil {
		return nil, wire.Errorf(wire.CodeQueueNotFound, "queue %q", queue)
	}
	if part < 0 || part >= len(q.parts) {
		return nil, wire.Errorf(wire.CodeInvalidArgument, "no partition %d", part)
	}
	return q.parts[part], nil
}

func (fc *fakeCluster) info(q *fakeQueue) wire.QueueInfo {
	qi := wire.QueueInfo{Name: q.name, Config: q.cfg}
	for _, p := range q.parts {
		n := fc.nodes[p.leader]
		qi.Partitions = append(qi.Partitions, wire.PartitionInfo{Index: p.index, Leader: n.id, LeaderAddr: n.addr})
	}
	return qi
}

func (fc *fakeCluster) metadata(queue string) (any, error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	md := wire.MetadataResponse{MetaIndex: fc.metaIndex}
	for _, n := range fc.nodes {
		md.Nodes = append(md.Nodes, wire.NodeInfo{ID: n.id, ClientAddr: n.addr, State: wire.NodeAlive})
	}
	if queue != "" {
		q := fc.queues[queue]
		if q == nil {
			return nil, wire.Errorf(wire.CodeQueueNotFound, "queue %q", queue)
		}
		md.Queues = []wire.QueueInfo{fc.info(q)}
		return md, nil
	}
	md.Queues = fc.listQueuesLocked("")
	return md, nil
}

func (fc *fakeCluster) listQueues(prefix string) any {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return wire.ListQueuesResponse{Queues: fc.listQueuesLocked(prefix)}
}

func (fc *fakeCluster) listQueuesLocked(prefix string) []wire.QueueInfo {
	var out []wire.QueueInfo
	for _, q := range fc.queues {
		if strings.HasPrefix(q.name, prefix) {
			out = append(out, fc.info(q))
		}
	}
	slices.SortFunc(out, func(a, b wire.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (fc *fakeCluster) catalog(body any) (any, error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	switch b := body.(type) {
	case *wire.CreateQueueRequest:
		if fc.queues[b.Name] != nil {
			return nil, wire.Errorf(wire.CodeQueueExists, "queue %q", b.Name)
		}
		if b.Set.Has(wire.FieldPartitions) && (b.Config.Partitions < 1 || b.Config.Partitions > 64) {
			return nil, wire.Errorf(wire.CodeInvalidConfig, "partitions %d", b.Config.Partitions)
		}
		q := fc.addQueueLocked(b.Name, wire.QueueConfig{})
		b.Set.Apply(&q.cfg, b.Config)
		q.parts = q.parts[:0]
		for i := range q.cfg.Partitions {
			q.parts = append(q.parts, &fakePart{index: i, leader: i % len(fc.nodes), dedup: map[string]uint64{}})
		}
		return wire.CreateQueueResponse{Queue: fc.info(q)}, nil
	case *wire.UpdateQueueRequest:
		q := fc.queues[b.Name]
		if q == nil {
			return nil, wire.Errorf(wire.CodeQueueNotFound, "queue %q", b.Name)
		}
		if b.Set&(wire.FieldPartitions|wire.FieldReplicas) != 0 {
			return nil, wire.Errorf(wire.CodeInvalidConfig, "partitions and replicas are fixed")
		}
		b.Set.Apply(&q.cfg, b.Config)
		fc.metaIndex++
		return wire.UpdateQueueResponse{Queue: fc.info(q)}, nil
	case *wire.DeleteQueueRequest:
		if fc.queues[b.Name] == nil {
			return nil, wire.Errorf(wire.CodeQueueNotFound, "queue %q", b.Name)
		}
		delete(fc.queues, b.Name)
		fc.metaIndex++
		return wire.DeleteQueueResponse{}, nil
	}
	return nil, wire.Errorf(wire.CodeMalformed, "not a catalog op")
}

// stats answers as a real node does: figures for the partitions node
// leads, a not-leader entry for the others.
func (fc *fakeCluster) stats(node int, req wire.QueueStatsRequest) (any, error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	q := fc.queues[req.Queue]
	if q == nil {
		return nil, wire.Errorf(wire.CodeQueueNotFound, "queue %q", req.Queue)
	}
	resp := wire.QueueStatsResponse{Queue: req.Queue}
	for _, p := range q.parts {
		if len(req.Partitions) > 0 && !slices.Contains(req.Partitions, p.index) {
			continue
		}
		if p.leader != node {
			resp.Partitions = append(resp.Partitions, wire.PartitionStats{Partition: p.index,
				Code: wire.CodeNotLeader, Error: "not the leader"})
			continue
		}
		st := wire.PartitionStats{Partition: p.index, Leader: fc.nodes[p.leader].id, LastSeq: p.lastSeq,
			Dead: int64(len(p.dead))}
		for _, m := range p.msgs {
			if m.leased {
				st.InFlight++
			} else {
				st.Ready++
			}
		}
		resp.Partitions = append(resp.Partitions, st)
	}
	return resp, nil
}

// leaseLocked leases the eligible messages of p: visible, not leased, and
// the head of their group with no other message of the group leased.
func (fc *fakeCluster) leaseLocked(p *fakePart, req wire.ReceiveRequest, now time.Time) []wire.Delivery {
	q := fc.queues[req.Queue]
	vis := req.Visibility
	if vis == 0 {
		vis = q.cfg.VisibilityTimeout
	}
	blocked := map[string]bool{}
	var out []wire.Delivery
	for _, m := range p.msgs {
		if m.leased && now.After(m.deadline) {
			m.leased = false // lazy lease expiry
		}
		eligible := !m.leased && !now.Before(m.visibleAt)
		if m.m.Group != "" {
			if blocked[m.m.Group] {
				eligible = false
			}
			blocked[m.m.Group] = true
		}
		if !eligible || len(out) >= max(req.Max, 1) {
			continue
		}
		m.leased, m.deadline = true, now.Add(vis)
		m.attempts++
		out = append(out, wire.Delivery{Partition: p.index, Seq: m.seq, Attempt: m.attempts, ID: m.m.ID,
			Group: m.m.Group, Headers: m.m.Headers, Body: m.m.Body,
			EnqueuedAt: m.enqueued.UnixNano(), Deadline: m.deadline.UnixNano()})
	}
	fc.countLeasesLocked()
	return out
}

func (fc *fakeCluster) countLeasesLocked() {
	n := 0
	for _, q := range fc.queues {
		for _, p := range q.parts {
			for _, m := range p.msgs {
				if m.leased {
					n++
				}
			}
		}
	}
	fc.inFlight = n
	fc.inFlightHi = max(fc.inFlightHi, n)
}

// partOp applies a partition request other than receive.
func (fc *fakeCluster) partOp(p *fakePart, body any, now time.Time) (any, error) {
	defer fc.countLeasesLocked()
	switch b := body.(type) {
	case *wire.SendRequest:
		q := fc.queues[b.Queue]
		resp := wire.SendResponse{}
		for _, m := range b.Messages {
			resp.Results = append(resp.Results, p.send(q, m, now))
		}
		return resp, nil
	case *wire.AckRequest:
		resp := wire.AckResponse{}
		for _, r := range b.Receipts {
			resp.Results = append(resp.Results, item(p.settle(r, func(m *fakeMsg) { p.remove(m) })))
		}
		return resp, nil
	case *wire.ExtendRequest:
		resp := wire.ExtendResponse{}
		for _, it := range b.Items {
			resp.Results = append(resp.Results, item(p.settle(it.Receipt, func(m *fakeMsg) {
				m.deadline = now.Add(it.Visibility)
			})))
		}
		return resp, nil
	case *wire.NackRequest:
		q := fc.queues[b.Queue]
		resp := wire.NackResponse{}
		for _, it := range b.Items {
			resp.Results = append(resp.Results, item(p.settle(it.Receipt, func(m *fakeMsg) {
				if it.Release {
					m.leased, m.visibleAt = false, now
					m.attempts--
					return
				}
				m.leased, m.reason = false, it.Reason
				delay := q.cfg.BackoffBase
				if it.ExplicitDelay {
					delay = it.Delay
				}
				m.visibleAt = now.Add(delay)
				if q.cfg.MaxReceives > 0 && int(m.attempts) >= q.cfg.MaxReceives {
					p.bury(m, wire.DeadRetriesExhausted, it.Reason, now)
				}
			})))
		}
		return resp, nil
	case *wire.RejectRequest:
		resp := wire.RejectResponse{}
		for _, it := range b.Items {
			resp.Results = append(resp.Results, item(p.settle(it.Receipt, func(m *fakeMsg) {
				p.bury(m, wire.DeadRejected, it.Reason, now)
			})))
		}
		return resp, nil
	case *wire.PurgeRequest:
		n := 0
		p.msgs = slices.DeleteFunc(p.msgs, func(m *fakeMsg) bool {
			if !m.leased {
				n++
			}
			return !m.leased
		})
		return wire.PurgeResponse{Count: n}, nil
	}
	return fc.deadOp(p, body)
}

func item(err error) wire.ItemResult {
	if err == nil {
		return wire.ItemResult{}
	}
	return wire.ItemResult{Code: wire.CodeOf(err), Error: err.Error()}
}

// send stores one message, or says why not.
func (p *fakePart) send(q *fakeQueue, m wire.Message, now time.Time) wire.SendResult {
	fail := func(code wire.Code, msg string) wire.SendResult { return wire.SendResult{Code: code, Error: msg} }
	switch {
	case m.ID == "":
		return fail(wire.CodeInvalidArgument, "empty id")
	case m.Group != "" && wire.PartitionFor(m.Group, len(q.parts)) != p.index:
		return fail(wire.CodeInvalidArgument, "group routed to the wrong partition")
	case len(m.Body) > q.cfg.MaxMessageBytes:
		return fail(wire.CodeMessageTooLarge, "too large")
	}
	if seq, ok := p.dedup[m.ID]; ok {
		return wire.SendResult{Seq: seq, Duplicate: true}
	}
	if q.cfg.MaxDepth > 0 && int64(len(p.msgs)) >= q.cfg.MaxDepth {
		return fail(wire.CodeQueueFull, "max depth")
	}
	p.lastSeq++
	p.dedup[m.ID] = p.lastSeq
	p.msgs = append(p.msgs, &fakeMsg{seq: p.lastSeq, m: m, enqueued: now, visibleAt: now.Add(m.Delay)})
	return wire.SendResult{Seq: p.lastSeq}
}

// settle checks a receipt and applies f to its leased message.
func (p *fakePart) settle(r wire.Receipt, f func(m *fakeMsg)) error {
	for _, m := range p.msgs {
		if m.seq != r.Seq {
			continue
		}
		if !m.leased || m.attempts != r.Attempt {
			return wire.Errorf(wire.CodeLeaseLost, "seq %d attempt %d", r.Seq, r.Attempt)
		}
		f(m)
		return nil
	}
	for _, m := range p.dead {
		if m.seq == r.Seq {
			return wire.Errorf(wire.CodeLeaseLost, "seq %d was dead-lettered", r.Seq)
		}
	}
	return wire.Errorf(wire.CodeMessageNotFound, "seq %d", r.Seq)
}

func (p *fakePart) remove(m *fakeMsg) {
	p.msgs = slices.DeleteFunc(p.msgs, func(x *fakeMsg) bool { return x == m })
}

func (p *fakePart) bury(m *fakeMsg, why wire.DeadReason, reason string, now time.Time) {
	p.remove(m)
	m.leased, m.deadAt, m.deadReason, m.reason = false, now, why, reason
	p.dead = append(p.dead, m)
}

// deadOp applies a dead-letter request.
func (fc *fakeCluster) deadOp(p *fakePart, body any) (any, error) {
	switch b := body.(type) {
	case *wire.DeadListRequest:
		return wire.DeadListResponse{Letters: p.letters(b.Filter, false)}, nil
	case *wire.DeadPeekRequest:
		return wire.DeadPeekResponse{Letters: p.letters(b.Filter, true)}, nil
	case *wire.DeadRedriveRequest:
		n := 0
		for _, l := range p.letters(b.Filter, false) {
			m := p.takeDead(l.Seq)
			m.attempts, m.visibleAt = 0, time.Time{}
			p.msgs = append(p.msgs, m)
			n++
		}
		slices.SortFunc(p.msgs, func(a, b *fakeMsg) int { return int(a.seq) - int(b.seq) })
		return wire.DeadRedriveResponse{Count: n}, nil
	case *wire.DeadDeleteRequest:
		n := 0
		for _, l := range p.letters(b.Filter, false) {
			p.takeDead(l.Seq)
			n++
		}
		return wire.DeadDeleteResponse{Count: n}, nil
	}
	return nil, wire.Errorf(wire.CodeMalformed, "unexpected request %T", body)
}

func (p *fakePart) takeDead(seq uint64) *fakeMsg {
	i := slices.IndexFunc(p.dead, func(m *fakeMsg) bool { return m.seq == seq })
	m := p.dead[i]
	p.dead = slices.Delete(p.dead, i, i+1)
	return m
}

// letters selects dead letters by filter, in seq order.
func (p *fakePart) letters(f wire.DeadFilter, bodies bool) []wire.DeadLetter {
	dead := slices.Clone(p.dead)
	slices.SortFunc(dead, func(a, b *fakeMsg) int { return int(a.seq) - int(b.seq) })
	limit := f.Limit
	if limit == 0 {
		limit = 10000
	}
	var out []wire.DeadLetter
	for _, m := range dead {
		switch {
		case len(out) >= limit, m.seq <= f.AfterSeq,
			len(f.Seqs) > 0 && !slices.Contains(f.Seqs, m.seq),
			f.Reason != wire.DeadAny && f.Reason != m.deadReason,
			f.Group != "" && f.Group != m.m.Group,
			f.FromAt != 0 && m.deadAt.UnixNano() < f.FromAt,
			f.ToAt != 0 && m.deadAt.UnixNano() >= f.ToAt,
			f.Text != "" && !strings.Contains(m.reason, f.Text):
			continue
		}
		l := wire.DeadLetter{Partition: p.index, Seq: m.seq, ID: m.m.ID, Group: m.m.Group, Bytes: m.bytes(),
			Attempts: m.attempts, EnqueuedAt: m.enqueued.UnixNano(), DeadAt: m.deadAt.UnixNano(),
			Reason: m.deadReason, ReasonText: m.reason}
		if bodies {
			l.Headers, l.Body = m.m.Headers, m.m.Body
		}
		out = append(out, l)
	}
	return out
}
