package fsm

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/ferrymq/ferry/wal"
)

// MemEntryStore is the in-memory twin of a store that keeps payloads where
// the replicated log holds them: an EntryBodyStore, Retainer and Compactor,
// safe for concurrent use. Tests hand it each log entry's data with
// PutEntry before applying the entry with FSM.ApplyEntry; Ref then answers
// reads by slicing the stored entry. An entry's data is kept while a
// location refers into it (or, unreferenced, until the next PutEntry), and
// LiveEntries tells how many entries are still referenced. Append writes
// body records, as MemBodyStore does; Compact moves the live payloads of a
// mostly dead entry into body records.
type MemEntryStore struct {
	mu      sync.Mutex
	entries map[uint64]*memEntry
	refs    map[Loc]*memRef // by location: entry refs have Loc.A = index > 0
	next    uint64          // body records handed out
	memPins
}

var _ BatchReader = (*MemEntryStore)(nil)

// memEntry is a stored log entry and how many locations refer into it.
type memEntry struct {
	data []byte
	locs int
}

// NewMemEntryStore returns an empty in-memory entry store.
func NewMemEntryStore() *MemEntryStore {
	return &MemEntryStore{entries: make(map[uint64]*memEntry), refs: make(map[Loc]*memRef)}
}

// PutEntry stores a copy of the data of log entry index (index > 0), as the
// replicated log would hold it. Entries put earlier that nothing refers to
// are forgotten. Putting an index again replaces its data unless locations
// refer into it, in which case the data must be the same.
func (s *MemEntryStore) PutEntry(index uint64, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index == 0 {
		return fmt.Errorf("%w: log entry index 0", ErrInvalidArgument)
	}
	if e := s.entries[index]; e != nil && e.locs > 0 {
		if !bytes.Equal(e.data, data) {
			return fmt.Errorf("%w: log entry %d rewritten while referenced", ErrInvalidArgument, index)
		}
		return nil
	}
	for i, e := range s.entries {
		if e.locs == 0 {
			delete(s.entries, i)
		}
	}
	s.entries[index] = &memEntry{data: bytes.Clone(data)}
	return nil
}

// Ref refers to n bytes at offset off of entry index's data under key.
func (s *MemEntryStore) Ref(index uint64, off, n int, key uint64) (Loc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[index]
	if e == nil {
		return Loc{}, fmt.Errorf("mem entry store: no log entry %d", index)
	}
	if off < 0 || n < 0 || off > len(e.data) || n > len(e.data)-off {
		return Loc{}, fmt.Errorf("mem entry store: bytes %d+%d outside entry %d of %d bytes", off, n, index, len(e.data))
	}
	loc := Loc{A: index, B: uint32(off), C: uint32(n)}
	if r := s.refs[loc]; r != nil {
		if r.key != key {
			return Loc{}, fmt.Errorf("mem entry store: %v already holds key %d, not %d", loc, r.key, key)
		}
		r.refs++
		return loc, nil
	}
	s.refs[loc] = &memRef{key: key, payload: e.data[off : off+n : off+n], refs: 1}
	e.locs++
	return loc, nil
}

// Append stores a copy of payload as a body record.
func (s *MemEntryStore) Append(key uint64, payload []byte) (Loc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendLocked(key, payload), nil
}

func (s *MemEntryStore) appendLocked(key uint64, payload []byte) Loc {
	s.next++
	loc := Loc{B: uint32(s.next >> 32), C: uint32(s.next)}
	s.refs[loc] = &memRef{key: key, payload: bytes.Clone(payload), refs: 1}
	return loc
}

// Read returns a copy of the payload at loc.
func (s *MemEntryStore) Read(loc Loc) (uint64, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refs[loc]
	if !ok {
		return 0, nil, fmt.Errorf("mem entry store: nothing at %v", loc)
	}
	return r.key, bytes.Clone(r.payload), nil
}

