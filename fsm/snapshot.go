package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/ferrymq/ferry/wal"
	"github.com/vmihailenco/msgpack/v5"
)

// snapshotVersion is the format version of persisted snapshots.
const snapshotVersion = 2

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
	pos        wal.Pos
}

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
			Version: snapshotVersion, Config: f.cfg, Clock: f.clock,
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
		Seq: m.seq, ID: m.id, EnqueuedAt: m.enqueuedAt, VisibleAt: m.visibleAt,
		Attempts: m.attempts, State: m.state, pos: m.pos,
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

// Persist writes the snapshot, bodies included, to w.
func (s *Snapshot) Persist(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := msgpack.NewEncoder(bw)
	enc.UseCompactInts(true)
	if err := enc.Encode(&s.header); err != nil {
		return fmt.Errorf("persist snapshot header: %w", err)
	}
	for i := range s.messages {
		sm := &s.messages[i]
		_, payload, err := s.store.Read(sm.pos)
		if err != nil {
			return fmt.Errorf("persist snapshot: body of seq %d: %w", sm.Seq, err)
		}
		sm.Payload = payload
		err = enc.Encode(sm)
		sm.Payload = nil
		if err != nil {
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

// Restore replaces the whole state with the snapshot read from r. The old
// bodies are released to the store. On error the FSM is left empty.
func (f *FSM) Restore(r io.Reader) error {
	f.eachMessage(f.forgetBody)
	f.reset()
	dec := msgpack.NewDecoder(bufio.NewReaderSize(r, 1<<16))
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("%w: header: %w", ErrSnapshotFormat, err)
	}
	if h.Version != snapshotVersion {
		return fmt.Errorf("%w: version %d (want %d)", ErrSnapshotFormat, h.Version, snapshotVersion)
	}
	if err := h.Config.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
	}
	f.cfg, f.clock, f.lastSeq, f.counters = h.Config, h.Clock, h.LastSeq, h.Counters
	for i := range h.Messages {
		var sm snapMessage
		if err := dec.Decode(&sm); err != nil {
			f.Reset()
			return fmt.Errorf("%w: message %d of %d: %w", ErrSnapshotFormat, i, h.Messages, err)
		}
		f.restoreMessage(&sm)
	}
	for i := range h.Dedup {
		var d snapDedup
		if err := dec.Decode(&d); err != nil {
			f.Reset()
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

func (f *FSM) restoreMessage(sm *snapMessage) {
	m := &message{seq: sm.Seq, id: sm.ID, enqueuedAt: sm.EnqueuedAt, attempts: sm.Attempts}
	if sm.HasInfo {
		in := sm.Info
		m.info = &deliveryInfo{
			consumer: in.Consumer, firstEnqueuedAt: in.FirstEnqueuedAt,
			firstDeliveredAt: in.FirstDeliveredAt, lastDeliveredAt: in.LastDeliveredAt,
			history: slices.Clip(in.History), deadAt: in.DeadAt, deadReason: in.DeadReason, deadText: in.DeadText,
		}
	}
	f.storeBody(m, sm.Payload)
	m.visibleAt = sm.VisibleAt
	if sm.State == stateDead {
		if sm.Group != "" {
			m.group = &group{name: sm.Group}
		}
		m.state = stateDead
		f.dead.ReplaceOrInsert(m)
		f.gauges.dead++
		f.gauges.deadBytes += int64(m.stored)
		return
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
		return
	}
	f.schedule(m, sm.VisibleAt, true)
}
