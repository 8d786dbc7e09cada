package node

import (
	"sync"
	"time"
)

// Bounds of the consumer tracker.
const (
	// consumerWindow is how recently a consumer must have received from a
	// partition to count as one of its consumers.
	consumerWindow = time.Minute
	// consumersPerPartitionMax bounds the consumer ids remembered per
	// partition; past it, new ids are not counted until old ones age out.
	consumersPerPartitionMax = 1024
	// consumerPartitionsMax bounds the partitions tracked. Only
	// partitions this node leads are recorded, so the key set is real;
	// with ids of at most fsm.ConsumerBytesMax this bounds the tracker.
	consumerPartitionsMax = 4096
)

// consumerTracker remembers which consumer ids received from each
// partition through this node in the last consumerWindow. Receives go to
// a partition's leader, so the leader's count is the partition's.
type consumerTracker struct {
	mu   sync.Mutex
	seen map[partitionKey]map[string]time.Time
}

// partitionKey names one partition of a queue.
type partitionKey struct {
	queue string
	index int
}

// newConsumerTracker returns an empty tracker.
func newConsumerTracker() *consumerTracker {
	return &consumerTracker{seen: map[partitionKey]map[string]time.Time{}}
}

// saw records a receive by consumer (ignored when empty).
func (t *consumerTracker) saw(queue string, index int, consumer string, now time.Time) {
	if consumer == "" {
		return
	}
	k := partitionKey{queue, index}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.seen[k]
	if m == nil {
		if len(t.seen) >= consumerPartitionsMax {
			t.pruneLocked(now)
			if len(t.seen) >= consumerPartitionsMax {
				return
			}
		}
		m = map[string]time.Time{}
		t.seen[k] = m
	}
	if _, ok := m[consumer]; !ok && len(m) >= consumersPerPartitionMax {
		return
	}
	m[consumer] = now
}

// count returns the consumers of a partition seen within the window.
func (t *consumerTracker) count(queue string, index int, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.seen[partitionKey{queue, index}]
	for id, at := range m {
		if now.Sub(at) > consumerWindow {
			delete(m, id)
		}
	}
	if len(m) == 0 {
		delete(t.seen, partitionKey{queue, index})
	}
	return len(m)
}

// pruneLocked forgets the consumers seen longer than consumerWindow ago,
// and the partitions left with none. t.mu is held.
func (t *consumerTracker) pruneLocked(now time.Time) {
	for k, m := range t.seen {
		for id, at := range m {
			if now.Sub(at) > consumerWindow {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(t.seen, k)
		}
	}
}
