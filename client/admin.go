package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// QueueConfig is a queue's configuration as the cluster reports it: the
// settings in force. A value means itself: 0 is "no limit" for
// MaxReceives, MaxDepth, MaxBytes, MaxDead, MaxDeadBytes and DedupMaxIDs,
// "off" for DedupWindow and "keep" for Retention and DeadRetention. See wire.QueueConfig for ranges and defaults.
type QueueConfig = wire.QueueConfig

// QueueInfo describes a queue: its configuration in force and where its
// partitions are led.
type QueueInfo = wire.QueueInfo

// PartitionInfo is the placement of one partition.
type PartitionInfo = wire.PartitionInfo

// QueueSetting names one setting for CreateQueue or UpdateQueue; make it
// with Partitions, MaxDepth, SettingsOf, ..., or Setting for any setting
// by its wire name (QueueSettings lists them). A named setting is taken as
// given, 0 included (MaxDepth(0) removes the depth limit). A setting not
// named takes the server's default in CreateQueue and keeps its value in
// UpdateQueue: "the default" is never written as a value.
type QueueSetting struct {
	fields wire.ConfigFields
	value  wire.QueueConfig
}

// Partitions sets the number of partitions, 1..64; default 1. Fixed at
// creation.
func Partitions(n int) QueueSetting {
	return QueueSetting{wire.FieldPartitions, wire.QueueConfig{Partitions: n}}
}

// Replicas sets the replicas of each partition, 1..5; default 3, or the
// cluster size when smaller. Fixed at creation.
func Replicas(n int) QueueSetting {
	return QueueSetting{wire.FieldReplicas, wire.QueueConfig{Replicas: n}}
}

// VisibilityTimeout sets the lease a receive gets when it asks for none,
// up to 12h; default 30s.
func VisibilityTimeout(d time.Duration) QueueSetting {
	return QueueSetting{wire.FieldVisibilityTimeout, wire.QueueConfig{VisibilityTimeout: d}}
}

// MaxReceives sets how many deliveries a message gets before it is
// dead-lettered, 0..1000; default 10; 0 means no limit (discouraged: a
// poison message then cycles forever).
func MaxReceives(n int) QueueSetting {
	return QueueSetting{wire.FieldMaxReceives, wire.QueueConfig{MaxReceives: n}}
}

// BackoffBase sets the least retry delay after the first failed attempt,
// doubling after each further one (a jitter adds up to a quarter of the
// delay, never past BackoffMax), up to 12h; default 1s.
func BackoffBase(d time.Duration) QueueSetting {
	return QueueSetting{wire.FieldBackoffBase, wire.QueueConfig{BackoffBase: d}}
}

// BackoffMax caps the retry delay, BackoffBase..12h; default 5m.
func BackoffMax(d time.Duration) QueueSetting {
	return QueueSetting{wire.FieldBackoffMax, wire.QueueConfig{BackoffMax: d}}
}

// DedupWindow sets how long a message id is remembered, up to 24h;
// default 5m; 0 turns deduplication off (a retried send may then be
// stored twice).
func DedupWindow(d time.Duration) QueueSetting {
	return QueueSetting{wire.FieldDedupWindow, wire.QueueConfig{DedupWindow: d}}
}

// MaxMessageBytes bounds a message's body plus headers, 1 B..8 MiB;
// default 1 MiB.
func MaxMessageBytes(n int) QueueSetting {
	return QueueSetting{wire.FieldMaxMessageBytes, wire.QueueConfig{MaxMessageBytes: n}}
}

// MaxDepth bounds the messages of a partition not yet acked or
// dead-lettered; default and 0: no limit.
func MaxDepth(n int64) QueueSetting {
	return QueueSetting{wire.FieldMaxDepth, wire.QueueConfig{MaxDepth: n}}
}

// MaxBytes bounds the stored bytes of those messages; default and 0: no
// limit.
func MaxBytes(n int64) QueueSetting {
	return QueueSetting{wire.FieldMaxBytes, wire.QueueConfig{MaxBytes: n}}
}

// Retention deletes unleased messages older than d, up to 8760h; default
// and 0: keep them until acked.
func Retention(d time.Duration) QueueSetting {
	return QueueSetting{wire.FieldRetention, wire.QueueConfig{Retention: d}}
}

