package meta

import (
	"fmt"

	"github.com/ferrymq/ferry/fsm"
)

// Limits that bound every command. They are part of the replicated contract:
// changing one changes which commands are accepted.
const (
	// PartitionsMax is the most partitions a queue may have.
	PartitionsMax = 64
	// ReplicasMax is the most replicas a partition may have.
	ReplicasMax = 5
	// DefaultReplicas is the replica count of a queue created with
	// Replicas = 0, lowered to the number of registered nodes when smaller.
	DefaultReplicas = 3
	// NameBytesMax is the longest queue name.
	NameBytesMax = 128
	// NodeIDBytesMax is the longest node id.
	NodeIDBytesMax = 128
	// AddrBytesMax is the longest address a node may advertise.
	AddrBytesMax = 256
	// NodesMax is the most nodes the catalog registers.
	NodesMax = 1024
	// QueuesMax is the most queues the catalog holds at once.
	QueuesMax = 10000
)

// QueueConfig is the replicated configuration of a whole queue: its shape
// (fixed at creation) and the settings every partition applies.
type QueueConfig struct {
	// Partitions is the number of partitions, 1..PartitionsMax. Fixed at
	// creation.
	Partitions int `msgpack:"partitions"`
	// Replicas is the number of replicas of each partition,
	// 1..ReplicasMax. In a create request 0 means
	// min(DefaultReplicas, registered nodes). Fixed at creation.
	Replicas int `msgpack:"replicas"`
	// Queue is the per-partition configuration handed to each partition's
	// state machine.
	Queue fsm.QueueConfig `msgpack:"queue"`
}

// DefaultQueueConfig returns one partition, the default replica count and
// the partition defaults of fsm.DefaultQueueConfig.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{Partitions: 1, Queue: fsm.DefaultQueueConfig()}
}

// Validate checks a create or update request's config: Partitions in
// 1..PartitionsMax, Replicas in 0..ReplicasMax (0 asks for the default) and
// valid partition settings. It reports the first field out of range, naming
// it; every error wraps ErrInvalidConfig.
func (c QueueConfig) Validate() error {
	if c.Partitions < 1 || c.Partitions > PartitionsMax {
		return badConfig("Partitions", c.Partitions, "must be between 1 and 64")
	}
	if c.Replicas < 0 || c.Replicas > ReplicasMax {
		return badConfig("Replicas", c.Replicas, "must be between 1 and 5 (0 for the default)")
	}
	// Each partition's share of a queue-wide bound must be at least 1 (0
	// means no bound).
	if m := c.Queue.MaxInFlight; m > 0 && m < int64(c.Partitions) {
		return badConfig("Queue.MaxInFlight", m, fmt.Sprintf("must be 0 (no limit) or at least the partition count (%d)", c.Partitions))
	}
	if m := c.Queue.MaxDeliveryRate; m > 0 && m < int64(c.Partitions) {
		return badConfig("Queue.MaxDeliveryRate", m, fmt.Sprintf("must be 0 (no limit) or at least the partition count (%d)", c.Partitions))
	}
	return c.Queue.Validate()
}

func badConfig(field string, value any, rule string) error {
	return fmt.Errorf("%w: QueueConfig.%s = %v: %s", ErrInvalidConfig, field, value, rule)
}

// ValidateName reports whether name is a valid queue name: 1..NameBytesMax
// bytes of [A-Za-z0-9._-], starting with a letter or digit. The error wraps
// ErrInvalidName.
func ValidateName(name string) error {
	if len(name) == 0 || len(name) > NameBytesMax {
		return fmt.Errorf("%w: %d bytes (want 1..%d)", ErrInvalidName, len(name), NameBytesMax)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return fmt.Errorf("%w: %q must start with a letter or digit", ErrInvalidName, name)
		}
		if !alnum && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("%w: %q has %q at byte %d (allowed: A-Z a-z 0-9 . _ -)", ErrInvalidName, name, c, i)
		}
	}
	return nil
}

// Validate checks a node's registration: an id of 1..NodeIDBytesMax
// printable ASCII bytes without spaces, a non-empty RaftAddr, and addresses
// of at most AddrBytesMax printable ASCII bytes. RegisteredAt is not
// checked: the state machine sets it. The error wraps ErrInvalidArgument.
func (n Node) Validate() error {
	if len(n.ID) == 0 || len(n.ID) > NodeIDBytesMax || !printable(n.ID) {
		return fmt.Errorf("%w: node id %q: want 1..%d printable ASCII bytes without spaces",
			ErrInvalidArgument, n.ID, NodeIDBytesMax)
	}
	if n.RaftAddr == "" {
		return fmt.Errorf("%w: node %s: empty RaftAddr", ErrInvalidArgument, n.ID)
	}
	for _, a := range [...]struct{ field, v string }{
		{"RaftAddr", n.RaftAddr}, {"ClientAddr", n.ClientAddr}, {"HTTPAddr", n.HTTPAddr},
	} {
		if len(a.v) > AddrBytesMax || !printable(a.v) {
			return fmt.Errorf("%w: node %s: %s %q: want at most %d printable ASCII bytes without spaces",
				ErrInvalidArgument, n.ID, a.field, a.v, AddrBytesMax)
		}
	}
	return nil
}

// printable reports whether s is printable ASCII without spaces.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}
