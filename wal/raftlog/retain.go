package raftlog

import (
	"fmt"
	"sync"

	"github.com/ferrymq/ferry/wal"
)

// retainedRec is a record kept on disk for Retentions.
type retainedRec struct {
	pos wal.Pos
	// holders maps each live Retention id to its moved callback (or nil).
	holders map[uint64]func(from, to wal.Pos)
	// orphan is set once raft no longer holds the entry (or the record was
	// found unreferenced at Open): the last release reclaims it.
	orphan bool
}

// Retention keeps one entry record physically readable, whatever raft
// deletes, until Release. Compaction may move the record; Pos always
// names its current place, and the moved callback given to Retain is told.
type Retention struct {
	s    *Store
	id   uint64
	rec  *retainedRec
	once sync.Once
}

// Retain keeps entry index's record readable until the returned
// Retention is released, even after DeleteRange or DropGroup removed it
// from the log. moved, if not nil, is called (on the store's writer
// goroutine, after the move is durable; it must not block or call the
// store's write methods) when compaction copies the record elsewhere. An
// index the group does not hold is raft.ErrLogNotFound-like: ErrBadPosition.
func (g *GroupLog) Retain(index uint64, moved func(from, to wal.Pos)) (*Retention, error) {
	s := g.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := g.readable(); err != nil {
		return nil, err
	}
	pos, ok := g.posLocked(index)
	if !ok {
		return nil, fmt.Errorf("%w: group %q holds no entry %d", ErrBadPosition, g.name, index)
	}
	return s.retainLocked(pos, moved, false), nil
}

// RetainPos keeps the entry record at pos readable, like Retain, for an
// owner that re-registers the positions it needs after a restart (open
// with Config.HoldDeadAtOpen, retain, then ReleaseDeadFromOpen). The
// record must hold an entry.
func (s *Store) RetainPos(pos wal.Pos, moved func(from, to wal.Pos)) (*Retention, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkOpenLocked(); err != nil {
		return nil, err
	}
	if rr := s.retained[pos]; rr != nil {
		return s.retainLocked(pos, moved, rr.orphan), nil
	}
	var hb [entryHeaderBytes]byte
	if err := s.log.ReadRange(pos, 0, hb[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPosition, err)
	}
	if !isEntryKind(hb[0]) {
		return nil, fmt.Errorf("%w: %v holds a record of kind %d, not an entry", ErrBadPosition, pos, hb[0])
	}
	held := false
	if g := s.byID[leUint32(hb[1:5])]; g != nil {
		p, ok := g.posLocked(leUint64(hb[5:13]))
		held = ok && p == pos && hb[0] == kindEntry
	}
	if !held && !s.holding {
		return nil, fmt.Errorf("%w: %v is not held by any group and reclamation has started (use Config.HoldDeadAtOpen)", ErrBadPosition, pos)
	}
	return s.retainLocked(pos, moved, !held), nil
}

// retainLocked adds a holder to the record at pos.
func (s *Store) retainLocked(pos wal.Pos, moved func(from, to wal.Pos), orphan bool) *Retention {
	rr := s.retained[pos]
	if rr == nil {
		rr = &retainedRec{pos: pos, holders: make(map[uint64]func(from, to wal.Pos)), orphan: orphan}
		s.retained[pos] = rr
	}
	s.nextRet++
	rr.holders[s.nextRet] = moved
	return &Retention{s: s, id: s.nextRet, rec: rr}
}

// Pos returns the record's current position.
func (r *Retention) Pos() wal.Pos {
	r.s.mu.RLock()
	defer r.s.mu.RUnlock()
	return r.rec.pos
}

// ReadData reads n bytes of the retained entry's Data at off, like
// Store.ReadData, looking the position up and reading under one lock so
// that a concurrent move cannot intervene.
func (r *Retention) ReadData(off, n int) ([]byte, error) {
	r.s.mu.RLock()
	defer r.s.mu.RUnlock()
	if r.s.closed {
		return nil, ErrClosed
	}
	return r.s.readDataLocked(r.rec.pos, off, n)
}

// Release ends the retention. The last release of a record raft no
// longer holds makes it reclaimable. Safe to call more than once and from
// any goroutine.
func (r *Retention) Release() {
	r.once.Do(func() {
		s := r.s
		s.mu.Lock()
		if !s.closed {
			delete(r.rec.holders, r.id)
			if len(r.rec.holders) == 0 {
				delete(s.retained, r.rec.pos)
				if r.rec.orphan {
					s.markDeadLocked(r.rec.pos)
					s.reapLocked()
				}
			}
		}
		s.mu.Unlock()
		s.nudge()
	})
}

// ReleaseDeadFromOpen ends the hold of Config.HoldDeadAtOpen: records
// recovery found dead, and those that died since, become reclaimable,
// except those retained meanwhile. Compaction starts.
func (s *Store) ReleaseDeadFromOpen() {
	s.mu.Lock()
	held := s.heldDead
	s.heldDead, s.holding = nil, false
	for _, p := range held {
		if rr := s.retained[p]; rr != nil {
			rr.orphan = true
			continue
		}
		s.markDeadLocked(p)
	}
	s.reapLocked()
	s.mu.Unlock()
	s.nudge()
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func leUint64(b []byte) uint64 {
	return uint64(leUint32(b[0:4])) | uint64(leUint32(b[4:8]))<<32
}
