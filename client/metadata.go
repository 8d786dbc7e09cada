package client

import (
	"context"
	"errors"

	"github.com/ferrymq/ferry/wire"
)

// metaCache is the client's picture of the cluster: the known server
// addresses, the node that last led the meta group, and for each queue its
// partitions' leaders. It is guarded by Client.mu. Entries are replaced
// only by answers at least as new (MetaIndex), and corrected in place by
// not-leader redirects.
type metaCache struct {
	seeds      []string
	addrs      []string // seeds, then the client addresses of known nodes
	anyNext    int      // rotation over addrs for "any node" requests
	metaLeader string   // client address of the meta leader, if known
	nodes      []wire.NodeInfo
	nodesIndex uint64
	queues     map[string]*queueMeta
}

// queueMeta is the cached placement of one queue.
type queueMeta struct {
	info  wire.QueueInfo
	index uint64 // MetaIndex of the answer it came from; 0 when unknown
}

// flight is one metadata load shared by concurrent callers.
type flight struct {
	done chan struct{}
	err  error
}

func (m *metaCache) init(seeds []string) {
	m.seeds = append([]string(nil), seeds...)
	m.addrs = append([]string(nil), seeds...)
	m.queues = make(map[string]*queueMeta)
}

// anyAddr returns the address "any node" requests go to next: the meta
// leader when known, else the next address of the rotation.
func (m *metaCache) anyAddr() string {
	if m.metaLeader != "" {
		return m.metaLeader
	}
	return m.addrs[m.anyNext%len(m.addrs)]
}

// setNodes replaces the node list and rebuilds the address rotation:
// seeds first, then alive nodes, then the others.
func (m *metaCache) setNodes(nodes []wire.NodeInfo, index uint64) {
	cur := m.addrs[m.anyNext%len(m.addrs)]
	m.nodes, m.nodesIndex = nodes, index
	seen := make(map[string]bool)
	var addrs []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	for _, s := range m.seeds {
		add(s)
	}
	for _, n := range nodes {
		if n.State == wire.NodeAlive {
			add(n.ClientAddr)
		}
	}
	for _, n := range nodes {
		add(n.ClientAddr)
	}
	m.addrs, m.anyNext = addrs, 0
	for i, a := range addrs {
		if a == cur {
			m.anyNext = i
		}
	}
}

// merge folds a metadata answer into the cache. queue is the queue the
// answer was restricted to ("" for a full answer).
func (m *metaCache) merge(md wire.MetadataResponse, queue string) {
	newer := func(old uint64) bool { return md.MetaIndex == 0 || md.MetaIndex >= old }
	if len(md.Nodes) > 0 && newer(m.nodesIndex) {
		m.setNodes(md.Nodes, md.MetaIndex)
	}
	seen := make(map[string]bool, len(md.Queues))
	for _, q := range md.Queues {
		seen[q.Name] = true
		if old := m.queues[q.Name]; old == nil || newer(old.index) {
			m.queues[q.Name] = &queueMeta{info: ownQueueInfo(q), index: md.MetaIndex}
		}
	}
	for name, old := range m.queues {
		if (queue == "" || name == queue) && !seen[name] && newer(old.index) {
			delete(m.queues, name)
		}
	}
}

// partition returns the cached placement of one partition.
func (qm *queueMeta) partition(part int) *wire.PartitionInfo {
	ps := qm.info.Partitions
	if part >= 0 && part < len(ps) && ps[part].Index == part {
		return &ps[part]
	}
	for i := range ps {
		if ps[i].Index == part {
			return &ps[i]
		}
	}
	return nil
}

// count returns the queue's partition count.
func (qm *queueMeta) count() int {
	if n := qm.info.Config.Partitions; n > 0 {
		return n
	}
	return len(qm.info.Partitions)
}

// refresh reloads the metadata of one queue ("" for every queue) from any
// node. Concurrent refreshes of the same queue share one request.
func (c *Client) refresh(ctx context.Context, queue string) error {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return ErrClosed
		}
		if f := c.flights[queue]; f != nil {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if isContextErr(f.err) && ctx.Err() == nil {
				continue // the other caller gave up; load it ourselves
			}
			return f.err
		}
		f := &flight{done: make(chan struct{})}
		c.flights[queue] = f
		c.mu.Unlock()
		f.err = c.loadMetadata(ctx, queue)
		c.mu.Lock()
		delete(c.flights, queue)
		c.mu.Unlock()
		close(f.done)
		return f.err
	}
}