// MaxDead caps a partition's dead letters in count, 0..10,000,000;
// default 10,000; 0: no cap. Past it the oldest dead letters are deleted
// and counted (Counters.DeadEvicted).
func MaxDead(n int64) QueueSetting {
	return QueueSetting{wire.FieldMaxDead, wire.QueueConfig{MaxDead: n}}
}

// MaxDeadBytes caps the stored bytes of a partition's dead letters;
// default 1 GiB; 0: no cap. Past it the oldest go, counted.
func MaxDeadBytes(n int64) QueueSetting {
	return QueueSetting{wire.FieldMaxDeadBytes, wire.QueueConfig{MaxDeadBytes: n}}
}

// DeadRetention deletes dead letters d after they were dead-lettered, up
// to 8760h, counting them (Counters.DeadExpired); default and 0: keep
// them.
func DeadRetention(d time.Duration) QueueSetting {
	return QueueSetting{wire.FieldDeadRetention, wire.QueueConfig{DeadRetention: d}}
}

// DedupMaxIDs caps the ids a partition's dedup window holds,
// 0..10,000,000; default 1,000,000 (about 75 MB); 0: no cap. Past it the
// oldest ids leave the window early, counted (Counters.DedupEvicted): a
// retry of such an id is no longer recognised as a duplicate.
func DedupMaxIDs(n int64) QueueSetting {
	return QueueSetting{wire.FieldDedupMaxIDs, wire.QueueConfig{DedupMaxIDs: n}}
}

// MaxInFlight bounds the queue's messages leased at once, all consumers
// and partitions together (as a consumer's max ack pending elsewhere),
// 0..10,000,000; default 0, no bound; when set, at least the partition
// count: each partition holds a share. A receive at the bound waits (long
// poll) or comes back empty; it never fails for it.
func MaxInFlight(n int64) QueueSetting {
	return QueueSetting{wire.FieldMaxInFlight, wire.QueueConfig{MaxInFlight: n}}
}

// MaxDeliveryRate bounds the queue's deliveries per second, all consumers
// and partitions together, 0..1,000,000; default 0, no bound; when set, at
// least the partition count: each partition holds a share, and may
// deliver a second's worth of it at once after a quiet second. A receive
// past the bound waits (long poll) or comes back empty.
func MaxDeliveryRate(perSecond int64) QueueSetting {
	return QueueSetting{wire.FieldMaxDeliveryRate, wire.QueueConfig{MaxDeliveryRate: perSecond}}
}

// FairGroups turns fair delivery across groups on or off (default off).
// On, each partition's receives take eligible messages in turn from each
// group and from the ungrouped messages (one lane together), within a
// priority level, so that a group with many messages, or a flood of
// ungrouped ones, cannot delay a group with few.
func FairGroups(on bool) QueueSetting {
	var v int64
	if on {
		v = 1
	}
	return QueueSetting{wire.FieldFairGroups, wire.QueueConfig{FairGroups: v}}
}

// SettingsOf names every setting of cfg that may change after creation
// (all but Partitions and Replicas), so that a config read back with
// ListQueues can be edited and passed to UpdateQueue as it is.
func SettingsOf(cfg QueueConfig) QueueSetting {
	return QueueSetting{wire.AllConfigFields &^ (wire.FieldPartitions | wire.FieldReplicas), cfg}
}

// settingsToWire folds settings into the config and field set of a
// request; a later setting of the same field wins.
func settingsToWire(settings []QueueSetting) (wire.QueueConfig, wire.ConfigFields) {
	var cfg wire.QueueConfig
	var set wire.ConfigFields
	for _, s := range settings {
		s.fields.Apply(&cfg, s.value)
		set |= s.fields
	}
	return cfg, set
}

// CreateQueue creates a queue with the given settings; the others take
// the server's defaults. An existing name fails with ErrQueueExists;
// invalid settings with ErrInvalidConfig.
//
//	err := c.CreateQueue(ctx, "orders",
//		client.Partitions(4), client.VisibilityTimeout(time.Minute))
func (c *Client) CreateQueue(ctx context.Context, name string, settings ...QueueSetting) error {
	if name == "" {
		return invalidArg("empty queue name")
	}
	w, set := settingsToWire(settings)
	var resp wire.CreateQueueResponse
	err := c.call(ctx, nodeRoute{c}, wire.OpCreateQueue, wire.CreateQueueRequest{Name: name, Config: w, Set: set}, &resp)
	if err == nil && resp.Queue.Name == name {
		c.storeQueue(resp.Queue)
	}
	return err
}

