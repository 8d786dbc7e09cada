package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
)

// A persisted snapshot is a msgpack stream: a header, then one record per
// message and dead letter in seq order, then the dedup entries. It comes in
// two forms:
//
//   - Full (Persist; header version 2, the form every version wrote before
//     local snapshots existed): each message record carries its stored
//     payload. It is self-contained: what a replica that lacks our log
//     entries or body records needs (a snapshot sent to a follower).
//     Restore appends every payload to the body store.
//   - Local (PersistLocal; header version 3, form "local"): each message
//     record carries its location in the body store, the payload's size
//     and checksum, and no payload bytes. It is valid only for restoring on
//     the replica that wrote it, on the same body store, while the store
//     still holds those locations (for example at restart, from the log
//     entries the store keeps). Restore writes no payload: it keeps the
//     locations, and calls Retain on a store that counts references.
//
// Restore reads either form; digests of the restored state are equal.
const (
	snapshotVersionFull  = 2
	snapshotVersionLocal = 3
)

// snapForm says what a snapshot's message records carry.
type snapForm uint8

const (
	formFull  snapForm = iota // payloads inline
	formLocal                 // locations, sizes and checksums; no payloads
)

// ErrSnapshotFormat is returned by Restore for a stream that is not a
// snapshot of a known version or is cut short.
var ErrSnapshotFormat = errors.New("bad snapshot")

// Snapshot is a frozen copy of an FSM's state, taken by FSM.Snapshot. Its
// Persist may run on another goroutine while the FSM applies later commands:
// it holds its own copy of the metadata and a pin on the body store, so the
// bodies it names stay readable. Call Release when done with it.
type Snapshot struct {
	header   snapHeader
	messages []snapMessage
	dedup    []snapDedup
	store    BodyStore
	release  func()
}

type snapHeader struct {
	Version  int         `msgpack:"version"`
	Form     snapForm    `msgpack:"form,omitempty"`
	Config   QueueConfig `msgpack:"config"`
	Clock    int64       `msgpack:"clock"`
	LastSeq  uint64      `msgpack:"last_seq"`
	Counters Counters    `msgpack:"counters"`
	Messages int         `msgpack:"messages"`
	Dedup    int         `msgpack:"dedup"`
}

type snapMessage struct {
	Seq        uint64   `msgpack:"seq"`
	ID         string   `msgpack:"id"`
	Group      string   `msgpack:"group,omitempty"`
	EnqueuedAt int64    `msgpack:"enq"`
	VisibleAt  int64    `msgpack:"vis"`
	Attempts   uint32   `msgpack:"att"`
	State      msgState `msgpack:"state"`
	HasInfo    bool     `msgpack:"has_info,omitempty"`
	Info       snapInfo `msgpack:"info"`
	Payload    []byte   `msgpack:"payload"`
	// The payload's size, CRC-32C and location: kept by Snapshot for
	// every message, written in the local form only.
	Stored uint32 `msgpack:"stored,omitempty"`
	CRC    uint32 `msgpack:"crc,omitempty"`
	LocA   uint64 `msgpack:"loc_a,omitempty"`
	LocB   uint32 `msgpack:"loc_b,omitempty"`
	LocC   uint32 `msgpack:"loc_c,omitempty"`
}

func (sm *snapMessage) loc() Loc { return Loc{A: sm.LocA, B: sm.LocB, C: sm.LocC} }

type snapInfo struct {
	Consumer         string     `msgpack:"consumer,omitempty"`
	FirstEnqueuedAt  int64      `msgpack:"first_enq,omitempty"`
	FirstDeliveredAt int64      `msgpack:"first_del,omitempty"`
	LastDeliveredAt  int64      `msgpack:"last_del,omitempty"`
	History          []Event    `msgpack:"history,omitempty"`
	DeadAt           int64      `msgpack:"dead_at,omitempty"`
	DeadReason       DeadReason `msgpack:"dead_reason,omitempty"`
	DeadText         string     `msgpack:"dead_text,omitempty"`
}

type snapDedup struct {
	ID  idKey  `msgpack:"id"`
	Seq uint64 `msgpack:"seq"`
	At  int64  `msgpack:"at"`
}

