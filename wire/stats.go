package wire

import "fmt"

// QueueStatsRequest asks for the gauges and counters of a queue's
// partitions. Any node may answer; it gathers each partition's figures from
// the partition's leader.
type QueueStatsRequest struct {
	Queue string `msgpack:"queue"`
	// Partitions selects partitions by index; empty means all.
	Partitions []int `msgpack:"partitions,omitempty"`
}

// QueueStatsResponse holds one entry per requested partition, in index
// order.
type QueueStatsResponse struct {
	Queue      string           `msgpack:"queue"`
	Partitions []PartitionStats `msgpack:"partitions,omitempty"`
}

// Err says how many partitions' figures are missing (their leader could
// not be reached: they are zero in Partitions and in Total), wrapping the
// first one's error; nil when every partition answered.
func (r QueueStatsResponse) Err() error {
	var first error
	n := 0
	for _, p := range r.Partitions {
		if err := p.Err(); err != nil {
			if first == nil {
				first = fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("figures of %d of %d partitions missing; %w", n, len(r.Partitions), first)
}

// Total sums the partitions' figures (see PartitionStats.Add); check Err
// first, since a partition whose figures are missing adds nothing.
func (r QueueStatsResponse) Total() PartitionStats {
	t := PartitionStats{Partition: -1}
	for _, p := range r.Partitions {
		t.Add(p)
	}
	return t
}

// PausedCount returns how many of the partitions are paused.
func (r QueueStatsResponse) PausedCount() int {
	n := 0
	for _, p := range r.Partitions {
		if p.Paused {
			n++
		}
	}
	return n
}

// Counters are a partition's monotonic event counts since creation.
type Counters struct {
	// Sent counts accepted messages (duplicates excluded).
	Sent uint64 `msgpack:"sent,omitempty"`
	// Duplicates counts sends answered as duplicates.
	Duplicates uint64 `msgpack:"duplicates,omitempty"`
	// Leased counts deliveries.
	Leased uint64 `msgpack:"leased,omitempty"`
	// Acked counts acknowledged messages.
	Acked uint64 `msgpack:"acked,omitempty"`
	// Nacked counts deliveries given back for a retry.
	Nacked uint64 `msgpack:"nacked,omitempty"`
	// Rejected counts deliveries rejected by consumers.
	Rejected uint64 `msgpack:"rejected,omitempty"`
	// Expired counts leases that ran out.
	Expired uint64 `msgpack:"expired,omitempty"`
	// DeadLettered counts messages moved to the dead letters.
	DeadLettered uint64 `msgpack:"dead_lettered,omitempty"`
	// Redriven counts dead letters moved back to ready.
	Redriven uint64 `msgpack:"redriven,omitempty"`
	// DeadDeleted counts dead letters deleted by operators.
	DeadDeleted uint64 `msgpack:"dead_deleted,omitempty"`
	// Purged counts live messages deleted by purges and by operators' deletes
	// (by id or by filter).
	Purged uint64 `msgpack:"purged,omitempty"`
	// RetentionExpired counts messages deleted by retention.
	RetentionExpired uint64 `msgpack:"retention_expired,omitempty"`
	// DeadEvicted counts dead letters deleted to keep a partition within
	// max_dead and max_dead_bytes.
	DeadEvicted uint64 `msgpack:"dead_evicted,omitempty"`
	// DeadExpired counts dead letters deleted by dead_retention.
	DeadExpired uint64 `msgpack:"dead_expired,omitempty"`
	// DedupEvicted counts ids that left the dedup window early to keep it
	// within dedup_max_ids.
	DedupEvicted uint64 `msgpack:"dedup_evicted,omitempty"`
}

// Add adds o's counts to c.
func (c *Counters) Add(o Counters) {
	c.Sent += o.Sent
	c.Duplicates += o.Duplicates
	c.Leased += o.Leased
	c.Acked += o.Acked
	c.Nacked += o.Nacked
	c.Rejected += o.Rejected
	c.Expired += o.Expired
	c.DeadLettered += o.DeadLettered
	c.Redriven += o.Redriven
	c.DeadDeleted += o.DeadDeleted
	c.Purged += o.Purged
	c.RetentionExpired += o.RetentionExpired
	c.DeadEvicted += o.DeadEvicted
	c.DeadExpired += o.DeadExpired
	c.DedupEvicted += o.DedupEvicted
}

// PartitionStats are one partition's figures as its leader reported them.
type PartitionStats struct {
	// Partition is the index; -1 in a Total.
	Partition int `msgpack:"partition"`
	// Code and Error are set when the partition's figures could not be
	// gathered (for example CodeUnavailable); the figures are then zero.
	Code  Code   `msgpack:"code,omitempty"`
	Error string `msgpack:"error,omitempty"`
	// Leader is the node id that reported the figures.
	Leader string `msgpack:"leader,omitempty"`
	// AppliedIndex is the partition log index the figures reflect.
	AppliedIndex uint64 `msgpack:"applied_index,omitempty"`

	// Ready counts visible unleased messages, including those waiting
	// behind an earlier message of their group.
	Ready int64 `msgpack:"ready,omitempty"`
	// Eligible counts the ready messages a receive could take now.
	Eligible int64 `msgpack:"eligible,omitempty"`
	// Delayed counts messages waiting for a send delay or retry backoff.
	Delayed int64 `msgpack:"delayed,omitempty"`
	// InFlight counts leased messages.
	InFlight int64 `msgpack:"in_flight,omitempty"`
	// Dead counts dead letters.
	Dead int64 `msgpack:"dead,omitempty"`
	// Bytes is the stored size of messages not acked or dead-lettered.
	Bytes int64 `msgpack:"bytes,omitempty"`
	// DeadBytes is the stored size of dead letters.
	DeadBytes int64 `msgpack:"dead_bytes,omitempty"`
	// OldestEligibleAge is how long the oldest eligible message has waited
	// since it was enqueued, in nanoseconds; 0 when none is eligible.
	OldestEligibleAge int64 `msgpack:"oldest_eligible_age,omitempty"`
	// Groups counts message groups with messages.
	Groups int64 `msgpack:"groups,omitempty"`
	// LastSeq is the last sequence number assigned.
	LastSeq uint64 `msgpack:"last_seq,omitempty"`
	// Counters are the monotonic event counts.
	Counters Counters `msgpack:"counters"`
	// Paused is set while the partition's deliveries are paused: receives
	// lease nothing. PausedBy names who paused it (a token's name; empty
	// without tokens), PausedAt when (Unix nanoseconds, partition clock).
	Paused   bool   `msgpack:"paused,omitempty"`
	PausedBy string `msgpack:"paused_by,omitempty"`
	PausedAt int64  `msgpack:"paused_at,omitempty"`
}

// Err returns the partition's failure, or nil.
func (s PartitionStats) Err() error { return AsError(s.Code, s.Error) }

// Add folds o into s: gauges, bytes and counters are summed,
// OldestEligibleAge and LastSeq take the larger value. Partition, Code,
// Error, Leader and AppliedIndex of s are left alone.
func (s *PartitionStats) Add(o PartitionStats) {
	s.Ready += o.Ready
	s.Eligible += o.Eligible
	s.Delayed += o.Delayed
	s.InFlight += o.InFlight
	s.Dead += o.Dead
	s.Bytes += o.Bytes
	s.DeadBytes += o.DeadBytes
	s.OldestEligibleAge = max(s.OldestEligibleAge, o.OldestEligibleAge)
	s.Groups += o.Groups
	s.LastSeq = max(s.LastSeq, o.LastSeq)
	s.Counters.Add(o.Counters)
	if o.Paused {
		// A total is paused when any partition is (PausedCount says how
		// many), by whoever paused first.
		if !s.Paused || o.PausedAt < s.PausedAt {
			s.PausedBy, s.PausedAt = o.PausedBy, o.PausedAt
		}
		s.Paused = true
	}
}

// PurgeRequest deletes every message of one partition that is not leased,
// and with IncludeLeased the leased ones too (their consumers then get
// "message not found" for an ack, extend, nack or reject, as SQS's
// PurgeQueue does to messages in flight); dead letters are kept.
type PurgeRequest struct {
	Queue         string `msgpack:"queue"`
	Partition     int    `msgpack:"partition"`
	IncludeLeased bool   `msgpack:"include_leased,omitempty"`
}

// PurgeResponse says how many messages were deleted.
type PurgeResponse struct {
	Count int `msgpack:"count"`
}

// PauseRequest pauses (Paused) or resumes the deliveries of one partition;
// served by the partition's leader. While paused the partition accepts
// sends and settles leases already out, but a receive leases nothing: it
// long-polls, or comes back empty, as on an empty queue. Pausing a paused
// partition keeps who paused it first and when.
type PauseRequest struct {
	Queue     string `msgpack:"queue"`
	Partition int    `msgpack:"partition"`
	Paused    bool   `msgpack:"paused"`
}

// PauseResponse is the partition's pause state once the request applied.
type PauseResponse struct {
	Paused   bool   `msgpack:"paused"`
	PausedBy string `msgpack:"paused_by,omitempty"`
	PausedAt int64  `msgpack:"paused_at,omitempty"`
}
