package fsm

// Result is what applying one command returns. Only the fields of the
// command's type are set; Err is a whole-command failure (bad argument,
// invalid config) that changed nothing.
type Result struct {
	Type CommandType
	Err  error

	// Sent holds one outcome per message of a send, in order.
	Sent []SendOutcome
	// Delivered holds the leased messages of a receive, oldest first.
	Delivered []Delivery
	// Settled holds one error per item of an ack, extend, nack or reject;
	// nil means the item took effect.
	Settled []error
	// Count is how many messages a redrive, delete-dead or purge touched,
	// or how many leases a tick expired.
	Count int
}

// SendOutcome is the answer for one sent message.
type SendOutcome struct {
	// Seq is the message's sequence number, or the original one for a
	// duplicate.
	Seq uint64
	// Duplicate is set when the id was already accepted in the dedup window.
	Duplicate bool
	// Err is set when the message was refused; then nothing was stored.
	Err error
}

// Delivery is one leased message handed to a consumer.
type Delivery struct {
	Receipt    Receipt
	ID         string
	Group      string
	Headers    map[string]string
	Body       []byte
	EnqueuedAt int64 // Unix nanoseconds
	Deadline   int64 // Unix nanoseconds; the lease ends here
	Priority   uint8 // 0..PriorityMax
}

// Counters are the partition's monotonic event counts.
type Counters struct {
	Sent             uint64 `msgpack:"sent"`
	Duplicates       uint64 `msgpack:"duplicates"`
	Leased           uint64 `msgpack:"leased"`
	Acked            uint64 `msgpack:"acked"`
	Nacked           uint64 `msgpack:"nacked"`
	Rejected         uint64 `msgpack:"rejected"`
	Expired          uint64 `msgpack:"expired"`
	DeadLettered     uint64 `msgpack:"dead_lettered"`
	Redriven         uint64 `msgpack:"redriven"`
	DeadDeleted      uint64 `msgpack:"dead_deleted"`
	Purged           uint64 `msgpack:"purged"`
	RetentionExpired uint64 `msgpack:"retention_expired"`
	// DeadEvicted counts dead letters deleted to keep the partition within
	// MaxDead and MaxDeadBytes.
	DeadEvicted uint64 `msgpack:"dead_evicted"`
	// DeadExpired counts dead letters deleted by DeadRetention.
	DeadExpired uint64 `msgpack:"dead_expired"`
	// DedupEvicted counts ids that left the dedup window early to keep it
	// within DedupMaxIDs.
	DedupEvicted uint64 `msgpack:"dedup_evicted"`
	// ClockRefused counts commands refused with ErrClockStep.
	ClockRefused uint64 `msgpack:"clock_refused,omitempty"`
	// ClockResyncs counts CmdClockResync commands that moved the clock
	// more than the max clock step.
	ClockResyncs uint64 `msgpack:"clock_resyncs,omitempty"`
}

// Stats is a read-only view of a partition.
type Stats struct {
	// Ready counts visible messages nobody holds, including those waiting
	// behind an earlier message of their group.
	Ready int64
	// Eligible counts the ready messages a receive could take right now.
	Eligible int64
	Delayed  int64
	InFlight int64
	Dead     int64
	// Bytes is the stored size of messages not acked or dead-lettered.
	Bytes     int64
	DeadBytes int64
	// OldestEligibleAge is how long the oldest eligible message has waited
	// since it was enqueued, in nanoseconds (0 when none is eligible).
	OldestEligibleAge int64
	// OldestDeadAt is when the oldest dead letter was dead-lettered, Unix
	// nanoseconds of the leader's clock (0 when there is none).
	OldestDeadAt int64
	Groups       int64
	LastSeq      uint64
	Clock        int64 // the FSM's clock, Unix nanoseconds
	Counters     Counters
	Config       QueueConfig
	// Pause says whether deliveries are paused, by whom and since when.
	Pause PauseState
	// Schedules sums the partition's schedules.
	Schedules ScheduleTotals
}

// ScheduleTotals sums the schedules of a partition (see ScheduleInfo).
// The tick counts are those of the schedules that exist: deleting a
// schedule takes its counts away.
type ScheduleTotals struct {
	Count                   int
	Fired, Refused, Skipped uint64
	// NextTick is the earliest next tick of any schedule, Unix nanoseconds
	// (0 when there is none): a leader's clock past it by more than a
	// sweep means a tick is overdue.
	NextTick int64
}
