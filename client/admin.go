package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// Unlimited and Disabled, given as a QueueConfig setting, stand for the
// value 0 itself. A plain 0 means "the default" in CreateQueue and
// "unchanged" in UpdateQueue; any negative value means an explicit 0:
// unlimited receives, depth, bytes or retention, deduplication turned off.
//
//	client.QueueConfig{MaxReceives: client.Unlimited, DedupWindow: client.Disabled}
const (
	Unlimited = -1
	Disabled  = -1
)

// QueueConfig is a queue's configuration. In CreateQueue a zero field takes
// the server's default and in UpdateQueue it leaves the setting unchanged;
// a negative value (Unlimited, Disabled) sets the setting to 0. In configs
// read from the cluster (QueueInfo) every setting is explicit, a setting
// of 0 being shown as -1, so a config read back can be passed to
// UpdateQueue as it is.
type QueueConfig struct {
	// Partitions is the number of partitions, 1..64; default 1. Fixed at
	// creation.
	Partitions int
	// Replicas is the number of replicas of each partition; default 3, or
	// the cluster size when smaller. Fixed at creation.
	Replicas int
	// VisibilityTimeout is the lease a receive gets when it asks for none,
	// up to 12h; default 30s.
	VisibilityTimeout time.Duration
	// MaxReceives is how many deliveries a message gets before it is
	// dead-lettered; default 10; Unlimited (discouraged) for no limit.
	MaxReceives int
	// BackoffBase is the least retry delay after the first failed attempt,
	// doubling after each further one; a jitter adds up to a quarter of
	// the delay, never past BackoffMax; default 1s.
	BackoffBase time.Duration
	// BackoffMax caps the retry delay; default 5m.
	BackoffMax time.Duration
	// DedupWindow is how long a message id is remembered; default 5m;
	// Disabled turns deduplication off (retried sends may then be stored
	// twice).
	DedupWindow time.Duration
	// MaxMessageBytes bounds a message's body plus headers; default 1 MiB.
	MaxMessageBytes int
	// MaxDepth bounds the messages of a partition not yet acked or
	// dead-lettered; default unlimited.
	MaxDepth int64
	// MaxBytes bounds the stored bytes of those messages; default
	// unlimited.
	MaxBytes int64
	// Retention deletes unleased messages older than this; default
	// unlimited (keep until acked).
	Retention time.Duration
}

// toWire returns the wire config and the set of fields it names.
func (c QueueConfig) toWire() (wire.QueueConfig, wire.ConfigFields) {
	var w wire.QueueConfig
	var set wire.ConfigFields
	field := func(bit wire.ConfigFields, v int64, assign func(int64)) {
		if v != 0 {
			set |= bit
			assign(max(v, 0))
		}
	}
	field(wire.FieldPartitions, int64(c.Partitions), func(v int64) { w.Partitions = int(v) })
	field(wire.FieldReplicas, int64(c.Replicas), func(v int64) { w.Replicas = int(v) })
	field(wire.FieldVisibilityTimeout, int64(c.VisibilityTimeout), func(v int64) { w.VisibilityTimeout = time.Duration(v) })
	field(wire.FieldMaxReceives, int64(c.MaxReceives), func(v int64) { w.MaxReceives = int(v) })
	field(wire.FieldBackoffBase, int64(c.BackoffBase), func(v int64) { w.BackoffBase = time.Duration(v) })
	field(wire.FieldBackoffMax, int64(c.BackoffMax), func(v int64) { w.BackoffMax = time.Duration(v) })
	field(wire.FieldDedupWindow, int64(c.DedupWindow), func(v int64) { w.DedupWindow = time.Duration(v) })
	field(wire.FieldMaxMessageBytes, int64(c.MaxMessageBytes), func(v int64) { w.MaxMessageBytes = int(v) })
	field(wire.FieldMaxDepth, c.MaxDepth, func(v int64) { w.MaxDepth = v })
	field(wire.FieldMaxBytes, c.MaxBytes, func(v int64) { w.MaxBytes = v })
	field(wire.FieldRetention, int64(c.Retention), func(v int64) { w.Retention = time.Duration(v) })
	return w, set
}

