package fsm

import (
	"fmt"
	"sync"

	"github.com/ferrymq/ferry/wal"
)

// Loc is where a body store keeps one message's stored payload (headers and
// body): 16 opaque bytes that only the store that handed them out
// interprets. The FSM stores and hands back Locs, never looks inside them.
// A Loc is local to one replica (the same message sits at different Locs on
// different replicas), so digests never include it.
type Loc struct {
	A    uint64
	B, C uint32
}

// String formats l for error messages.
func (l Loc) String() string { return fmt.Sprintf("loc(%d,%d,%d)", l.A, l.B, l.C) }

// BodyStore keeps message headers and bodies out of RAM. WALBodyStore (a
// *wal.Log) keeps copies in a local log; MemBodyStore and MemEntryStore are
// in-memory twins for tests.
//
// Rules for implementations: Append stores a copy of payload (a body
// record) and returns a location that Read answers with exactly the
// appended key and payload until MarkDead is called for it; Read may run
// concurrently with the other methods (a snapshot being persisted); while a
// Pin is held, locations valid at Pin time stay readable even if marked dead
// or moved by compaction.
type BodyStore interface {
	Append(key uint64, payload []byte) (Loc, error)
	Read(loc Loc) (key uint64, payload []byte, err error)
	MarkDead(loc Loc, payloadBytes int) error
	Pin() (release func())
}

// BatchReader is implemented by stores that read several payloads in
// fewer reads than one each (payloads that sit close together in one log
// entry, as messages sent together do, in one read). A receive reads its
// deliveries' bodies through it.
type BatchReader interface {
	// ReadBatch sets out[i] to the payload at locs[i], as Read would
	// return it; len(out) must be len(locs). The payloads may share one
	// buffer: none may be written to.
	ReadBatch(locs []Loc, out [][]byte) error
}

// EntryBodyStore is implemented by stores that can keep a payload where the
// log entry being applied holds it, so that a body is written once per
// replica. FSM.ApplyEntry uses it.
type EntryBodyStore interface {
	BodyStore
	// Ref returns the location of the n payload bytes at offset off of the
	// data of log entry index (the entry now being applied); Read(loc) must
	// then return (key, those bytes).
	Ref(index uint64, off, n int, key uint64) (Loc, error)
}

// Retainer is implemented by stores that count references to their
// locations, or that must tell a restore under which key they hold one.
// Restoring a local snapshot (see Snapshot.PersistLocal) calls Retain for
// every message it keeps, so that the store learns again which locations
// are live; each Retain is later matched by one MarkDead.
//
// Retain returns the key the store holds loc under: the key Append or Ref
// was given, which Compact reports. It is seq, the message's own, unless
// the message took the payload over from a dead letter it was redriven
// from (the dead letter's seq, or the one it took it from in turn).
type Retainer interface {
	Retain(seq uint64, loc Loc) (key uint64, err error)
}

// Compactor is implemented by body stores that reclaim space by moving live
// payloads (for example out of a mostly dead log entry into a body record);
// FSM.CompactBodies uses it.
type Compactor interface {
	Compact(live func(key uint64, loc Loc) bool, moved func(key uint64, from, to Loc)) (wal.CompactStats, error)
}

// WALBodyStore is a BodyStore and Compactor on a *wal.Log: every payload is
// a record of the log, and a location is a wal.Pos (Loc.B the segment,
// Loc.C the offset, Loc.A zero). Pin is the log's.
type WALBodyStore struct{ *wal.Log }

func locOfPos(p wal.Pos) Loc { return Loc{B: p.Segment, C: p.Offset} }

func posOfLoc(l Loc) (wal.Pos, error) {
	if l.A != 0 {
		return wal.Pos{}, fmt.Errorf("wal body store: %v is not a log position", l)
	}
	return wal.Pos{Segment: l.B, Offset: l.C}, nil
}

// Append writes payload as a record of the log.
func (s WALBodyStore) Append(key uint64, payload []byte) (Loc, error) {
	p, err := s.Log.Append(key, payload)
	return locOfPos(p), err
}

// Read reads the record at loc.
func (s WALBodyStore) Read(loc Loc) (uint64, []byte, error) {
	p, err := posOfLoc(loc)
	if err != nil {
		return 0, nil, err
	}
	return s.Log.Read(p)
}

// Retain returns the key of the record at loc. A record stays live until
// it is marked dead, so nothing is counted.
func (s WALBodyStore) Retain(_ uint64, loc Loc) (uint64, error) {
	p, err := posOfLoc(loc)
	if err != nil {
		return 0, err
	}
	return s.Log.KeyAt(p)
}

