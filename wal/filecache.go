package wal

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ferrymq/ferry/internal/diskfault"
)

// Limits and defaults of FileCacheConfig.
const (
	// DefaultFileCacheCapacity is FileCacheConfig.Capacity when it is
	// zero.
	DefaultFileCacheCapacity = 64
	// FileCacheCapacityMax bounds FileCacheConfig.Capacity.
	FileCacheCapacityMax = 1 << 16
	// DefaultFileIdleTimeout is FileCacheConfig.IdleTimeout when it is
	// zero.
	DefaultFileIdleTimeout = 10 * time.Second
)

// FileCacheConfig configures a FileCache.
type FileCacheConfig struct {
	// Capacity is the most segment files open at once, in every Log that
	// shares the cache together. Zero means DefaultFileCacheCapacity;
	// otherwise between 1 and FileCacheCapacityMax.
	Capacity int
	// IdleTimeout is how long a file may stay open unused, and how long a
	// Log may hold appended records in its write buffer without a further
	// append, before the cache's sweep writes, fsyncs and closes them.
	// The sweep runs once per IdleTimeout while the cache has open files
	// or buffered logs, so a file closes between one and two IdleTimeouts
	// after its last use. Zero means DefaultFileIdleTimeout; a negative
	// value turns the sweep off (files then close only when evicted).
	IdleTimeout time.Duration
}

// FileCache bounds the segment files open at once across the Logs that
// share it (Config.Files), and closes files that are not used.
//
// A Log opens a segment file when an operation needs it (a read of
// flushed bytes, a flush of the write buffer, a sync, recovery) and hands
// it back to the cache when the operation ends; the file stays open for
// the next one. Opening a file when Capacity files are open first closes
// the least recently used file that no operation is using; when every
// open file is in use the opener waits until one is handed back. An
// operation uses at most one file at a time, so the wait always ends.
// A file that was written since its last fsync is fsynced before the
// cache closes it; a failure of that fsync is reported by the owner's
// next sync of the segment (Sync, SyncData, sealing a segment,
// RollbackTo), which fails the Log as a failed sync always does. Records
// in a Log's write buffer are not in any file: closing the file loses
// none of them, and the next flush opens it again and writes at the
// segment's known size. The sweep (see FileCacheConfig.IdleTimeout) runs
// on one timer per cache, armed only while there is something to close,
// and makes an idle Log write its buffer and sync (as Sync does) so that
// it holds neither buffered records nor open files.
//
// Lock order: a Log's mutex before the cache's. The cache never takes a
// Log's mutex while holding its own: it opens, fsyncs and closes files
// with its mutex released (the file's state marks it opening or closing
// meanwhile), and the sweep calls into idle Logs with no cache lock held.
// A spare segment being filled (Config.PreallocateSegments) is not
// counted; a ready spare is closed until rotation opens it as a segment.
//
// A FileCache is safe for concurrent use and needs no closing: with no
// open files and no buffered logs its timer is stopped and nothing of it
// runs.
type FileCache struct {
	capacity int           // 0: unbounded (a Log's private cache)
	idle     time.Duration // 0: no sweep

	mu    sync.Mutex
	freed sync.Cond // signalled when a file closes or is handed back
	open  int       // files open, opening or closing
	lru   handleList
	// dirty holds the logs with buffered records, for the sweep.
	dirty      map[*Log]dirtyMark
	sweepTimer *time.Timer
	sweepArmed bool
	stats      FileCacheStats
}

// FileCacheStats is a point-in-time view of a FileCache.
type FileCacheStats struct {
	// Capacity is the configured bound (0 for a Log's private cache,
	// which has none).
	Capacity int
	// Open counts the files open now, including any being opened or
	// closed.
	Open int
	// OpenMax is the most files that were open at once.
	OpenMax int
	// Opens counts files opened since the cache was created.
	Opens uint64
	// Evictions counts files closed to make room for another.
	Evictions uint64
	// IdleCloses counts files closed by the sweep after IdleTimeout.
	IdleCloses uint64
	// IdleFlushes counts logs whose buffer the sweep wrote and synced.
	IdleFlushes uint64
}

// dirtyMark is the sweep's view of a log with buffered records: its
// append count at the last sweep, and whether a sweep has seen it.
type dirtyMark struct {
	appends uint64
	seen    bool
}

