package fsm

import (
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Limits that bound every command. They are part of the replicated contract:
// changing one changes which commands are accepted.
const (
	// VisibilityTimeoutMax is the longest lease a receive or extend may ask for.
	VisibilityTimeoutMax = 12 * time.Hour
	// DelayMax is the longest delay a nack may ask for.
	DelayMax = 12 * time.Hour
	// SendDelayMax is the longest delay a send may ask for: a message may
	// be scheduled up to a leap year ahead. A delayed message costs the
	// partition's memory the same small, fixed index entry as any queued
	// one; its headers and body stay in the log or the body store.
	SendDelayMax = 366 * 24 * time.Hour
	// BackoffMaxLimit is the largest BackoffMax a queue may configure.
	BackoffMaxLimit = 12 * time.Hour
	// DedupWindowMax is the longest deduplication window.
	DedupWindowMax = 24 * time.Hour
	// RetentionMax is the longest retention a queue may configure.
	RetentionMax = 365 * 24 * time.Hour
	// MessageBytesLimit is the largest MaxMessageBytes a queue may configure.
	MessageBytesLimit = 8 << 20
	// MaxReceivesLimit is the largest MaxReceives a queue may configure.
	MaxReceivesLimit = 1000
	// IDBytesMax is the longest message id.
	IDBytesMax = 256
	// GroupBytesMax is the longest group key.
	GroupBytesMax = 256
	// ConsumerBytesMax is the longest consumer id.
	ConsumerBytesMax = 256
	// HeadersMax is the most headers one message may carry.
	HeadersMax = 64
	// ReasonBytesMax is the longest failure reason kept; longer ones are cut.
	ReasonBytesMax = 256
	// ReceiveMax is the most messages one receive may lease.
	ReceiveMax = 1000
	// BatchMax is the most items one send, ack, extend, nack or reject carries.
	BatchMax = 1000
	// HistoryMax is how many failure events a message keeps (the newest).
	HistoryMax = 16
	// DeadListMax is the most dead letters one list, peek, redrive or delete
	// handles.
	DeadListMax = 10000
	// MaxDeadLimit is the largest MaxDead a queue may configure.
	MaxDeadLimit = 10_000_000
	// DedupMaxIDsLimit is the largest DedupMaxIDs a queue may configure
	// (about 750 MB of dedup table per partition).
	DedupMaxIDsLimit = 10_000_000
	// MaxInFlightLimit is the largest MaxInFlight a queue may configure.
	MaxInFlightLimit = 10_000_000
	// MaxDeliveryRateLimit is the largest MaxDeliveryRate (per second) a
	// queue may configure.
	MaxDeliveryRateLimit = 1_000_000
)

// Defaults of the bounds on dead letters and on the dedup table. A config
// encoded before these fields existed decodes with them (see
// QueueConfig.DecodeMsgpack), so old queues are bounded too.
const (
	// DefaultMaxDead is the default count cap on a partition's dead
	// letters.
	DefaultMaxDead = 10_000
	// DefaultMaxDeadBytes is the default cap on their stored bytes, 1 GiB.
	DefaultMaxDeadBytes = 1 << 30
	// DefaultDedupMaxIDs is the default cap on the ids a partition's dedup
	// window holds (about 75 MB).
	DefaultDedupMaxIDs = 1_000_000
)

// QueueConfig is the replicated configuration of a queue partition. The zero
// value is not valid; start from DefaultQueueConfig.
type QueueConfig struct {
	// VisibilityTimeout is the lease a receive gets when it names none.
	VisibilityTimeout time.Duration `msgpack:"visibility_timeout"`
	// MaxReceives is how many deliveries a message gets before it is
	// dead-lettered; 0 means unlimited (discouraged: poison messages cycle
	// forever).
	MaxReceives int `msgpack:"max_receives"`
	// BackoffBase is the least retry delay after the first failed attempt.
	// After failed attempt n the delay is d = min(BackoffMax,
	// BackoffBase·2^(n-1)) plus a deterministic jitter of up to d/4 that
	// never goes past BackoffMax.
	BackoffBase time.Duration `msgpack:"backoff_base"`
	// BackoffMax caps the exponential retry delay.
	BackoffMax time.Duration `msgpack:"backoff_max"`
	// DedupWindow is how long an accepted message id is remembered; a send
	// with a remembered id is a duplicate. 0 turns deduplication off.
	DedupWindow time.Duration `msgpack:"dedup_window"`
	// MaxMessageBytes bounds body plus header keys and values.
	MaxMessageBytes int `msgpack:"max_message_bytes"`
	// MaxDepth bounds the number of messages not yet acked or dead-lettered;
	// 0 means unlimited.
	MaxDepth int64 `msgpack:"max_depth"`
	// MaxBytes bounds the stored bytes of those messages; 0 means unlimited.
	MaxBytes int64 `msgpack:"max_bytes"`
	// Retention deletes messages (never dead letters, never leased ones)
	// older than this, counting them in Counters.RetentionExpired; 0 keeps
	// messages until they are acked.
	Retention time.Duration `msgpack:"retention"`
	// MaxDead caps the partition's dead letters in count; 0 means no cap.
	// When a new dead letter takes the partition past MaxDead or
	// MaxDeadBytes, the oldest dead letters (by dead-lettering time, then
	// seq) are deleted until it fits again, counting them in
	// Counters.DeadEvicted; a dead letter larger than MaxDeadBytes on its
	// own goes too. A config that lowers the cap applies it at once.
	MaxDead int64 `msgpack:"max_dead"`
	// MaxDeadBytes caps the stored bytes of the dead letters; 0 means no
	// cap.
	MaxDeadBytes int64 `msgpack:"max_dead_bytes"`
	// DeadRetention deletes dead letters dead-lettered this long ago or
	// longer, counting them in Counters.DeadExpired; 0 keeps them.
	DeadRetention time.Duration `msgpack:"dead_retention"`
	// DedupMaxIDs caps the ids the dedup window holds; 0 means no cap.
	// Before an id is added to a full window the oldest id leaves it early,
	// counted in Counters.DedupEvicted: a retry of that id is then no
	// longer recognised as a duplicate.
	DedupMaxIDs int64 `msgpack:"dedup_max_ids"`
	// MaxInFlight bounds the messages leased at once; 0 means no bound. A
	// receive leases at most the room left and nothing at the bound (it
	// long-polls, or comes back empty, as on an empty queue); acks, nacks,
	// rejects and expiries make room. Lowering it below the leases out
	// leases nothing until they fall under it. On a queue it bounds every
	// partition together: each partition runs with its share (see
	// PartitionShare).
	MaxInFlight int64 `msgpack:"max_in_flight,omitempty"`
	// MaxDeliveryRate bounds the deliveries per second; 0 means no bound.
	// A receive leases at most what the bound allows at its time, and
	// nothing past it (it long-polls, or comes back empty); a partition
	// idle for a second may deliver a second's worth at once. On a queue it
	// bounds every partition together: each partition runs with its share
	// (see PartitionShare).
	MaxDeliveryRate int64 `msgpack:"max_delivery_rate,omitempty"`
	// FairGroups, when 1, makes a receive take eligible messages in turn
	// from lanes, within a priority level: each group is a lane and the
	// ungrouped messages form one, served in the order the lanes last got
	// a delivery (see fair.go). 0, the default, takes the oldest first.
	FairGroups int64 `msgpack:"fair_groups,omitempty"`
}

// settingsTable lists the settings in QueueConfig's field order. Adding a
// setting means adding its QueueConfig field and its row here (and the
// field to wire.QueueConfig, which a test checks); everything else is
// derived.
var settingsTable = []Setting{
	{Name: "visibility_timeout", Kind: KindDuration, Default: int64(30 * time.Second), Max: int64(VisibilityTimeoutMax),
		Help: "lease a receive gets when it names none"},
	{Name: "max_receives", Kind: KindCount, Default: 10, Max: MaxReceivesLimit, Zero: "no limit",
		Help: "deliveries before a message is dead-lettered (no limit lets a poison message cycle for ever)"},
	{Name: "backoff_base", Kind: KindDuration, Default: int64(time.Second), Max: int64(BackoffMaxLimit),
		Help: "least retry delay after the first failed attempt, doubling after each further one, plus a jitter of up to a quarter (never past backoff_max)"},
	{Name: "backoff_max", Kind: KindDuration, Default: int64(5 * time.Minute), Max: int64(BackoffMaxLimit),
		Help: "largest retry delay, at least backoff_base"},
	{Name: "dedup_window", Kind: KindDuration, Default: int64(5 * time.Minute), Max: int64(DedupWindowMax), Zero: "off",
		Help: "how long message ids are remembered to drop duplicate sends"},
	{Name: "max_message_bytes", Kind: KindBytes, Default: 1 << 20, Min: 1, Max: MessageBytesLimit,
		Help: "largest body plus headers"},
	{Name: "max_depth", Kind: KindCount, Zero: "no limit",
		Help: "most messages per partition not yet acked or dead-lettered"},
	{Name: "max_bytes", Kind: KindBytes, Zero: "no limit",
		Help: "most stored bytes per partition of those messages"},
	{Name: "retention", Kind: KindDuration, Max: int64(RetentionMax), Zero: "keep until acked",
		Help: "delete unleased messages this long after they were sent"},
	{Name: "max_dead", Kind: KindCount, Default: DefaultMaxDead, Max: MaxDeadLimit, Zero: "no limit",
		Help: "most dead letters per partition; past it the oldest are deleted (counted as dead_evicted)"},
	{Name: "max_dead_bytes", Kind: KindBytes, Default: DefaultMaxDeadBytes, Zero: "no limit",
		Help: "most stored bytes of dead letters per partition; past it the oldest are deleted (counted)"},
	{Name: "dead_retention", Kind: KindDuration, Max: int64(RetentionMax), Zero: "keep",
		Help: "delete dead letters this long after they were dead-lettered"},
	{Name: "dedup_max_ids", Kind: KindCount, Default: DefaultDedupMaxIDs, Max: DedupMaxIDsLimit, Zero: "no limit",
		Help: "most message ids per partition in the dedup window; past it the oldest leave early (counted as dedup_evicted)"},
	{Name: "max_in_flight", Kind: KindCount, Max: MaxInFlightLimit, Zero: "no limit",
		Help: "most messages of the queue leased at once, all consumers together (each partition holds its share); receives beyond it wait"},
	{Name: "max_delivery_rate", Kind: KindCount, Max: MaxDeliveryRateLimit, Zero: "no limit",
		Help: "most deliveries per second of the queue, all consumers together (each partition holds its share, bursting up to a second's worth); receives beyond it wait"},
	{Name: "fair_groups", Kind: KindSwitch, Max: 1, Zero: "off",
		Help: "1: a receive takes eligible messages in turn from each group and from the ungrouped ones, within a priority level, so a large group or a flood of ungrouped messages cannot delay a small group"},
}

// PartitionShare returns the config partition index of a queue of
// partitions runs with: the queue-wide bounds MaxInFlight and
// MaxDeliveryRate each divided among
// the partitions, the remainder to the lowest indexes, so that the shares
// add up to the queue's bound (which is at least the partition count: see
// meta's QueueConfig.Validate). Every other setting holds per partition as
// it is.
func (c QueueConfig) PartitionShare(index, partitions int) QueueConfig {
	if partitions > 1 {
		c.MaxInFlight = shareOf(c.MaxInFlight, index, partitions)
		c.MaxDeliveryRate = shareOf(c.MaxDeliveryRate, index, partitions)
	}
	return c
}

// shareOf is partition index's share of a queue-wide bound n (0: none).
func shareOf(n int64, index, partitions int) int64 {
	p := int64(partitions)
	share := n / p
	if int64(index) < n%p {
		share++
	}
	return share
}

// queueConfigFields is QueueConfig without its decoding method.
type queueConfigFields QueueConfig

// DecodeMsgpack decodes a config whose fields may be absent: a config
// written before a setting existed lacks it, and the setting takes its
// default (MaxDead, MaxDeadBytes and DedupMaxIDs thus bound old queues;
// DeadRetention's default is 0). Every config this version writes has
// every field.
func (c *QueueConfig) DecodeMsgpack(d *msgpack.Decoder) error {
	v := queueConfigFields(DefaultQueueConfig())
	if err := d.Decode(&v); err != nil {
		return err
	}
	*c = QueueConfig(v)
	return nil
}

// DefaultQueueConfig returns every setting's default from the settings
// table (see Settings): 30 s visibility, 10 receives, backoff 1 s .. 5 min,
// 5 min dedup window, 1 MiB messages, no depth limit and no retention;
// 10,000 dead letters or 1 GiB of them kept for ever; 1,000,000 ids in the
// dedup window.
func DefaultQueueConfig() QueueConfig {
	var c QueueConfig
	for _, s := range settingsTable {
		s.Set(&c, s.Default)
	}
	return c
}

// Validate reports the first field out of the range its row of the
// settings table gives, naming it; BackoffMax must also be at least
// BackoffBase.
func (c QueueConfig) Validate() error {
	for _, s := range settingsTable {
		v := s.Get(c)
		if rule := s.check(v); rule != "" {
			return c.bad(s.FieldName(), s.Format(v), rule)
		}
	}
	if c.BackoffMax < c.BackoffBase {
		return c.bad("BackoffMax", c.BackoffMax, "must be at least BackoffBase ("+c.BackoffBase.String()+")")
	}
	return nil
}

func (c QueueConfig) bad(field string, value any, rule string) error {
	return fmt.Errorf("%w: QueueConfig.%s = %v: %s", ErrInvalidConfig, field, value, rule)
}