// Snapshot freezes the current state. It copies the metadata of every
// message (O(messages), no body I/O) and pins the body store; the bodies are
// read later by Persist.
func (f *FSM) Snapshot() *Snapshot {
	s := &Snapshot{
		header: snapHeader{
			Version: snapshotVersionFull, Config: f.cfg, Clock: f.clock,
			LastSeq: f.lastSeq, Counters: f.counters,
		},
		messages: make([]snapMessage, 0, f.table.len()+f.dead.Len()),
		store:    f.store,
		release:  f.store.Pin(),
	}
	f.eachMessage(func(m *message) { s.messages = append(s.messages, snapOf(m)) })
	s.dedup = f.dedupEntries()
	s.header.Messages, s.header.Dedup = len(s.messages), len(s.dedup)
	return s
}

// eachMessage visits live messages and dead letters together in seq order.
func (f *FSM) eachMessage(fn func(*message)) {
	var dead []*message
	f.dead.Ascend(func(m *message) bool { dead = append(dead, m); return true })
	f.table.ascend(func(m *message) bool {
		for len(dead) > 0 && dead[0].seq < m.seq {
			fn(dead[0])
			dead = dead[1:]
		}
		fn(m)
		return true
	})
	for _, m := range dead {
		fn(m)
	}
}

func snapOf(m *message) snapMessage {
	sm := snapMessage{
		Seq: m.seq, ID: m.id(), EnqueuedAt: m.enqueuedAt, VisibleAt: m.visibleAt,
		Attempts: m.attempts, State: m.state, Stored: m.stored, CRC: m.crc,
		LocA: m.pos.A, LocB: m.pos.B, LocC: m.pos.C,
	}
	if m.group != nil {
		sm.Group = m.group.name
	}
	if in := m.info; in != nil {
		sm.HasInfo = true
		sm.Info = snapInfo{
			Consumer: in.consumer, FirstEnqueuedAt: in.firstEnqueuedAt,
			FirstDeliveredAt: in.firstDeliveredAt, LastDeliveredAt: in.lastDeliveredAt,
			History: in.history, DeadAt: in.deadAt, DeadReason: in.deadReason, DeadText: in.deadText,
		}
	}
	return sm
}

func (f *FSM) dedupEntries() []snapDedup {
	out := make([]snapDedup, 0, f.dedupIDs.len())
	mark := 0
	for i := range f.dedupIDs.len() {
		abs := f.dedupAt + uint64(i)
		for mark+1 < f.marks.len() && f.marks.at(mark+1).index <= abs {
			mark++
		}
		id := f.dedupIDs.at(i)
		out = append(out, snapDedup{ID: id, Seq: f.dedup[id], At: f.marks.at(mark).at})
	}
	return out
}

// Persist writes the full form of the snapshot, payloads included, to w.
func (s *Snapshot) Persist(w io.Writer) error { return s.persist(w, formFull) }

// PersistLocal writes the local form of the snapshot to w: metadata and
// each message's location, no payload bytes. Only Restore on this replica
// with the same body store can use it.
func (s *Snapshot) PersistLocal(w io.Writer) error { return s.persist(w, formLocal) }

func (s *Snapshot) persist(w io.Writer, form snapForm) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := msgpack.NewEncoder(bw)
	enc.UseCompactInts(true)
	h := s.header
	if form == formLocal {
		h.Version, h.Form = snapshotVersionLocal, formLocal
	}
	if err := enc.Encode(&h); err != nil {
		return fmt.Errorf("persist snapshot header: %w", err)
	}
	for i := range s.messages {
		sm := s.messages[i]
		if form == formFull {
			_, payload, err := s.store.Read(sm.loc())
			if err != nil {
				return fmt.Errorf("persist snapshot: body of seq %d: %w", sm.Seq, err)
			}
			sm.Payload = payload
			sm.Stored, sm.CRC, sm.LocA, sm.LocB, sm.LocC = 0, 0, 0, 0, 0
		}
		if err := enc.Encode(&sm); err != nil {
			return fmt.Errorf("persist snapshot: seq %d: %w", sm.Seq, err)
		}
	}
	for i := range s.dedup {
		if err := enc.Encode(&s.dedup[i]); err != nil {
			return fmt.Errorf("persist snapshot dedup: %w", err)
		}
	}
	return bw.Flush()
}