// NewFileCache returns a cache for cfg. The error wraps ErrInvalidConfig
// and names the field.
func NewFileCache(cfg FileCacheConfig) (*FileCache, error) {
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultFileCacheCapacity
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultFileIdleTimeout
	}
	if cfg.Capacity < 1 || cfg.Capacity > FileCacheCapacityMax {
		return nil, fmt.Errorf("%w: FileCacheConfig.Capacity = %d: must be between 1 and %d",
			ErrInvalidConfig, cfg.Capacity, FileCacheCapacityMax)
	}
	return newFileCache(cfg.Capacity, max(cfg.IdleTimeout, 0)), nil
}

// newFileCache returns a cache of capacity files (0: unbounded) whose
// sweep closes files idle for idle (0: no sweep).
func newFileCache(capacity int, idle time.Duration) *FileCache {
	c := &FileCache{capacity: capacity, idle: idle, dirty: make(map[*Log]dirtyMark)}
	c.freed.L = &c.mu
	c.stats.Capacity = capacity
	return c
}

// Stats returns the cache's counters. Safe for concurrent use.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.Open = c.open
	return st
}

// handleState is where a fileHandle's file is in its life.
type handleState uint8

const (
	handleClosed handleState = iota
	handleOpening
	handleOpen
	handleClosing
)

// fileHandle is the file of one segment, opened and closed by its cache.
// Every field after path is guarded by cache.mu.
type fileHandle struct {
	cache *FileCache
	num   uint32
	path  string

	file  *os.File
	state handleState
	users int // operations using the file now; it is closed only at 0
	// create makes the next open create the file (O_EXCL); opened is set
	// after the first open, whose failure is not a reopen.
	create, opened bool
	dropped        bool // the segment was deleted or its Log closed
	// writeGen counts acquisitions for writing; syncedGen is the last one
	// covered by an fsync. The file needs an fsync while they differ.
	writeGen, syncedGen uint64
	// syncErr is the failure of an fsync made before the cache closed
	// the file, reported to the next sync of the segment.
	syncErr    error
	lastUsed   time.Time
	prev, next *fileHandle // in cache.lru while open and unused
	inLRU      bool
}

// handle returns a closed handle for the segment file at path; create
// makes its first open create the file.
func (c *FileCache) handle(num uint32, path string, create bool) *fileHandle {
	return &fileHandle{cache: c, num: num, path: path, create: create}
}

// acquire returns the open file, opening it if needed (and closing the
// least recently used unused file first when the cache is full), and
// counts the caller as a user until release. write marks the file as
// needing an fsync. It also returns the write generation for synced.
func (h *fileHandle) acquire(write bool) (*os.File, uint64, error) {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case h.dropped:
			return nil, 0, fmt.Errorf("%w: segment %d was deleted", ErrBadPosition, h.num)
		case h.state == handleOpen:
			c.lru.remove(h)
			h.users++
			if write {
				h.writeGen++
			}
			return h.file, h.writeGen, nil
		case h.state != handleClosed:
			c.freed.Wait()
		case c.capacity > 0 && c.open >= c.capacity:
			if v := c.lru.head; v != nil {
				c.closeLocked(v)
				c.stats.Evictions++
			} else {
				c.freed.Wait()
			}
		default:
			if err := c.openLocked(h); err != nil {
				return nil, 0, err
			}
		}
	}
}

// openLocked opens h's file, releasing c.mu during the system call.
func (c *FileCache) openLocked(h *fileHandle) error {
	c.open++
	c.stats.OpenMax = max(c.stats.OpenMax, c.open)
	h.state = handleOpening
	flag := os.O_RDWR
	if h.create {
		flag |= os.O_CREATE | os.O_EXCL
	}
	c.mu.Unlock()
	f, err := os.OpenFile(h.path, flag, segmentFileMode)
	c.mu.Lock()
	c.freed.Broadcast()
	if err != nil {
		h.state = handleClosed
		c.open--
		switch {
		case h.create:
			return fmt.Errorf("wal: create segment %d: %w", h.num, err)
		case !h.opened:
			return fmt.Errorf("wal: open segment %d: %w", h.num, err)
		}
		return fmt.Errorf("%w: segment %d: %w", ErrReopen, h.num, err)
	}
	h.file, h.state, h.create, h.opened = f, handleOpen, false, true
	c.stats.Opens++
	return nil
}