// configFromWire converts an effective config, showing zeros as -1.
func configFromWire(w wire.QueueConfig) QueueConfig {
	z := func(v int64) int64 {
		if v == 0 {
			return -1
		}
		return v
	}
	return QueueConfig{
		Partitions:        int(z(int64(w.Partitions))),
		Replicas:          int(z(int64(w.Replicas))),
		VisibilityTimeout: time.Duration(z(int64(w.VisibilityTimeout))),
		MaxReceives:       int(z(int64(w.MaxReceives))),
		BackoffBase:       time.Duration(z(int64(w.BackoffBase))),
		BackoffMax:        time.Duration(z(int64(w.BackoffMax))),
		DedupWindow:       time.Duration(z(int64(w.DedupWindow))),
		MaxMessageBytes:   int(z(int64(w.MaxMessageBytes))),
		MaxDepth:          z(w.MaxDepth),
		MaxBytes:          z(w.MaxBytes),
		Retention:         time.Duration(z(int64(w.Retention))),
	}
}

// QueueInfo describes a queue: its effective configuration and where its
// partitions are led.
type QueueInfo struct {
	// Name is the queue's name.
	Name string
	// Config is the effective configuration (see QueueConfig).
	Config QueueConfig
	// Partitions lists the partitions by index.
	Partitions []PartitionInfo
}

// PartitionInfo is the placement of one partition.
type PartitionInfo struct {
	// Index is the partition number, from 0.
	Index int
	// Leader is the leader's node id; empty while none is known.
	Leader string
	// LeaderAddr is the leader's client address; empty while none is
	// known.
	LeaderAddr string
	// Replicas are the node ids holding a replica.
	Replicas []string
}

func queueInfoFromWire(w wire.QueueInfo) QueueInfo {
	qi := QueueInfo{Name: w.Name, Config: configFromWire(w.Config)}
	for _, p := range w.Partitions {
		qi.Partitions = append(qi.Partitions, PartitionInfo{
			Index: p.Index, Leader: p.Leader, LeaderAddr: p.LeaderAddr,
			Replicas: append([]string(nil), p.Replicas...),
		})
	}
	return qi
}

// CreateQueue creates a queue. Zero settings take the server's defaults.
// An existing name fails with ErrQueueExists; invalid settings with
// ErrInvalidConfig.
//
//	err := c.CreateQueue(ctx, "orders", client.QueueConfig{
//		Partitions:        4,
//		VisibilityTimeout: time.Minute,
//	})
func (c *Client) CreateQueue(ctx context.Context, name string, cfg QueueConfig) error {
	if name == "" {
		return invalidArg("empty queue name")
	}
	w, set := cfg.toWire()
	var resp wire.CreateQueueResponse
	err := c.call(ctx, nodeRoute{c}, wire.OpCreateQueue, wire.CreateQueueRequest{Name: name, Config: w, Set: set}, &resp)
	if err == nil && resp.Queue.Name == name {
		c.storeQueue(resp.Queue)
	}
	return err
}

// UpdateQueue changes the non-zero settings of cfg and leaves the others
// as they are. Partitions and Replicas cannot change (ErrInvalidConfig).
//
//	// Turn the depth limit off and shorten the backoff.
//	err := c.UpdateQueue(ctx, "orders", client.QueueConfig{
//		MaxDepth:    client.Unlimited,
//		BackoffBase: 100 * time.Millisecond,
//	})
func (c *Client) UpdateQueue(ctx context.Context, name string, cfg QueueConfig) error {
	w, set := cfg.toWire()
	var resp wire.UpdateQueueResponse
	err := c.call(ctx, nodeRoute{c}, wire.OpUpdateQueue, wire.UpdateQueueRequest{Name: name, Config: w, Set: set}, &resp)
	if err == nil && resp.Queue.Name == name {
		c.storeQueue(resp.Queue)
	}
	return err
}