// MarkDead marks the record at loc dead.
func (s WALBodyStore) MarkDead(loc Loc, payloadBytes int) error {
	p, err := posOfLoc(loc)
	if err != nil {
		return err
	}
	return s.Log.MarkDead(p, payloadBytes)
}

// Compact runs the log's compaction, translating positions to locations.
func (s WALBodyStore) Compact(live func(key uint64, loc Loc) bool, moved func(key uint64, from, to Loc)) (wal.CompactStats, error) {
	if live == nil || moved == nil {
		return wal.CompactStats{}, fmt.Errorf("%w: Compact needs non-nil callbacks", ErrInvalidArgument)
	}
	return s.Log.Compact(
		func(key uint64, p wal.Pos) bool { return live(key, locOfPos(p)) },
		func(key uint64, from, to wal.Pos) { moved(key, locOfPos(from), locOfPos(to)) })
}

// memRef is one location of an in-memory store: a body record (payload is
// its own copy) or a reference into a stored log entry (payload is a slice
// of the entry's data). refs counts Append/Ref/Retain calls not yet matched
// by MarkDead; a location whose refs reach zero while the store is pinned
// stays readable until the last pin is released.
type memRef struct {
	key     uint64
	payload []byte
	refs    int
}

// memPins is the pin count and the locations waiting for it to reach zero.
type memPins struct {
	pins   int
	doomed []Loc
}

// pin returns a release function that runs drop on every doomed location
// once the last pin is gone. mu guards p.
func (p *memPins) pin(mu *sync.Mutex, drop func(Loc)) func() {
	mu.Lock()
	p.pins++
	mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			p.pins--
			if p.pins == 0 {
				for _, l := range p.doomed {
					drop(l)
				}
				p.doomed = nil
			}
		})
	}
}

// MemBodyStore is a BodyStore and Retainer in RAM, safe for concurrent use.
// Pins are honoured by keeping dead records until the last pin is released.
type MemBodyStore struct {
	mu      sync.Mutex
	records map[Loc]*memRef
	next    uint64
	memPins
}

// NewMemBodyStore returns an empty in-memory body store.
func NewMemBodyStore() *MemBodyStore {
	return &MemBodyStore{records: make(map[Loc]*memRef)}
}

// Append stores a copy of payload.
func (s *MemBodyStore) Append(key uint64, payload []byte) (Loc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	loc := Loc{B: uint32(s.next >> 32), C: uint32(s.next)}
	s.records[loc] = &memRef{key: key, payload: append([]byte(nil), payload...), refs: 1}
	return loc, nil
}

// Read returns a copy of the record at loc.
func (s *MemBodyStore) Read(loc Loc) (uint64, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[loc]
	if !ok {
		return 0, nil, fmt.Errorf("mem body store: no record at %v", loc)
	}
	return r.key, append([]byte(nil), r.payload...), nil
}

// MarkDead drops one reference to the record at loc; the record is
// forgotten with its last reference (after the last pin, if pinned).
func (s *MemBodyStore) MarkDead(loc Loc, payloadBytes int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return markDead(s.records, &s.memPins, loc, payloadBytes, s.drop)
}

// markDead is MarkDead of both in-memory stores.
func markDead(refs map[Loc]*memRef, p *memPins, loc Loc, payloadBytes int, drop func(Loc)) error {
	r, ok := refs[loc]
	if !ok || r.refs == 0 {
		return fmt.Errorf("mem store: marking absent record %v dead", loc)
	}
	if len(r.payload) != payloadBytes {
		return fmt.Errorf("mem store: record %v has %d bytes, not %d", loc, len(r.payload), payloadBytes)
	}
	r.refs--
	if r.refs > 0 {
		return nil
	}
	if p.pins > 0 {
		p.doomed = append(p.doomed, loc)
		return nil
	}
	drop(loc)
	return nil
}

// retain is Retain of both in-memory stores.
func retain(refs map[Loc]*memRef, loc Loc) (uint64, error) {
	r, ok := refs[loc]
	if !ok {
		return 0, fmt.Errorf("mem store: retaining absent record %v", loc)
	}
	r.refs++
	return r.key, nil
}

// drop forgets a record unless it was retained again meanwhile.
func (s *MemBodyStore) drop(loc Loc) {
	if r := s.records[loc]; r != nil && r.refs == 0 {
		delete(s.records, loc)
	}
}

// Retain adds a reference to the record at loc and returns its key. A
// record marked dead but kept readable by a pin comes back to life.
func (s *MemBodyStore) Retain(_ uint64, loc Loc) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return retain(s.records, loc)
}

// Pin keeps every record readable until release is called.
func (s *MemBodyStore) Pin() func() { return s.pin(&s.mu, s.drop) }

// Live returns how many records are stored and not marked dead.
func (s *MemBodyStore) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.records {
		if r.refs > 0 {
			n++
		}
	}
	return n
}
