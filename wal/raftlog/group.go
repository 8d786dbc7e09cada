package raftlog

import (
	"fmt"

	"github.com/ferrymq/ferry/wal"
	"github.com/hashicorp/raft"
)

// GroupLog is the raft.LogStore of one group. Its methods may be called
// from any goroutine; StoreLogs and DeleteRange return once durable.
type GroupLog struct {
	s    *Store
	name string
	id   uint32

	// Guarded by s.mu; changed only by the writer.
	first   uint64
	pos     []wal.Pos              // pos[i] locates entry first+i
	markers []marker               // live truncate and prefix markers, by write sequence
	stable  map[string]stableValue // raft's term and vote (see Set)
	dropped bool
}

// marker is a live truncate or prefix record of a group.
type marker struct {
	kind  byte
	value uint64
	seq   uint64
	pos   wal.Pos
}

var (
	_ raft.LogStore          = (*GroupLog)(nil)
	_ raft.MonotonicLogStore = (*GroupLog)(nil)
)

// Name returns the group's name.
func (g *GroupLog) Name() string {
	return g.name
}

// lastLocked is the last index held, 0 when empty.
func (g *GroupLog) lastLocked() uint64 {
	if len(g.pos) == 0 {
		return 0
	}
	return g.first + uint64(len(g.pos)) - 1
}

// posLocked returns where entry index is, or false.
func (g *GroupLog) posLocked(index uint64) (wal.Pos, bool) {
	if len(g.pos) == 0 || index < g.first || index-g.first >= uint64(len(g.pos)) {
		return wal.Pos{}, false
	}
	return g.pos[index-g.first], true
}

// readable returns why the group cannot be read, or nil. s.mu held.
func (g *GroupLog) readable() error {
	if g.s.closed {
		return ErrClosed
	}
	if g.dropped {
		return ErrGroupDropped
	}
	return nil
}

// IsMonotonic tells raft that this store never holds a gap, so raft
// removes the old log after restoring a snapshot rather than leaving one.
func (g *GroupLog) IsMonotonic() bool {
	return true
}

// FirstIndex returns the first index held, 0 when empty.
func (g *GroupLog) FirstIndex() (uint64, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if err := g.readable(); err != nil {
		return 0, err
	}
	if len(g.pos) == 0 {
		return 0, nil
	}
	return g.first, nil
}

// LastIndex returns the last index held, 0 when empty.
func (g *GroupLog) LastIndex() (uint64, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if err := g.readable(); err != nil {
		return 0, err
	}
	return g.lastLocked(), nil
}

// GetLog reads entry index into log, verifying the record's checksum. An
// index the group does not hold is raft.ErrLogNotFound.
func (g *GroupLog) GetLog(index uint64, log *raft.Log) error {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if err := g.readable(); err != nil {
		return err
	}
	pos, ok := g.posLocked(index)
	if !ok {
		return raft.ErrLogNotFound
	}
	_, payload, err := g.s.log.Read(pos)
	if err != nil {
		return fmt.Errorf("%w: group %q entry %d at %v: %w", ErrCorrupt, g.name, index, pos, err)
	}
	h, err := decodeEntry(payload, log)
	if err == nil && (h.kind != kindEntry || h.group != g.id || h.index != index) {
		err = fmt.Errorf("record is kind %d of group %d index %d", h.kind, h.group, h.index)
	}
	if err != nil {
		return fmt.Errorf("%w: group %q entry %d at %v: %v", ErrCorrupt, g.name, index, pos, err)
	}
	return nil
}

// StoreLog stores one entry; see StoreLogs.
func (g *GroupLog) StoreLog(log *raft.Log) error {
	return g.StoreLogs([]*raft.Log{log})
}

// StoreLogs stores entries with consecutive indexes and returns once they
// are durable, group-committed with the calls of other groups. The first
// index must be at most LastIndex+1 and at least FirstIndex (an empty log
// takes any index); entries at indexes already held replace them. An
// entry whose Data and Extensions exceed Config.EntryBytesMax is
// ErrEntryTooLarge. On any error nothing of the call is stored.
func (g *GroupLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	var bytes int64
	for i, l := range logs {
		if l == nil {
			return fmt.Errorf("%w: entry %d of the call is nil", ErrNotContiguous, i)
		}
		if n := len(l.Data) + len(l.Extensions); n > g.s.cfg.EntryBytesMax {
			return fmt.Errorf("%w: entry %d has %d bytes of Data and Extensions, limit %d (Config.EntryBytesMax)",
				ErrEntryTooLarge, l.Index, n, g.s.cfg.EntryBytesMax)
		}
		if l.Index == 0 || (i > 0 && l.Index != logs[i-1].Index+1) {
			return fmt.Errorf("%w: entry %d of the call has index %d", ErrNotContiguous, i, l.Index)
		}
		bytes += walRecordHeaderBytes + entryHeaderBytes + int64(len(l.Data)+len(l.Extensions))
	}
	return g.s.submit(&request{kind: reqStore, g: g, logs: logs, bytes: bytes})
}

// DeleteRange deletes entries min..max inclusive (clipped to the log) and
// returns once the deletion is durable. It serves prefix compaction (the
// range starts at or below FirstIndex) and suffix truncation (the range
// ends at or above LastIndex); a range strictly inside the log is
// ErrBadRange. Suffix truncation is written as a truncate marker that
// recovery honours; see the package documentation.
func (g *GroupLog) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	return g.s.submit(&request{kind: reqDelete, g: g, min: min, max: max, bytes: walRecordHeaderBytes + markerBytes})
}

// EntryPos returns where entry index lies on disk: the position of its
// record and the byte offset of its Data from the start of that record.
// The position stays valid only while the entry is held or retained (see
// Retain); ReadData reads from it.
func (g *GroupLog) EntryPos(index uint64) (pos wal.Pos, dataOffset int, ok bool) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if g.readable() != nil {
		return wal.Pos{}, 0, false
	}
	pos, ok = g.posLocked(index)
	if !ok {
		return wal.Pos{}, 0, false
	}
	return pos, walRecordHeaderBytes + entryDataOffset, true
}
