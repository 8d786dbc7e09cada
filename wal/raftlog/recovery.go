package raftlog

import (
	"fmt"
	"math"
	"sort"

	"github.com/ferrymq/ferry/wal"
)

// RecoverySummary reports what Open found.
type RecoverySummary struct {
	// WAL is the segment log's own report, including any torn tail cut.
	WAL wal.RecoverySummary
	// TornTail is set when a torn tail was cut (details in WAL).
	TornTail bool
	// Groups is the number of registered groups.
	Groups int
	// Entries is the number of entries in all group indexes.
	Entries int
	// Markers is the number of truncate and prefix markers still needed.
	Markers int
	// DeadRecords counts records recovery found unneeded: overwritten,
	// truncated or compacted entries, records of dropped groups, markers
	// that protect nothing any more.
	DeadRecords int
}

// String summarises the recovery for logs.
func (s RecoverySummary) String() string {
	return fmt.Sprintf("%d groups, %d entries, %d markers, %d dead records; wal: %s",
		s.Groups, s.Entries, s.Markers, s.DeadRecords, s.WAL.String())
}

// scannedEntry is an entry record found by recovery. Recovery holds one
// per entry record on disk (32 bytes each) until the indexes are built.
type scannedEntry struct {
	index, seq uint64
	pos        wal.Pos
}

// groupScan collects the records of one group during recovery.
type groupScan struct {
	entries []scannedEntry
	markers []marker
}

// recover scans every record, rebuilds the indexes and marks dead records.
func (s *Store) recover() (RecoverySummary, error) {
	var sum RecoverySummary
	scans := make(map[uint32]*groupScan)
	var dead []wal.Pos
	var stables []scannedStable
	var maxSeq uint64
	err := s.log.ScanPrefix(scanPrefixBytes, func(seq uint64, pos wal.Pos, n int, prefix []byte) error {
		maxSeq = max(maxSeq, seq)
		h, err := decodeHeader(prefix, n)
		if err != nil {
			return fmt.Errorf("%w: record at %v: %v", ErrCorrupt, pos, err)
		}
		if h.group >= s.reg.nextID {
			return fmt.Errorf("%w: record at %v names group id %d, never handed out (next id %d)", ErrCorrupt, pos, h.group, s.reg.nextID)
		}
		if s.byID[h.group] == nil || h.kind == kindKept {
			dead = append(dead, pos)
			return nil
		}
		if h.kind == kindStable {
			// Not counted per segment: markers concern entries only.
			stables = append(stables, scannedStable{group: h.group, seq: seq, pos: pos})
			return nil
		}
		s.countLocked(pos.Segment, h.group, 1)
		gs := scans[h.group]
		if gs == nil {
			gs = &groupScan{}
			scans[h.group] = gs
		}
		if h.kind == kindEntry {
			gs.entries = append(gs.entries, scannedEntry{index: h.index, seq: seq, pos: pos})
		} else {
			gs.markers = append(gs.markers, marker{kind: h.kind, value: h.index, seq: seq, pos: pos})
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	s.nextSeq = maxSeq + 1
	deadStable, err := s.recoverStable(stables)
	if err != nil {
		return sum, err
	}
	dead = append(dead, deadStable...)
	for id, gs := range scans {
		g := s.byID[id]
		deadEntries, err := resolveGroup(g, gs)
		if err != nil {
			return sum, err
		}
		dead = append(dead, deadEntries...)
	}
	sum.DeadRecords = len(dead)
	for _, p := range dead {
		s.markDeadLocked(p)
	}
	mins := s.minSegmentsLocked()
	for _, g := range s.byID {
		before := len(g.markers)
		s.checkMarkersLocked(g, mins)
		sum.DeadRecords += before - len(g.markers)
	}
	s.reapLocked()
	sum.Groups = len(s.byID)
	for _, g := range s.byID {
		sum.Entries += len(g.pos)
		sum.Markers += len(g.markers)
	}
	return sum, nil
}

// resolveGroup decides which entry records form g's log and fills g's
// index and markers; it returns the positions of entries that do not.
//
// An entry record survives unless a marker written after it (higher
// write sequence) removes it: a truncate marker with a value below its
// index, or a prefix marker with a value above it. Of survivors with the
// same index the latest write wins. Survivors must then form one
// contiguous range; a gap means records were lost, which is corruption.
func resolveGroup(g *GroupLog, gs *groupScan) (dead []wal.Pos, err error) {
	mks := gs.markers
	sort.Slice(mks, func(i, j int) bool { return mks[i].seq < mks[j].seq })
	// keepMax[i]: the lowest truncate value among markers i..; entries
	// above it written before marker i are gone. keepMin[i]: the highest
	// prefix value among markers i..
	keepMax := make([]uint64, len(mks)+1)
	keepMin := make([]uint64, len(mks)+1)
	keepMax[len(mks)] = math.MaxUint64
	for i := len(mks) - 1; i >= 0; i-- {
		keepMax[i], keepMin[i] = keepMax[i+1], keepMin[i+1]
		switch mks[i].kind {
		case kindTruncate:
			keepMax[i] = min(keepMax[i], mks[i].value)
		case kindPrefix:
			keepMin[i] = max(keepMin[i], mks[i].value)
		}
	}
	survivors := gs.entries[:0]
	for _, e := range gs.entries {
		j := sort.Search(len(mks), func(k int) bool { return mks[k].seq > e.seq })
		if e.index > keepMax[j] || e.index < keepMin[j] {
			dead = append(dead, e.pos)
			continue
		}
		survivors = append(survivors, e)
	}
	sort.Slice(survivors, func(i, j int) bool {
		if survivors[i].index != survivors[j].index {
			return survivors[i].index < survivors[j].index
		}
		return survivors[i].seq > survivors[j].seq
	})
	g.pos = make([]wal.Pos, 0, len(survivors))
	for i, e := range survivors {
		if i > 0 && e.index == survivors[i-1].index {
			dead = append(dead, e.pos)
			continue
		}
		if len(g.pos) > 0 && e.index != g.first+uint64(len(g.pos)) {
			return nil, fmt.Errorf("%w: group %q: entries jump from %d to %d with nothing between",
				ErrCorrupt, g.name, g.first+uint64(len(g.pos))-1, e.index)
		}
		if len(g.pos) == 0 {
			g.first = e.index
		}
		g.pos = append(g.pos, e.pos)
	}
	g.pos = shrink(g.pos)
	g.markers = mks
	return dead, nil
}
