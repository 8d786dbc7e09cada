package partition

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// Bounds of the in-memory cache in front of a replica's raft log.
const (
	// logCacheEntries is how many recent entries the cache may hold.
	logCacheEntries = 256
	// logCacheBytesMax bounds the entry data the cache holds. Entries are
	// the proposals themselves (raft hands the cache the leader's own
	// proposal objects), so this is what bounds the leader's memory for
	// replicated entries, whatever their size.
	logCacheBytesMax = 4 << 20
	// logCacheEntryBytesMax is the largest entry the cache keeps; bigger
	// ones are always read back from the log.
	logCacheEntryBytesMax = 512 << 10
)

// boundedLogCache is a raft.LogStore that keeps the most recent entries in
// RAM, bounded by count and by bytes, in front of a durable store. raft
// reads the newest entries right after writing them (to replicate them);
// the cache serves those reads without a disk read. It never holds more
// than logCacheBytesMax bytes of entry data.
//
// It also holds the batch a leader is writing (StageLogs), whatever its
// size, so that raft can send the batch to the followers while the leader's
// own write is under way; raft stages one batch at a time, a proposal batch
// bounded by MaxAppendEntries entries of bounded size.
type boundedLogCache struct {
	store raft.LogStore

	mu    sync.Mutex
	ring  [logCacheEntries]*raft.Log
	bytes int
	// low is a lower bound on the cached indexes: no entry below it is
	// cached. Making room for a new entry evicts from here upwards, the
	// oldest first.
	low    uint64
	staged []*raft.Log // consecutive indexes, nil when none
}

var (
	_ raft.LogStore          = (*boundedLogCache)(nil)
	_ raft.MonotonicLogStore = (*boundedLogCache)(nil)
	_ raft.LogStager         = (*boundedLogCache)(nil)
)

// StageLogs makes logs readable until UnstageLogs.
func (c *boundedLogCache) StageLogs(logs []*raft.Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.staged != nil {
		panic(fmt.Sprintf("partition: log cache stages entries from %d while %d.. are staged", logs[0].Index, c.staged[0].Index))
	}
	c.staged = logs
}

// UnstageLogs forgets the staged batch.
func (c *boundedLogCache) UnstageLogs() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.staged = nil
}

// stagedLocked returns the staged entry at index, if any.
func (c *boundedLogCache) stagedLocked(index uint64) *raft.Log {
	if len(c.staged) == 0 || index < c.staged[0].Index {
		return nil
	}
	if k := index - c.staged[0].Index; k < uint64(len(c.staged)) {
		return c.staged[k]
	}
	return nil
}

func newBoundedLogCache(store raft.LogStore) *boundedLogCache {
	return &boundedLogCache{store: store}
}

// GetLog serves index from the cache, the staged batch or the store.
func (c *boundedLogCache) GetLog(index uint64, out *raft.Log) error {
	c.mu.Lock()
	if l := c.ring[index%logCacheEntries]; l != nil && l.Index == index {
		*out = *l
		c.mu.Unlock()
		return nil
	}
	if l := c.stagedLocked(index); l != nil {
		*out = *l
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return c.store.GetLog(index, out)
}

// StoreLog stores one entry.
func (c *boundedLogCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

// StoreLogs writes through to the store and caches what fits.
func (c *boundedLogCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		c.evictSlotLocked(l.Index % logCacheEntries)
		if len(l.Data) > logCacheEntryBytesMax {
			continue
		}
		// The newest entries are the ones raft reads (to replicate and
		// apply them): older ones make room, never the new one.
		c.low = min(c.low, l.Index) // a rewritten suffix starts below it
		if l.Index >= logCacheEntries {
			c.low = max(c.low, l.Index-logCacheEntries+1)
		}
		for ; c.bytes+len(l.Data) > logCacheBytesMax && c.low < l.Index; c.low++ {
			if old := c.ring[c.low%logCacheEntries]; old != nil && old.Index == c.low {
				c.evictSlotLocked(c.low % logCacheEntries)
			}
		}
		if c.bytes+len(l.Data) > logCacheBytesMax {
			continue // newer entries hold the room (not after raft's own deletes)
		}
		c.ring[l.Index%logCacheEntries] = l
		c.bytes += len(l.Data)
	}
	c.assertBytes()
	return nil
}

// evictSlotLocked empties one slot of the ring.
func (c *boundedLogCache) evictSlotLocked(slot uint64) {
	if old := c.ring[slot]; old != nil {
		c.bytes -= len(old.Data)
		c.ring[slot] = nil
	}
}

// assertBytes checks the byte accounting; a broken count would let the
// cache grow without bound.
func (c *boundedLogCache) assertBytes() {
	if c.bytes < 0 || c.bytes > logCacheBytesMax {
		panic(fmt.Sprintf("partition: log cache holds %d bytes (bound %d)", c.bytes, logCacheBytesMax))
	}
}

// DeleteRange forgets the cached entries of the range and deletes it from
// the store. The others stay: raft deletes a compacted prefix after every
// snapshot, and emptying the whole cache then sent the next appends' reads
// of the newest entries to the disk.
func (c *boundedLogCache) DeleteRange(minIndex, maxIndex uint64) error {
	c.mu.Lock()
	for slot, l := range c.ring {
		if l != nil && l.Index >= minIndex && l.Index <= maxIndex {
			c.evictSlotLocked(uint64(slot))
		}
	}
	c.assertBytes()
	c.mu.Unlock()
	return c.store.DeleteRange(minIndex, maxIndex)
}

// FirstIndex asks the store.
func (c *boundedLogCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

// LastIndex asks the store.
func (c *boundedLogCache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// cachedBytes reports the entry data held, for tests and status.
func (c *boundedLogCache) cachedBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// IsMonotonic passes on the store's answer: a store that refuses gaps
// makes raft delete the whole log after installing a snapshot, instead of
// leaving a gap before the entries that follow it.
func (c *boundedLogCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
