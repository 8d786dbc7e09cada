package wal

import "time"

// The idle sweep. A FileCache with an IdleTimeout runs it on one timer,
// armed while the cache has unused open files or logs with buffered
// records, and stopped otherwise: an idle node holds no timer for it.
// Each run makes the logs that appended nothing since the previous run
// write their buffers and sync (Log.flushIdle, called with no cache lock
// held), then closes the files unused for IdleTimeout.

// armSweepLocked starts the sweep timer unless the cache does not sweep
// or the timer is already armed.
func (c *FileCache) armSweepLocked() {
	if c.idle <= 0 || c.sweepArmed {
		return
	}
	c.sweepArmed = true
	if c.sweepTimer == nil {
		c.sweepTimer = time.AfterFunc(c.idle, c.sweep)
		return
	}
	c.sweepTimer.Reset(c.idle)
}

// noteDirty registers l, which has just buffered records, so that the
// sweep writes them once l stops appending. Called with l.mu held.
func (c *FileCache) noteDirty(l *Log) {
	if c.idle <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.dirty[l]; !ok {
		c.dirty[l] = dirtyMark{appends: l.appends.Load()}
	}
	c.armSweepLocked()
}

// forget drops l from the sweep's logs; Close calls it.
func (c *FileCache) forget(l *Log) {
	c.mu.Lock()
	delete(c.dirty, l)
	c.mu.Unlock()
}

// sweep is one run of the idle sweep, on the timer's goroutine.
func (c *FileCache) sweep() {
	c.mu.Lock()
	idle := c.idleLogsLocked()
	c.mu.Unlock()
	flushed := 0
	for _, l := range idle {
		if l.flushIdle() {
			flushed++
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.IdleFlushes += uint64(flushed)
	cutoff := time.Now().Add(-c.idle)
	for h := c.lru.head; h != nil && h.lastUsed.Before(cutoff); h = c.lru.head {
		c.closeLocked(h)
		c.stats.IdleCloses++
	}
	if c.lru.head == nil && len(c.dirty) == 0 {
		c.sweepArmed = false
		return
	}
	c.sweepTimer.Reset(c.idle)
}

// idleLogsLocked takes out of c.dirty, and returns, the logs that
// appended nothing since the previous sweep.
func (c *FileCache) idleLogsLocked() []*Log {
	var idle []*Log
	for l, m := range c.dirty {
		n := l.appends.Load()
		if m.seen && m.appends == n {
			idle = append(idle, l)
			delete(c.dirty, l)
			continue
		}
		c.dirty[l] = dirtyMark{appends: n, seen: true}
	}
	return idle
}

// flushIdle writes and syncs the buffered records of a log the sweep
// found idle, as Sync does, and closes its active segment's file if no
// operation is using it. It reports whether it synced. A failure fails
// the log as a failed Sync would; the owner's next write or sync reports
// it.
func (l *Log) flushIdle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dirtyNoted = false
	if l.closed || l.failed != nil {
		return false
	}
	if err := l.syncLocked(); err != nil {
		l.logger.Warn("wal: writing the buffer of an idle log failed", "dir", l.cfg.Dir, "err", err)
		if l.failed == nil && len(l.active.buf) > 0 { // a file that could not be opened: try again
			l.dirtyNoted = true
			l.files.noteDirty(l)
		}
		return false
	}
	l.active.h.closeIfUnused()
	return true
}