// loadMetadata asks any node for the metadata and merges the answer.
func (c *Client) loadMetadata(ctx context.Context, queue string) error {
	md, err := c.fetchMetadata(ctx, queue)
	if err != nil {
		if queue != "" && errors.Is(err, ErrQueueNotFound) {
			c.mu.Lock()
			delete(c.meta.queues, queue)
			c.mu.Unlock()
		}
		return err
	}
	c.mu.Lock()
	c.meta.merge(md, queue)
	c.mu.Unlock()
	if queue != "" && !hasQueue(md, queue) {
		return wire.Errorf(wire.CodeQueueNotFound, "%q", queue)
	}
	return nil
}

// fetchMetadata performs one OpMetadata request, trying each known node
// once.
func (c *Client) fetchMetadata(ctx context.Context, queue string) (wire.MetadataResponse, error) {
	var md wire.MetadataResponse
	resp, err := c.callAnyNode(ctx, wire.OpMetadata, wire.MetadataRequest{Queue: queue})
	if err == nil {
		err = resp.Decode(&md)
	}
	return md, err
}

func hasQueue(md wire.MetadataResponse, name string) bool {
	for _, q := range md.Queues {
		if q.Name == name {
			return true
		}
	}
	return false
}

// leaderOf returns the client address of the leader of a partition,
// loading the queue's metadata when it is not cached or names no leader.
// With no leader known after a reload it returns an ErrUnavailable error.
func (c *Client) leaderOf(ctx context.Context, queue string, part int) (string, error) {
	for try := 0; ; try++ {
		c.mu.Lock()
		qm := c.meta.queues[queue]
		if qm != nil {
			if part < 0 || part >= qm.count() {
				c.mu.Unlock()
				return "", invalidArg("queue %q has no partition %d", queue, part)
			}
			if p := qm.partition(part); p != nil && p.LeaderAddr != "" {
				addr := p.LeaderAddr
				c.mu.Unlock()
				return addr, nil
			}
		}
		c.mu.Unlock()
		if try > 0 {
			return "", wire.Errorf(wire.CodeUnavailable, "no leader known for %s/%d", queue, part)
		}
		if err := c.refresh(ctx, queue); err != nil {
			return "", err
		}
	}
}

// partitionCount returns the number of partitions of a queue, loading its
// metadata when it is not cached.
func (c *Client) partitionCount(ctx context.Context, queue string) (int, error) {
	for try := 0; ; try++ {
		c.mu.Lock()
		qm := c.meta.queues[queue]
		n := 0
		if qm != nil {
			n = qm.count()
		}
		c.mu.Unlock()
		if n > 0 {
			return n, nil
		}
		if try > 0 {
			return 0, wire.Errorf(wire.CodeUnavailable, "queue %q has no partitions yet", queue)
		}
		if err := c.refresh(ctx, queue); err != nil {
			return 0, err
		}
	}
}

// queueConfig returns the cached effective config of a queue, if known.
func (c *Client) queueConfig(queue string) (wire.QueueConfig, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	qm := c.meta.queues[queue]
	if qm == nil {
		return wire.QueueConfig{}, false
	}
	return qm.info.Config, true
}

// setLeader records addr as the leader of a partition; an empty addr
// forgets the leader so that the next request reloads the metadata. When
// ifCurrent is set the change is made only while the cached leader is
// ifCurrent, so a newer leader learned by another request is kept.
func (c *Client) setLeader(queue string, part int, addr, ifCurrent string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	qm := c.meta.queues[queue]
	if qm == nil {
		return
	}
	p := qm.partition(part)
	if p == nil || (ifCurrent != "" && p.LeaderAddr != ifCurrent) {
		return
	}
	if p.LeaderAddr != addr {
		c.log.Debug("ferry: partition leader changed", "queue", queue, "partition", part, "addr", addr)
	}
	p.LeaderAddr = addr
}

// storeQueue caches a queue description returned by an admin call.
func (c *Client) storeQueue(info wire.QueueInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.meta.queues[info.Name]
	idx := uint64(0)
	if old != nil {
		idx = old.index
	}
	c.meta.queues[info.Name] = &queueMeta{info: ownQueueInfo(info), index: idx}
}

// ownQueueInfo copies the partition list, which the cache changes in place
// (setLeader), so that the caller's copy is never shared.
func ownQueueInfo(q wire.QueueInfo) wire.QueueInfo {
	q.Partitions = append([]wire.PartitionInfo(nil), q.Partitions...)
	return q
}

// forgetQueue drops a queue from the cache.
func (c *Client) forgetQueue(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.meta.queues, name)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