// ReadBatch implements BatchReader: the payloads are copied into one
// buffer they share, as a store reading one span of a log entry does.
func (s *MemEntryStore) ReadBatch(locs []Loc, out [][]byte) error {
	if len(out) != len(locs) {
		return fmt.Errorf("mem entry store: %d locations, %d payloads", len(locs), len(out))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	for _, loc := range locs {
		r, ok := s.refs[loc]
		if !ok {
			return fmt.Errorf("mem entry store: nothing at %v", loc)
		}
		total += len(r.payload)
	}
	buf := make([]byte, 0, total)
	for i, loc := range locs {
		start := len(buf)
		buf = append(buf, s.refs[loc].payload...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return nil
}

// MarkDead drops one reference to loc; the location, and an entry nothing
// refers to any more, are forgotten with it (after the last pin, if pinned).
func (s *MemEntryStore) MarkDead(loc Loc, payloadBytes int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return markDead(s.refs, &s.memPins, loc, payloadBytes, s.drop)
}

// Retain adds a reference to loc and returns its key.
func (s *MemEntryStore) Retain(_ uint64, loc Loc) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return retain(s.refs, loc)
}

// Pin keeps every location readable until release is called.
func (s *MemEntryStore) Pin() func() { return s.pin(&s.mu, s.drop) }

// drop forgets loc unless it was retained again meanwhile, and its entry
// with the last location referring into it.
func (s *MemEntryStore) drop(loc Loc) {
	r := s.refs[loc]
	if r == nil || r.refs > 0 {
		return
	}
	delete(s.refs, loc)
	if loc.A == 0 {
		return
	}
	e := s.entries[loc.A]
	e.locs--
	if e.locs == 0 {
		delete(s.entries, loc.A)
	}
}

// LiveEntries returns how many log entries live locations refer into.
func (s *MemEntryStore) LiveEntries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := map[uint64]bool{}
	for loc, r := range s.refs {
		if loc.A != 0 && r.refs > 0 {
			live[loc.A] = true
		}
	}
	return len(live)
}

// Live returns how many locations (entry refs and body records) are live.
func (s *MemEntryStore) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.refs {
		if r.refs > 0 {
			n++
		}
	}
	return n
}

// Compact moves the live payloads of every mostly dead entry (live payload
// bytes under half of its data) into body records, reporting each move, so
// that the entry can be forgotten. An entry counts as one segment in the
// stats. A location referred to more than once is left where it is.
func (s *MemEntryStore) Compact(live func(key uint64, loc Loc) bool, moved func(key uint64, from, to Loc)) (wal.CompactStats, error) {
	var st wal.CompactStats
	if live == nil || moved == nil {
		return st, fmt.Errorf("%w: Compact needs non-nil callbacks", ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byEntry := map[uint64][]Loc{}
	for loc, r := range s.refs {
		if loc.A != 0 && r.refs > 0 {
			byEntry[loc.A] = append(byEntry[loc.A], loc)
		}
	}
	for index, locs := range byEntry {
		e := s.entries[index]
		liveBytes, movable := 0, true
		for _, loc := range locs {
			r := s.refs[loc]
			liveBytes += len(r.payload)
			movable = movable && r.refs == 1 && live(r.key, loc)
		}
		if !movable || 2*liveBytes >= len(e.data) {
			continue
		}
		for _, loc := range locs {
			r := s.refs[loc]
			to := s.appendLocked(r.key, r.payload)
			moved(r.key, loc, to)
			if err := markDead(s.refs, &s.memPins, loc, len(r.payload), s.drop); err != nil {
				return st, err
			}
			st.RecordsMoved++
			st.BytesMoved += int64(len(r.payload))
		}
		st.SegmentsCompacted++
		st.BytesReclaimed += int64(len(e.data) - liveBytes)
		if s.pins > 0 {
			st.SegmentsDeferred++
		}
	}
	return st, nil
}