// closeLocked closes h, which is open and unused, fsyncing it first if
// it was written since its last fsync (an fsync a chaosdisk build's armed
// fault may fail). c.mu is released during the
// system calls; h is marked closing meanwhile and still counts as open.
func (c *FileCache) closeLocked(h *fileHandle) {
	c.lru.remove(h)
	h.state = handleClosing
	f, gen, needSync := h.file, h.writeGen, h.writeGen != h.syncedGen
	c.mu.Unlock()
	var serr error
	if needSync {
		if serr = diskfault.SyncError(h.path); serr == nil {
			serr = f.Sync()
		}
	}
	_ = f.Close() // a close error after a successful fsync loses nothing
	c.mu.Lock()
	if serr != nil && h.syncErr == nil {
		h.syncErr = fmt.Errorf("wal: sync segment %d before closing it: %w", h.num, serr)
	}
	h.syncedGen = gen
	h.file, h.state = nil, handleClosed
	c.open--
	c.freed.Broadcast()
}

// release ends one use of the file. An unused file joins the LRU list of
// a bounded or sweeping cache; a Log's private cache keeps it open.
func (h *fileHandle) release() {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	h.users--
	if h.users > 0 {
		return
	}
	c.freed.Broadcast()
	if h.state != handleOpen || h.dropped || (c.capacity == 0 && c.idle == 0) {
		return
	}
	if c.idle > 0 {
		h.lastUsed = time.Now()
	}
	c.lru.pushBack(h)
	c.armSweepLocked()
}

// syncNeeded reports whether the file was written since its last fsync,
// and returns (clearing it) the failure of an fsync made before the cache
// closed the file.
func (h *fileHandle) syncNeeded() (bool, error) {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := h.syncErr; err != nil {
		h.syncErr = nil
		return false, err
	}
	return h.writeGen != h.syncedGen, nil
}

// synced records that an fsync begun at write generation gen succeeded.
func (h *fileHandle) synced(gen uint64) {
	c := h.cache
	c.mu.Lock()
	h.syncedGen = max(h.syncedGen, gen)
	c.mu.Unlock()
}

// isOpen reports whether the file is open (or being opened or closed).
func (h *fileHandle) isOpen() bool {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	return h.state != handleClosed
}

// closeIfUnused closes the file now if it is open and unused.
func (h *fileHandle) closeIfUnused() {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.state == handleOpen && h.users == 0 && !h.dropped {
		c.closeLocked(h)
		c.stats.IdleCloses++
	}
}

// drop closes the file for good: its segment is being deleted or its Log
// closed. It waits for current users and for an open or close under way;
// later acquisitions fail. No fsync is made (the Log has synced what it
// keeps).
func (h *fileHandle) drop() error {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	h.dropped = true
	for h.users > 0 || h.state == handleOpening || h.state == handleClosing {
		c.freed.Wait()
	}
	if h.state != handleOpen {
		return nil
	}
	c.lru.remove(h)
	h.state = handleClosing
	f := h.file
	c.mu.Unlock()
	err := f.Close()
	c.mu.Lock()
	h.file, h.state = nil, handleClosed
	c.open--
	c.freed.Broadcast()
	if err != nil {
		return fmt.Errorf("wal: close segment %d: %w", h.num, err)
	}
	return nil
}

// handleList is a doubly linked list of unused open handles, least
// recently used at head. Guarded by FileCache.mu.
type handleList struct {
	head, tail *fileHandle
}

// pushBack appends h, which is not in the list.
func (q *handleList) pushBack(h *fileHandle) {
	h.prev, h.next, h.inLRU = q.tail, nil, true
	if q.tail != nil {
		q.tail.next = h
	} else {
		q.head = h
	}
	q.tail = h
}

// remove takes h out of the list if it is in it.
func (q *handleList) remove(h *fileHandle) {
	if !h.inLRU {
		return
	}
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		q.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		q.tail = h.prev
	}
	h.prev, h.next, h.inLRU = nil, nil, false
}