// UpdateQueue changes the given settings and leaves the others as they
// are. Partitions and Replicas cannot change (ErrInvalidConfig).
//
//	// Remove the depth limit and shorten the backoff.
//	err := c.UpdateQueue(ctx, "orders",
//		client.MaxDepth(0), client.BackoffBase(100*time.Millisecond))
func (c *Client) UpdateQueue(ctx context.Context, name string, settings ...QueueSetting) error {
	w, set := settingsToWire(settings)
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
	return resp.Queues, nil
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
// leaders, concurrently. A partition whose leader cannot be reached (one
// being elected, say) comes back with an error code and zero figures:
// st.Err() says which, and Total is then partial.
//
//	st, err := c.QueueStats(ctx, "orders")
//	if err == nil && st.Err() == nil {
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

// QueuePause is a queue's pause state as Pause and Resume leave it.
type QueuePause struct {
	// Partitions counts the queue's partitions, Paused those paused.
	Partitions, Paused int
	// By names who paused the queue (the token's name; empty without
	// tokens), At when (the partition clock); both zero when not paused.
	By string
	At time.Time
}

// Pause pauses the deliveries of every partition of the queue: sends are
// still accepted and confirmed, and leases already out can be acked,
// extended, nacked and rejected, but receives lease nothing (they wait,
// or come back empty) until Resume. The state is replicated and outlives
// restarts. Pausing a paused queue keeps who paused it first. On failure
// the partitions done so far stay paused: call it again.
//
//	p, err := c.Pause(ctx, "orders") // p.Paused == p.Partitions
func (c *Client) Pause(ctx context.Context, name string) (QueuePause, error) {
	return c.setPaused(ctx, name, true)
}

// Resume lets every partition of the queue deliver again after Pause.
func (c *Client) Resume(ctx context.Context, name string) (QueuePause, error) {
	return c.setPaused(ctx, name, false)
}

func (c *Client) setPaused(ctx context.Context, name string, paused bool) (QueuePause, error) {
	n, err := c.partitions(ctx, name)
	if err != nil {
		return QueuePause{}, err
	}
	out := QueuePause{Partitions: n}
	for p := range n {
		var resp wire.PauseResponse
		err := c.call(ctx, partRoute{c, name, p}, wire.OpPause, wire.PauseRequest{Queue: name, Partition: p, Paused: paused}, &resp)
		if err != nil {
			return out, err
		}
		if resp.Paused {
			out.Paused++
			if out.At.IsZero() || resp.PausedAt < out.At.UnixNano() {
				out.By, out.At = resp.PausedBy, time.Unix(0, resp.PausedAt)
			}
		}
	}
	return out, nil
}

// PurgeOption tunes Purge.
type PurgeOption func(*wire.PurgeRequest)

// IncludeLeased makes Purge delete leased messages too, as SQS's
// PurgeQueue does to messages in flight: their consumers then get
// ErrMessageNotFound for an ack, extend, nack or reject.
func IncludeLeased() PurgeOption {
	return func(r *wire.PurgeRequest) { r.IncludeLeased = true }
}

// Purge deletes every message of the queue that is not leased (with
// IncludeLeased, every live message), in every partition, and returns how
// many were deleted. Dead letters are kept. On failure the count covers
// the partitions purged so far.
//
//	n, err := c.Purge(ctx, "scratch")
//	n, err = c.Purge(ctx, "scratch", client.IncludeLeased())
func (c *Client) Purge(ctx context.Context, name string, opts ...PurgeOption) (int, error) {
	n, err := c.partitions(ctx, name)
	if err != nil {
		return 0, err
	}
	total := 0
	for p := 0; p < n; p++ {
		var resp wire.PurgeResponse
		req := wire.PurgeRequest{Queue: name, Partition: p}
		for _, o := range opts {
			o(&req)
		}
		err := c.call(ctx, partRoute{c, name, p}, wire.OpPurge, req, &resp)
		if err != nil {
			return total, err
		}
		total += resp.Count
	}
	return total, nil
}