// DeleteQueue deletes a queue with all its messages and dead letters.
//
//	err := c.DeleteQueue(ctx, "scratch")
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	var resp wire.DeleteQueueResponse
	err := c.call(ctx, nodeRoute{c}, wire.OpDeleteQueue, wire.DeleteQueueRequest{Name: name}, &resp)
	if err == nil || errors.Is(err, ErrQueueNotFound) {
		c.forgetQueue(name)
	}
	return err
}

// ListQueues lists the queues whose names start with prefix ("" for all),
// sorted by name.
//
//	qs, err := c.ListQueues(ctx, "")
//	for _, q := range qs {
//		fmt.Println(q.Name, q.Config.Partitions)
//	}
func (c *Client) ListQueues(ctx context.Context, prefix string) ([]QueueInfo, error) {
	var resp wire.ListQueuesResponse
	if err := c.call(ctx, nodeRoute{c}, wire.OpListQueues, wire.ListQueuesRequest{Prefix: prefix}, &resp); err != nil {
		return nil, err
	}
	out := make([]QueueInfo, len(resp.Queues))
	for i, q := range resp.Queues {
		out[i] = queueInfoFromWire(q)
	}
	return out, nil
}

// Stats are a queue's per-partition gauges and counters; Total sums them.
// A partition whose figures could not be gathered has its Code and Error
// set (see PartitionStats.Err) and zero figures.
type Stats = wire.QueueStatsResponse

// PartitionStats are one partition's figures.
type PartitionStats = wire.PartitionStats

// Counters are a partition's monotonic event counts.
type Counters = wire.Counters

// statsTries bounds the attempts to get one partition's figures from its
// leader.
const statsTries = 3

// QueueStats returns the figures of every partition of a queue. A node
// reports only the partitions it leads; the others are asked of their
// leaders, concurrently.
//
//	st, err := c.QueueStats(ctx, "orders")
//	if err == nil {
//		fmt.Println("ready:", st.Total().Ready, "dead:", st.Total().Dead)
//	}
func (c *Client) QueueStats(ctx context.Context, name string) (Stats, error) {
	var resp wire.QueueStatsResponse
	if err := c.call(ctx, nodeRoute{c}, wire.OpQueueStats, wire.QueueStatsRequest{Queue: name}, &resp); err != nil {
		return resp, err
	}
	var wg sync.WaitGroup
	for i, p := range resp.Partitions {
		if p.Code == wire.CodeNotLeader || p.Code == wire.CodeUnavailable {
			wg.Go(func() { resp.Partitions[i] = c.partitionStats(ctx, name, p) })
		}
	}
	wg.Wait()
	return resp, nil
}

// partitionStats asks the leader of a partition for its figures; it
// returns last (the answer that named another leader) when none of a few
// attempts gets them.
func (c *Client) partitionStats(ctx context.Context, name string, last wire.PartitionStats) wire.PartitionStats {
	for attempt := 0; attempt < statsTries; attempt++ {
		var one wire.QueueStatsResponse
		req := wire.QueueStatsRequest{Queue: name, Partitions: []int{last.Partition}}
		if err := c.call(ctx, partRoute{c, name, last.Partition}, wire.OpQueueStats, req, &one); err != nil || len(one.Partitions) != 1 {
			return last
		}
		if p := one.Partitions[0]; p.Code != wire.CodeNotLeader && p.Code != wire.CodeUnavailable {
			return p
		}
		last = one.Partitions[0]
		c.setLeader(name, last.Partition, "", "") // stale: reload the placement
		if c.sleep(ctx, attempt) != nil {
			return last
		}
	}
	return last
}

// Purge deletes every message of the queue that is not leased, in every
// partition, and returns how many were deleted. Dead letters are kept.
// On failure the count covers the partitions purged so far.
//
//	n, err := c.Purge(ctx, "scratch")
func (c *Client) Purge(ctx context.Context, name string) (int, error) {
	n, err := c.partitions(ctx, name)
	if err != nil {
		return 0, err
	}
	total := 0
	for p := 0; p < n; p++ {
		var resp wire.PurgeResponse
		err := c.call(ctx, partRoute{c, name, p}, wire.OpPurge, wire.PurgeRequest{Queue: name, Partition: p}, &resp)
		if err != nil {
			return total, err
		}
		total += resp.Count
	}
	return total, nil
}
