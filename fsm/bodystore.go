package fsm

import (
	"fmt"
	"sync"

	"github.com/ferrymq/ferry/wal"
)

// BodyStore keeps message headers and bodies out of RAM. *wal.Log is the
// production implementation; MemBodyStore is the in-memory twin for tests.
//
// Rules for implementations: Append returns a position that Read answers
// with exactly the appended key and payload until MarkDead is called for it;
// Read may run concurrently with the other methods (a snapshot being
// persisted); while a Pin is held, positions valid at Pin time stay readable
// even if marked dead or moved by compaction.
type BodyStore interface {
	Append(key uint64, payload []byte) (wal.Pos, error)
	Read(pos wal.Pos) (key uint64, payload []byte, err error)
	MarkDead(pos wal.Pos, payloadBytes int) error
	Pin() (release func())
}

// Compactor is implemented by body stores that reclaim space by moving live
// records; FSM.CompactBodies uses it.
type Compactor interface {
	Compact(live func(key uint64, pos wal.Pos) bool, moved func(key uint64, from, to wal.Pos)) (wal.CompactStats, error)
}

// MemBodyStore is a BodyStore in RAM, safe for concurrent use. Pins are
// honoured by keeping dead records until the last pin is released.
type MemBodyStore struct {
	mu      sync.Mutex
	records map[wal.Pos]memRecord
	next    uint64
	pins    int
	doomed  []wal.Pos // dead while pinned; dropped when pins reach zero
}

type memRecord struct {
	key     uint64
	payload []byte
}

// NewMemBodyStore returns an empty in-memory body store.
func NewMemBodyStore() *MemBodyStore {
	return &MemBodyStore{records: make(map[wal.Pos]memRecord)}
}

// Append stores a copy of payload.
func (s *MemBodyStore) Append(key uint64, payload []byte) (wal.Pos, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	pos := wal.Pos{Segment: uint32(s.next >> 32), Offset: uint32(s.next)}
	s.records[pos] = memRecord{key: key, payload: append([]byte(nil), payload...)}
	return pos, nil
}

// Read returns a copy of the record at pos.
func (s *MemBodyStore) Read(pos wal.Pos) (uint64, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[pos]
	if !ok {
		return 0, nil, fmt.Errorf("mem body store: no record at %v", pos)
	}
	return r.key, append([]byte(nil), r.payload...), nil
}

// MarkDead forgets the record at pos (after the last pin, if pinned).
func (s *MemBodyStore) MarkDead(pos wal.Pos, payloadBytes int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[pos]
	if !ok {
		return fmt.Errorf("mem body store: marking absent record %v dead", pos)
	}
	if len(r.payload) != payloadBytes {
		return fmt.Errorf("mem body store: record %v has %d bytes, not %d", pos, len(r.payload), payloadBytes)
	}
	if s.pins > 0 {
		s.doomed = append(s.doomed, pos)
		return nil
	}
	delete(s.records, pos)
	return nil
}

// Pin keeps every record readable until release is called.
func (s *MemBodyStore) Pin() func() {
	s.mu.Lock()
	s.pins++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.pins--
			if s.pins == 0 {
				for _, p := range s.doomed {
					delete(s.records, p)
				}
				s.doomed = nil
			}
		})
	}
}

// Live returns how many records are stored and not marked dead.
func (s *MemBodyStore) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records) - len(s.doomed)
}
