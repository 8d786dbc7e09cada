package wire

import (
	"math/bits"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// QueueConfig is a queue's configuration as it travels on the wire: the
// settings in force, as the server reports them, or the values a request
// names in its Set. Durations are nanoseconds (msgpack integers).
//
// A value means itself everywhere: for the settings that may be unlimited
// or off (MaxReceives, DedupWindow, MaxDepth, MaxBytes, Retention, MaxDead,
// MaxDeadBytes, DeadRetention, DedupMaxIDs, MaxInFlight, MaxDeliveryRate,
// FairGroups) 0 means
// "no limit" / "off"; there is no other marker for it. "Use the default"
// is not a value: it is a field left out of a request's Set. This package
// applies no defaults and checks no ranges; the server does both. The
// defaults and ranges below are the server's contract; a server reports
// them with OpQueueSettings.
//
// Field i is named by the bit 1<<i of ConfigFields, read from the struct:
// fields are only ever appended, each an integer (a count, bytes, or a
// time.Duration). After Partitions and Replicas they are, name for name,
// the settings of the server's settings table; a server refuses to start
// when the two disagree.
type QueueConfig struct {
	// Partitions is the number of partitions, 1..64; default 1. Fixed at
	// creation.
	Partitions int `msgpack:"partitions,omitempty"`
	// Replicas is the number of replicas of each partition, 1..5; default
	// 3, or the cluster size when smaller. Fixed at creation.
	Replicas int `msgpack:"replicas,omitempty"`
	// VisibilityTimeout is the lease a receive gets when it asks for none,
	// 0..12h; default 30s.
	VisibilityTimeout time.Duration `msgpack:"visibility_timeout,omitempty"`
	// MaxReceives is how many deliveries a message gets before it is
	// dead-lettered, 0..1000; default 10; 0 means no limit (discouraged:
	// a poison message then cycles forever).
	MaxReceives int `msgpack:"max_receives,omitempty"`
	// BackoffBase is the least retry delay after the first failed attempt
	// (doubling after each further one; a jitter adds up to a quarter of the
	// delay, never past BackoffMax), 0..12h; default 1s.
	BackoffBase time.Duration `msgpack:"backoff_base,omitempty"`
	// BackoffMax caps the retry delay, BackoffBase..12h; default 5m.
	BackoffMax time.Duration `msgpack:"backoff_max,omitempty"`
	// DedupWindow is how long a message id is remembered for
	// deduplication, 0..24h; default 5m; 0 turns deduplication off.
	DedupWindow time.Duration `msgpack:"dedup_window,omitempty"`
	// MaxMessageBytes bounds a message's body plus headers, 1 B..8 MiB;
	// default 1 MiB.
	MaxMessageBytes int `msgpack:"max_message_bytes,omitempty"`
	// MaxDepth bounds the messages of a partition not yet acked or
	// dead-lettered; default 0, no limit.
	MaxDepth int64 `msgpack:"max_depth,omitempty"`
	// MaxBytes bounds the stored bytes of those messages; default 0, no
	// limit.
	MaxBytes int64 `msgpack:"max_bytes,omitempty"`
	// Retention deletes unleased messages older than this, counting them,
	// 0..8760h; default 0, keep until acked.
	Retention time.Duration `msgpack:"retention,omitempty"`
	// MaxDead caps a partition's dead letters in count, 0..10,000,000;
	// default 10,000; 0 means no cap. Past it the oldest dead letters are
	// deleted and counted (Counters.DeadEvicted).
	MaxDead int64 `msgpack:"max_dead,omitempty"`
	// MaxDeadBytes caps the stored bytes of a partition's dead letters;
	// default 1 GiB; 0 means no cap. Past it the oldest go, counted.
	MaxDeadBytes int64 `msgpack:"max_dead_bytes,omitempty"`
	// DeadRetention deletes dead letters dead-lettered this long ago,
	// counting them (Counters.DeadExpired), 0..8760h; default 0, keep.
	DeadRetention time.Duration `msgpack:"dead_retention,omitempty"`
	// DedupMaxIDs caps the ids a partition's dedup window holds,
	// 0..10,000,000; default 1,000,000 (about 75 MB); 0 means no cap. Past
	// it the oldest ids leave the window early (Counters.DedupEvicted): a
	// retry of such an id is no longer recognised as a duplicate.
	DedupMaxIDs int64 `msgpack:"dedup_max_ids,omitempty"`
	// MaxInFlight bounds the queue's messages leased at once, all
	// consumers and partitions together, 0..10,000,000; default 0, no
	// bound; when set, at least Partitions (each partition holds a share).
	// A receive at the bound waits (long poll) or comes back empty.
	MaxInFlight int64 `msgpack:"max_in_flight,omitempty"`
	// MaxDeliveryRate bounds the queue's deliveries per second, all
	// consumers and partitions together, 0..1,000,000; default 0, no
	// bound; when set, at least Partitions (each partition holds a share,
	// and may deliver a second's worth of it at once after a quiet
	// second). A receive past the bound waits (long poll) or comes back
	// empty.
	MaxDeliveryRate int64 `msgpack:"max_delivery_rate,omitempty"`
	// FairGroups is 1 when a receive takes eligible messages in turn from
	// each group and from the ungrouped messages (one lane), within a
	// priority level, instead of the oldest first; default 0, off.
	FairGroups int64 `msgpack:"fair_groups,omitempty"`
}

// ConfigFields is a set of QueueConfig fields. It says which fields of a
// CreateQueueRequest or UpdateQueueRequest are meant: a field in the set
// is taken as given, 0 included; a field out of it takes its default
// (create) or keeps its value (update).
// Bit numbers are part of the protocol and never change.
type ConfigFields uint32

// QueueConfig fields, one bit each.
const (
	// FieldPartitions names QueueConfig.Partitions.
	FieldPartitions ConfigFields = 1 << 0
	// FieldReplicas names QueueConfig.Replicas.
	FieldReplicas ConfigFields = 1 << 1
	// FieldVisibilityTimeout names QueueConfig.VisibilityTimeout.
	FieldVisibilityTimeout ConfigFields = 1 << 2
	// FieldMaxReceives names QueueConfig.MaxReceives.
	FieldMaxReceives ConfigFields = 1 << 3
	// FieldBackoffBase names QueueConfig.BackoffBase.
	FieldBackoffBase ConfigFields = 1 << 4
	// FieldBackoffMax names QueueConfig.BackoffMax.
	FieldBackoffMax ConfigFields = 1 << 5
	// FieldDedupWindow names QueueConfig.DedupWindow.
	FieldDedupWindow ConfigFields = 1 << 6
	// FieldMaxMessageBytes names QueueConfig.MaxMessageBytes.
	FieldMaxMessageBytes ConfigFields = 1 << 7
	// FieldMaxDepth names QueueConfig.MaxDepth.
	FieldMaxDepth ConfigFields = 1 << 8
	// FieldMaxBytes names QueueConfig.MaxBytes.
	FieldMaxBytes ConfigFields = 1 << 9
	// FieldRetention names QueueConfig.Retention.
	FieldRetention ConfigFields = 1 << 10
	// FieldMaxDead names QueueConfig.MaxDead.
	FieldMaxDead ConfigFields = 1 << 11
	// FieldMaxDeadBytes names QueueConfig.MaxDeadBytes.
	FieldMaxDeadBytes ConfigFields = 1 << 12
	// FieldDeadRetention names QueueConfig.DeadRetention.
	FieldDeadRetention ConfigFields = 1 << 13
	// FieldDedupMaxIDs names QueueConfig.DedupMaxIDs.
	FieldDedupMaxIDs ConfigFields = 1 << 14
	// FieldMaxInFlight names QueueConfig.MaxInFlight.
	FieldMaxInFlight ConfigFields = 1 << 15
	// FieldMaxDeliveryRate names QueueConfig.MaxDeliveryRate.
	FieldMaxDeliveryRate ConfigFields = 1 << 16
	// FieldFairGroups names QueueConfig.FairGroups.
	FieldFairGroups ConfigFields = 1 << 17

	// AllConfigFields names every field.
	AllConfigFields ConfigFields = 1<<18 - 1
)

// configFields describes QueueConfig's fields in order: field i is named
// by bit 1<<i. It is read from the struct, so a field added to QueueConfig
// (at the end: bit numbers never change) gets its bit, name, Apply, Get
// and Set without further code.
var configFields = func() []ConfigField {
	t := reflect.TypeOf(QueueConfig{})
	out := make([]ConfigField, t.NumField())
	for i := range out {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if k := f.Type.Kind(); k != reflect.Int && k != reflect.Int64 {
			panic("wire: QueueConfig." + f.Name + " is not an integer")
		}
		out[i] = ConfigField{Field: 1 << i, Name: name, Duration: f.Type == reflect.TypeOf(time.Duration(0))}
	}
	if AllConfigFields != 1<<len(out)-1 {
		panic("wire: AllConfigFields does not name every QueueConfig field")
	}
	return out
}()

// ConfigField describes one field of QueueConfig.
type ConfigField struct {
	// Field is its bit.
	Field ConfigFields
	// Name is its wire and JSON name, e.g. "max_depth".
	Name string
	// Duration is set for a time.Duration field (nanoseconds); the others
	// are counts or bytes.
	Duration bool
}

// ConfigFieldList returns QueueConfig's fields in bit order.
func ConfigFieldList() []ConfigField { return append([]ConfigField(nil), configFields...) }

// ConfigFieldNamed returns the bit of the field with wire name name; false
// when there is none.
func ConfigFieldNamed(name string) (ConfigFields, bool) {
	for _, f := range configFields {
		if f.Name == name {
			return f.Field, true
		}
	}
	return 0, false
}

// String lists the set's fields by their wire names, joined by "|"; bits
// this version does not know appear as "bit(N)".
func (f ConfigFields) String() string {
	var names []string
	for i := 0; i < 32; i++ {
		if f&(1<<i) == 0 {
			continue
		}
		if i < len(configFields) {
			names = append(names, configFields[i].Name)
		} else {
			names = append(names, "bit("+strconv.Itoa(i)+")")
		}
	}
	return strings.Join(names, "|")
}

// Has reports whether every field of g is in f.
func (f ConfigFields) Has(g ConfigFields) bool { return f&g == g }

// Apply copies the fields of src named in f into dst. A server builds a new
// queue's config as defaults overwritten by the request's set fields, and an
// updated one as the current config overwritten by them.
func (f ConfigFields) Apply(dst *QueueConfig, src QueueConfig) {
	for _, cf := range configFields {
		if f&cf.Field != 0 {
			dst.Set(cf.Field, src.Get(cf.Field))
		}
	}
}

// Get returns the value of the one field f names (a duration in
// nanoseconds); 0 when f names no field of this version.
func (c QueueConfig) Get(f ConfigFields) int64 {
	if i := fieldIndex(f); i >= 0 {
		return reflect.ValueOf(c).Field(i).Int()
	}
	return 0
}

// Set stores v in the one field f names (a duration in nanoseconds); a
// bit this version does not know changes nothing.
func (c *QueueConfig) Set(f ConfigFields, v int64) {
	if i := fieldIndex(f); i >= 0 {
		reflect.ValueOf(c).Elem().Field(i).SetInt(v)
	}
}

// fieldIndex is the index of the field f names, or -1 when f is not
// exactly one known bit.
func fieldIndex(f ConfigFields) int {
	if f == 0 || f&(f-1) != 0 || f&AllConfigFields == 0 {
		return -1
	}
	return bits.TrailingZeros32(uint32(f))
}

// NodeState is a cluster member's state as the answering node sees it.
type NodeState uint8

// Node states. Append-only.
const (
	// NodeUnknown is a state this version does not know.
	NodeUnknown NodeState = 0
	// NodeAlive is a member that answers.
	NodeAlive NodeState = 1
	// NodeSuspect is a member that missed probes and may be down.
	NodeSuspect NodeState = 2
	// NodeDead is a member declared failed; it may come back.
	NodeDead NodeState = 3
	// NodeLeft is a member that left the cluster on purpose.
	NodeLeft NodeState = 4
)

// String names the state.
func (s NodeState) String() string {
	switch s {
	case NodeAlive:
		return "alive"
	case NodeSuspect:
		return "suspect"
	case NodeDead:
		return "dead"
	case NodeLeft:
		return "left"
	}
	return "unknown"
}

// NodeInfo describes one cluster member.
type NodeInfo struct {
	// ID is the node's cluster-wide id.
	ID string `msgpack:"id"`
	// ClientAddr is where the node serves this protocol.
	ClientAddr string `msgpack:"client_addr"`
	// RaftAddr is the node's Raft transport address.
	RaftAddr string `msgpack:"raft_addr,omitempty"`
	// HTTPAddr is the node's admin and metrics address.
	HTTPAddr string `msgpack:"http_addr,omitempty"`
	// State is the node's membership state.
	State NodeState `msgpack:"state"`
}

// PartitionInfo is the placement of one partition.
type PartitionInfo struct {
	// Index is the partition number, 0-based.
	Index int `msgpack:"index"`
	// Leader is the leader's node id; empty while no leader is known.
	Leader string `msgpack:"leader,omitempty"`
	// LeaderAddr is the leader's client address, where partition requests
	// go; empty while no leader is known.
	LeaderAddr string `msgpack:"leader_addr,omitempty"`
	// Replicas are the node ids holding a replica.
	Replicas []string `msgpack:"replicas,omitempty"`
}

// QueueInfo describes one queue: its effective config (defaults applied)
// and its partitions in index order.
type QueueInfo struct {
	// Name is the queue's name.
	Name string `msgpack:"name"`
	// Config is the effective configuration.
	Config QueueConfig `msgpack:"config"`
	// Partitions holds one entry per partition, by index.
	Partitions []PartitionInfo `msgpack:"partitions,omitempty"`
}

// MetadataRequest asks any node for cluster membership and placement.
type MetadataRequest struct {
	// Queue restricts the answer to one queue; empty means every queue.
	// A named queue that does not exist is CodeQueueNotFound.
	Queue string `msgpack:"queue,omitempty"`
}

// MetadataResponse describes the cluster as the answering node knows it.
type MetadataResponse struct {
	// Nodes lists every known member.
	Nodes []NodeInfo `msgpack:"nodes,omitempty"`
	// Queues lists the requested queues, sorted by name.
	Queues []QueueInfo `msgpack:"queues,omitempty"`
	// MetaIndex is the meta group's applied index the answer reflects: of
	// two answers the one with the larger index is newer.
	MetaIndex uint64 `msgpack:"meta_index,omitempty"`
}

// CreateQueueRequest creates a queue. Fields of Config named in Set are
// taken as given (zero included); every other field takes its default.
// Invalid settings are CodeInvalidConfig; an existing name is
// CodeQueueExists.
type CreateQueueRequest struct {
	Name   string       `msgpack:"name"`
	Config QueueConfig  `msgpack:"config"`
	Set    ConfigFields `msgpack:"set,omitempty"`
}

// CreateQueueResponse returns the new queue with its effective config.
// Partition leaders may still be unknown right after creation.
type CreateQueueResponse struct {
	Queue QueueInfo `msgpack:"queue"`
}

// UpdateQueueRequest changes the fields of Config named in Set, and only
// those. Changing Partitions or Replicas is CodeInvalidConfig (they are
// fixed at creation); an empty Set changes nothing.
type UpdateQueueRequest struct {
	Name   string       `msgpack:"name"`
	Config QueueConfig  `msgpack:"config"`
	Set    ConfigFields `msgpack:"set,omitempty"`
}

// UpdateQueueResponse returns the queue with its new config.
type UpdateQueueResponse struct {
	Queue QueueInfo `msgpack:"queue"`
}

// DeleteQueueRequest deletes a queue with all its messages and dead
// letters.
type DeleteQueueRequest struct {
	Name string `msgpack:"name"`
}

// DeleteQueueResponse is empty: the queue is gone.
type DeleteQueueResponse struct{}

// RemoveNodeRequest removes node ID from the cluster for good: it leaves
// the catalog and the meta group, its id may not join again, and each of
// its partition replicas moves to another node. Served by the meta
// leader.
type RemoveNodeRequest struct {
	ID string `msgpack:"id"`
}

// RemoveNodeResponse says how many replicas moved to other nodes;
// replicas that found no other node are dropped, and the partitions they
// belonged to run with fewer replicas until a node joins.
type RemoveNodeResponse struct {
	Moved int `msgpack:"moved"`
}

// ListQueuesRequest lists queues.
type ListQueuesRequest struct {
	// Prefix, when set, keeps only names starting with it.
	Prefix string `msgpack:"prefix,omitempty"`
}

// ListQueuesResponse lists queues sorted by name.
type ListQueuesResponse struct {
	Queues []QueueInfo `msgpack:"queues,omitempty"`
}
