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
type boundedLogCache struct {
	store raft.LogStore

	mu    sync.Mutex
	ring  [logCacheEntries]*raft.Log
	bytes int
}

var (
	_ raft.LogStore          = (*boundedLogCache)(nil)
	_ raft.MonotonicLogStore = (*boundedLogCache)(nil)
)

func newBoundedLogCache(store raft.LogStore) *boundedLogCache {
	return &boundedLogCache{store: store}
}

// GetLog serves index from the cache or the store.
func (c *boundedLogCache) GetLog(index uint64, out *raft.Log) error {
	c.mu.Lock()
	if l := c.ring[index%logCacheEntries]; l != nil && l.Index == index {
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
		slot := l.Index % logCacheEntries
		if old := c.ring[slot]; old != nil {
			c.bytes -= len(old.Data)
			c.ring[slot] = nil
		}
		if len(l.Data) > logCacheEntryBytesMax || c.bytes+len(l.Data) > logCacheBytesMax {
			continue
		}
		c.ring[slot] = l
		c.bytes += len(l.Data)
	}
	c.assertBytes()
	return nil
}

// assertBytes checks the byte accounting; a broken count would let the
// cache grow without bound.
func (c *boundedLogCache) assertBytes() {
	if c.bytes < 0 || c.bytes > logCacheBytesMax {
		panic(fmt.Sprintf("partition: log cache holds %d bytes (bound %d)", c.bytes, logCacheBytesMax))
	}
}

// DeleteRange empties the cache and deletes from the store.
func (c *boundedLogCache) DeleteRange(minIndex, maxIndex uint64) error {
	c.mu.Lock()
	c.ring = [logCacheEntries]*raft.Log{}
	c.bytes = 0
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