// Release unpins the body store. It is safe to call more than once.
func (s *Snapshot) Release() {
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// Restore replaces the whole state with the snapshot read from r, in
// either form (see the top of this file). The old bodies are released to
// the store once the new state is in place. On error the FSM is left
// empty.
func (f *FSM) Restore(r io.Reader) error {
	var old []*message
	f.eachMessage(func(m *message) { old = append(old, m) })
	f.reset()
	err := f.restore(r)
	if err != nil {
		f.Reset()
	}
	for _, m := range old {
		f.forgetBody(m)
	}
	return err
}

func (f *FSM) restore(r io.Reader) error {
	dec := msgpack.NewDecoder(bufio.NewReaderSize(r, 1<<16))
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("%w: header: %w", ErrSnapshotFormat, err)
	}
	switch {
	case h.Version == snapshotVersionFull && h.Form == formFull:
	case h.Version == snapshotVersionLocal && (h.Form == formFull || h.Form == formLocal):
	default:
		return fmt.Errorf("%w: version %d form %d (want %d, or %d local)", ErrSnapshotFormat, h.Version, h.Form,
			snapshotVersionFull, snapshotVersionLocal)
	}
	if err := h.Config.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
	}
	f.cfg, f.clock, f.lastSeq, f.counters = h.Config, h.Clock, h.LastSeq, h.Counters
	var prev uint64
	for i := range h.Messages {
		var sm snapMessage
		if err := dec.Decode(&sm); err != nil {
			return fmt.Errorf("%w: message %d of %d: %w", ErrSnapshotFormat, i, h.Messages, err)
		}
		if len(sm.ID) > IDBytesMax {
			return fmt.Errorf("%w: message %d of %d: id of %d bytes", ErrSnapshotFormat, i, h.Messages, len(sm.ID))
		}
		if sm.Seq <= prev || sm.Seq > h.LastSeq {
			return fmt.Errorf("%w: message %d of %d: seq %d after %d (last %d)", ErrSnapshotFormat, i, h.Messages,
				sm.Seq, prev, h.LastSeq)
		}
		prev = sm.Seq
		if err := f.restoreMessage(&sm, h.Form); err != nil {
			return fmt.Errorf("%w: message %d of %d: %w", ErrSnapshotFormat, i, h.Messages, err)
		}
	}
	for i := range h.Dedup {
		var d snapDedup
		if err := dec.Decode(&d); err != nil {
			return fmt.Errorf("%w: dedup entry %d of %d: %w", ErrSnapshotFormat, i, h.Dedup, err)
		}
		f.rememberAt(d.ID, d.Seq, d.At)
	}
	return nil
}

// Reset empties the FSM, releasing every body to the store.
func (f *FSM) Reset() {
	cfg := f.cfg
	f.eachMessage(f.forgetBody)
	f.reset()
	f.cfg = cfg
}

func (f *FSM) restoreMessage(sm *snapMessage, form snapForm) error {
	m := &message{seq: sm.Seq, enqueuedAt: sm.EnqueuedAt, attempts: sm.Attempts}
	m.setID(sm.ID)
	if sm.HasInfo {
		in := sm.Info
		m.info = &deliveryInfo{
			consumer: in.Consumer, firstEnqueuedAt: in.FirstEnqueuedAt,
			firstDeliveredAt: in.FirstDeliveredAt, lastDeliveredAt: in.LastDeliveredAt,
			history: slices.Clip(in.History), deadAt: in.DeadAt, deadReason: in.DeadReason, deadText: in.DeadText,
		}
	}
	if form == formLocal {
		if err := f.keepBody(m, sm); err != nil {
			return err
		}
	} else {
		f.storeBody(m, sm.Payload)
	}
	m.visibleAt = sm.VisibleAt
	if sm.State == stateDead {
		if sm.Group != "" {
			m.group = &group{name: sm.Group}
		}
		m.state = stateDead
		f.dead.ReplaceOrInsert(m)
		f.gauges.dead++
		f.gauges.deadBytes += int64(m.stored)
		return nil
	}
	f.table.put(m)
	f.gauges.bytes += int64(m.stored)
	if sm.Group != "" {
		m.group = f.joinGroup(sm.Group, m)
	}
	if sm.State == stateInFlight {
		m.state = stateInFlight
		f.gauges.inFlight++
		f.timers.ReplaceOrInsert(m)
		return nil
	}
	f.schedule(m, sm.VisibleAt, true)
	return nil
}

// keepBody gives m the payload location a local snapshot recorded, telling
// a store that counts references about it.
func (f *FSM) keepBody(m *message, sm *snapMessage) error {
	if sm.Payload != nil || sm.Stored < 2 {
		return fmt.Errorf("seq %d: local record with %d payload bytes inline and size %d", sm.Seq, len(sm.Payload), sm.Stored)
	}
	m.pos = sm.loc()
	m.stored, m.crc = sm.Stored, sm.CRC
	if r, ok := f.store.(Retainer); ok {
		if err := r.Retain(m.seq, m.pos); err != nil {
			return fmt.Errorf("seq %d: body store: %w", m.seq, err)
		}
	}
	return nil
}
