package node

import (
	"context"
	"strings"

	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

// handleListQueues lists the queues whose names start with the prefix.
func (n *Node) handleListQueues(ctx context.Context, r *wire.ListQueuesRequest) (*wire.ListQueuesResponse, error) {
	md, err := n.handleMetadata(ctx, &wire.MetadataRequest{})
	out := &wire.ListQueuesResponse{}
	if md == nil {
		return out, err
	}
	for _, q := range md.Queues {
		if strings.HasPrefix(q.Name, r.Prefix) {
			out.Queues = append(out.Queues, q)
		}
	}
	return out, err
}

// handleCreateQueue creates a queue once every alive member is registered
// (so that its placement sees them all).
func (n *Node) handleCreateQueue(ctx context.Context, r *wire.CreateQueueRequest) (*wire.CreateQueueResponse, error) {
	if err := n.registrationSettled(); err != nil {
		return nil, err
	}
	if r.Set.Has(wire.FieldReplicas) && r.Config.Replicas < 1 {
		// 0 would ask the catalog for its default: a request that wants
		// the default leaves the field out of Set.
		return nil, wire.Errorf(wire.CodeInvalidConfig, "replicas %d: must be between 1 and %d", r.Config.Replicas, meta.ReplicasMax)
	}
	return n.createQueue(ctx, r)
}

// handleUpdateQueue changes the settings a request names, on the meta
// leader, from the queue's current ones.
func (n *Node) handleUpdateQueue(ctx context.Context, r *wire.UpdateQueueRequest) (*wire.UpdateQueueResponse, error) {
	if err := n.metaLeaderHere(); err != nil {
		return nil, err
	}
	var cur meta.Queue
	var ok bool
	n.meta.view(func(f *meta.FSM) { cur, ok = f.Queue(r.Name) })
	if !ok {
		return nil, meta.ErrQueueNotFound
	}
	cfg := queueConfigOf(cur.Config)
	r.Set.Apply(&cfg, r.Config)
	res, err := n.proposeMeta(ctx, meta.Command{Type: meta.CmdUpdateQueue, UpdateQueue: &meta.UpdateQueueCmd{Name: r.Name, Config: catalogConfigOf(cfg)}})
	return &wire.UpdateQueueResponse{Queue: n.queueInfo(res.Queue)}, err
}

// handleDeleteQueue deletes a queue (on the meta leader).
func (n *Node) handleDeleteQueue(ctx context.Context, r *wire.DeleteQueueRequest) (*wire.DeleteQueueResponse, error) {
	_, err := n.proposeMeta(ctx, meta.Command{Type: meta.CmdDeleteQueue, DeleteQueue: &meta.DeleteQueueCmd{Name: r.Name}})
	return &wire.DeleteQueueResponse{}, err
}

// createQueue creates a queue within the cluster's limits: the node's
// create rate, checked here on the meta leader, and the queue and
// partition counts, checked by the catalog.
func (n *Node) createQueue(ctx context.Context, r *wire.CreateQueueRequest) (*wire.CreateQueueResponse, error) {
	if err := n.metaLeaderHere(); err != nil {
		return nil, err
	}
	if !n.creates.take() {
		return nil, wire.Errorf(wire.CodeLimitExceeded, "queue creates come faster than %g per second (burst %d); retry in a moment",
			n.cfg.QueueCreateRate, n.cfg.QueueCreateBurst)
	}
	cfg := queueConfigOf(meta.DefaultQueueConfig())
	cfg.Replicas = 0 // not named: the catalog picks min(3, nodes)
	r.Set.Apply(&cfg, r.Config)
	cmd := &meta.CreateQueueCmd{Name: r.Name, Config: catalogConfigOf(cfg),
		MaxQueues: n.cfg.MaxQueues, MaxPartitions: n.cfg.MaxPartitions}
	res, err := n.proposeMeta(ctx, meta.Command{Type: meta.CmdCreateQueue, CreateQueue: cmd})
	return &wire.CreateQueueResponse{Queue: n.queueInfo(res.Queue)}, err
}

// proposeMeta applies a catalog change on the meta leader; elsewhere it
// answers not-leader with the meta leader's client address.
func (n *Node) proposeMeta(ctx context.Context, c meta.Command) (meta.Result, error) {
	if err := n.metaLeaderHere(); err != nil {
		return meta.Result{}, err
	}
	res, err := n.meta.propose(ctx, c)
	if err == nil {
		err = res.Err
	}
	switch {
	case err != nil:
	case c.Type == meta.CmdCreateQueue:
		n.replicas.startQueue(c.CreateQueue.Name) // start our replicas of the new queue at once
	default:
		n.replicas.reconcile() // and bring the others in line with a change
	}
	return res, err
}

// registrationSettled refuses (retryably) while alive members are not yet
// in the catalog: placing a queue then would give it fewer replicas than
// the cluster has, or fail for want of registered nodes.
func (n *Node) registrationSettled() error {
	var registered map[string]bool
	n.meta.view(func(f *meta.FSM) {
		registered = map[string]bool{}
		for _, nd := range f.Nodes() {
			registered[nd.ID] = true
		}
		for _, id := range f.RemovedNodes() {
			registered[id] = true // removed: never registered again
		}
	})
	for _, m := range n.members.members() {
		if !registered[m.ID] {
			return wire.Errorf(wire.CodeUnavailable, "cluster still registering member %s; retry", m.ID)
		}
	}
	return nil
}

// metaLeaderHere returns nil on the meta leader, else a not-leader error
// naming it.
func (n *Node) metaLeaderHere() error {
	if n.meta.isLeader() {
		return nil
	}
	if id := n.meta.leaderID(); id != "" {
		return &partition.NotLeaderError{LeaderID: id}
	}
	return ErrNoMetaLeader
}

// handleMetadata describes the cluster's nodes and its queues (one queue
// when the request names it) as this node's catalog knows them.
func (n *Node) handleMetadata(ctx context.Context, r *wire.MetadataRequest) (*wire.MetadataResponse, error) {
	var nodes []meta.Node
	var queues []meta.Queue
	if r.Queue != "" {
		if q, ok := n.meta.queue(ctx, r.Queue); ok {
			queues = []meta.Queue{q}
		}
	}
	n.meta.view(func(f *meta.FSM) {
		nodes = f.Nodes()
		if r.Queue == "" {
			queues = f.Queues()
		}
	})
	if r.Queue != "" && len(queues) == 0 {
		return nil, wire.Errorf(wire.CodeQueueNotFound, "queue %q not found", r.Queue)
	}
	out := &wire.MetadataResponse{MetaIndex: n.meta.raft.AppliedIndex()}
	for _, nd := range nodes {
		out.Nodes = append(out.Nodes, wire.NodeInfo{ID: nd.ID, ClientAddr: nd.ClientAddr, RaftAddr: nd.RaftAddr,
			HTTPAddr: nd.HTTPAddr, State: n.nodeState(nd.ID)})
	}
	for _, q := range queues {
		out.Queues = append(out.Queues, n.queueInfo(q))
	}
	return out, nil
}

// nodeState is a node's liveness as gossip sees it (this node is alive).
func (n *Node) nodeState(id string) wire.NodeState {
	if id == n.cfg.ID {
		return wire.NodeAlive
	}
	return n.members.state(id)
}

// queueInfo describes a queue with the best known leader of each partition.
func (n *Node) queueInfo(q meta.Queue) wire.QueueInfo {
	info := wire.QueueInfo{Name: q.Name, Config: queueConfigOf(q.Config)}
	for i, p := range q.Partitions {
		leader := n.partitionLeader(q, i)
		info.Partitions = append(info.Partitions, wire.PartitionInfo{Index: i, Leader: leader,
			LeaderAddr: n.clientAddrOf(leader), Replicas: append([]string(nil), p.Replicas...)})
	}
	return info
}

// partitionLeader is the local replica's view of the leader, else gossip's,
// else the preferred replica.
func (n *Node) partitionLeader(q meta.Queue, index int) string {
	if p := n.replicas.get(q.GroupID(index)); p != nil {
		if id, _ := p.Leader(); id != "" {
			return id
		}
	}
	return n.leaderHint(q, index)
}

// handleQueueSettings reports the queue settings this node applies: names,
// defaults, ranges and meaning, from the settings table.
func (n *Node) handleQueueSettings(context.Context, *wire.QueueSettingsRequest) (*wire.QueueSettingsResponse, error) {
	return &wire.QueueSettingsResponse{Settings: settingInfos()}, nil
}
