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
//   - Full (Persist): each message record carries its stored payload. It
//     is self-contained: what a replica that lacks our log entries or body
//     records needs (a snapshot sent to a follower). Restore appends every
//     payload to the body store.
//   - Local (PersistLocal): each message record carries its location in the
//     body store, the payload's size and checksum, and no payload bytes. It
//     is valid only for restoring on the replica that wrote it, on the same
//     body store, while the store still holds those locations (for example
//     at restart, from the log entries the store keeps). Restore writes no
//     payload: it keeps the locations, and calls Retain on a store that
//     counts references.
//
// Versions: 2 (full form only) and 3 (either form) encode records as
// msgpack maps with field names (snapMessage, snapDedup); 4, written now,
// encodes them as compact arrays (see snapcodec.go). The header is a map
// in every version. Restore reads all of them; digests of the restored
// state are equal.
const (
	snapshotVersionFull    = 2
	snapshotVersionLocal   = 3
	snapshotVersionCompact = 4
)

// snapForm says what a snapshot's message records carry.
type snapForm uint8

const (
	formFull  snapForm = iota // payloads inline
	formLocal                 // locations, sizes and checksums; no payloads
)

// snapReadable checks that a header names a version and form Restore and
// WriteFullSnapshot read, and says whether its records are maps.
func snapReadable(h *snapHeader) (legacy bool, err error) {
	switch {
	case h.Version == snapshotVersionFull && h.Form == formFull:
		return true, nil
	case h.Version == snapshotVersionLocal && (h.Form == formFull || h.Form == formLocal):
		return true, nil
	case h.Version == snapshotVersionCompact && (h.Form == formFull || h.Form == formLocal):
		return false, nil
	}
	return false, fmt.Errorf("%w: version %d form %d (want %d, %d or %d)", ErrSnapshotFormat, h.Version, h.Form,
		snapshotVersionFull, snapshotVersionLocal, snapshotVersionCompact)
}

// snapReader reads the records of one snapshot stream of any readable
// version.
type snapReader struct {
	dec    *msgpack.Decoder
	form   snapForm
	legacy bool
	codec  snapCodec
}

func (r *snapReader) message(sm *snapMessage) error {
	if r.legacy {
		*sm = snapMessage{}
		return r.dec.Decode(sm)
	}
	return r.codec.decodeMessage(r.dec, sm, r.form)
}

func (r *snapReader) dedup(d *snapDedup) error {
	if r.legacy {
		return r.dec.Decode(d)
	}
	return r.codec.decodeDedup(r.dec, d)
}

// ErrSnapshotFormat is returned by Restore for a stream that is not a
// snapshot of a known version or is cut short.
var ErrSnapshotFormat = errors.New("bad snapshot")

// Snapshot is a frozen copy of an FSM's state, taken by FSM.Snapshot. Its
// Persist may run on another goroutine while the FSM applies later commands:
// it holds its own copy of the metadata and a pin on the body store, so the
// bodies it names stay readable. Call Release when done with it.
type Snapshot struct {
	header   snapHeader
	messages []frozenMessage
	extras   []frozenExtra // for the messages with a group or delivery info, in order
	dedup    frozenDedup
	store    BodyStore
	release  func()
}

// frozenMessage is what a Snapshot keeps of one message: a copy of the
// fields that change after a message is created, and the message itself
// for the rest (seq, id, enqueue time, stored size and checksum), which
// nothing writes once it is in the table, so Persist may read them while
// the FSM changes the other fields. Its group and delivery info, which
// most queued messages lack, are kept apart (frozenExtra). It takes 40
// bytes.
type frozenMessage struct {
	m         *message // for its immutable fields only
	visibleAt int64
	pos       Loc // a relocation or compaction changes it
	attempts  uint32
	state     msgState
}

// frozenExtra is the group and delivery info of frozen message i.
type frozenExtra struct {
	i     int
	group *group // nil, or the group at freeze time: only its name is read, which never changes
	// info is a copy of the message's delivery info (fields of which
	// change in place); the history slice is shared, since it is never
	// modified in place (see deliveryInfo.addEvent).
	info *deliveryInfo
}

// freeze appends m's frozen record to s.
func (s *Snapshot) freeze(m *message) {
	s.messages = append(s.messages, frozenMessage{m: m, visibleAt: m.visibleAt, pos: m.pos, attempts: m.attempts, state: m.state})
	if m.group == nil && m.info == nil {
		return
	}
	x := frozenExtra{i: len(s.messages) - 1, group: m.group}
	if m.info != nil {
		in := *m.info
		x.info = &in
	}
	s.extras = append(s.extras, x)
}

// record returns the record fm persists as, without payload, given its
// extra (nil if it has none). Its ID may share buf's memory (see
// message.idInto).
func (fm *frozenMessage) record(x *frozenExtra, buf *[ulidLen]byte) snapMessage {
	m := fm.m
	sm := snapMessage{
		Seq: m.seq, ID: m.idInto(buf), EnqueuedAt: m.enqueuedAt,
		VisibleAt: fm.visibleAt, Attempts: fm.attempts, State: fm.state, Stored: m.stored, CRC: m.crc,
		LocA: fm.pos.A, LocB: fm.pos.B, LocC: fm.pos.C, Priority: m.priority(),
	}
	if x == nil {
		return sm
	}
	if x.group != nil {
		sm.Group = x.group.name
	}
	if in := x.info; in != nil {
		sm.HasInfo = true
		sm.Info = snapInfo{
			Consumer: in.consumer, FirstEnqueuedAt: in.firstEnqueuedAt,
			FirstDeliveredAt: in.firstDeliveredAt, LastDeliveredAt: in.lastDeliveredAt,
			History: in.history, DeadAt: in.deadAt, DeadReason: in.deadReason, DeadText: in.deadText,
		}
	}
	return sm
}

// frozenDedup is the dedup window at freeze time: the table's ring of ids
// and seqs in acceptance order (shared with the table, not copied) and the
// acceptance marks.
type frozenDedup struct {
	ring  frozenDedupRing
	first uint64 // absolute position of the ring's oldest entry
	marks []dedupMark
}

func (f *FSM) freezeDedup() frozenDedup {
	d := frozenDedup{ring: f.dedup.freeze(), first: f.dedup.front(), marks: make([]dedupMark, f.marks.len())}
	for i := range d.marks {
		d.marks[i] = f.marks.at(i)
	}
	return d
}

// each calls fn with every entry in acceptance order.
func (d *frozenDedup) each(fn func(*snapDedup) error) error {
	mark := 0
	for i := range d.ring.n {
		abs := d.first + uint64(i)
		for mark+1 < len(d.marks) && d.marks[mark+1].index <= abs {
			mark++
		}
		e := d.ring.at(i)
		e2 := snapDedup{ID: e.key, Seq: e.seq, At: d.marks[mark].at}
		if err := fn(&e2); err != nil {
			return err
		}
	}
	return nil
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
	// Pause is set while deliveries are paused (absent otherwise, and in
	// snapshots written before pausing existed).
	Pause *PauseState `msgpack:"pause,omitempty"`
	// RateTAT is the delivery rate bound's schedule (rate.go), absent when
	// no delivery was ever bounded.
	RateTAT int64 `msgpack:"rate_tat,omitempty"`
	// Guard is the starvation guard's count (priority.go), absent when 0.
	Guard uint8 `msgpack:"prio_guard,omitempty"`
	// LaneClock, PlainTick and Lanes are the fair delivery stamps
	// (fair.go), absent when delivery was never fair.
	LaneClock uint64     `msgpack:"lane_clock,omitempty"`
	PlainTick uint64     `msgpack:"lane_plain,omitempty"`
	Lanes     []snapLane `msgpack:"lanes,omitempty"`
	// Schedules are the recurring schedules by name, absent when there are
	// none (and in snapshots written before schedules existed).
	Schedules []ScheduleInfo `msgpack:"schedules,omitempty"`
}

// snapMessage is one message record as Restore and WriteFullSnapshot see
// it, whatever the version; its tags give the map encoding of versions 2
// and 3.
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
	// The payload's size, CRC-32C and location: in the local form only.
	Stored uint32 `msgpack:"stored,omitempty"`
	CRC    uint32 `msgpack:"crc,omitempty"`
	LocA   uint64 `msgpack:"loc_a,omitempty"`
	LocB   uint32 `msgpack:"loc_b,omitempty"`
	LocC   uint32 `msgpack:"loc_c,omitempty"`
	// Priority: absent when 0, and in every record written before
	// priorities existed.
	Priority uint8 `msgpack:"prio,omitempty"`
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

// snapDedup is one dedup entry; its tags give the map encoding of versions
// 2 and 3.
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
			Version: snapshotVersionCompact, Config: f.cfg, Clock: f.clock,
			LastSeq: f.lastSeq, Counters: f.counters,
		},
		messages: make([]frozenMessage, 0, f.table.len()+f.dead.Len()),
		store:    f.store,
		release:  f.store.Pin(),
	}
	if f.pause.Paused {
		p := f.pause
		s.header.Pause = &p
	}
	s.header.RateTAT = f.rateTAT
	s.header.Guard = f.guard
	s.header.LaneClock, s.header.PlainTick, s.header.Lanes = f.laneClock, f.plainTick, f.freezeLanes()
	if len(f.schedules) > 0 {
		s.header.Schedules = f.Schedules()
	}
	f.eachMessage(s.freeze)
	s.dedup = f.freezeDedup()
	s.header.Messages, s.header.Dedup = len(s.messages), s.dedup.ring.n
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

func (f *FSM) dedupEntries() []snapDedup {
	out := make([]snapDedup, 0, f.dedup.len())
	mark := 0
	for i := range f.dedup.len() {
		abs := f.dedup.front() + uint64(i)
		for mark+1 < f.marks.len() && f.marks.at(mark+1).index <= abs {
			mark++
		}
		e := f.dedup.at(i)
		out = append(out, snapDedup{ID: e.key, Seq: e.seq, At: f.marks.at(mark).at})
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
	h.Form = form
	if err := enc.Encode(&h); err != nil {
		return fmt.Errorf("persist snapshot header: %w", err)
	}
	var c snapCodec
	var idBuf [ulidLen]byte
	extras := s.extras
	for i := range s.messages {
		var x *frozenExtra
		if len(extras) > 0 && extras[0].i == i {
			x, extras = &extras[0], extras[1:]
		}
		sm := s.messages[i].record(x, &idBuf)
		if form == formFull {
			_, payload, err := s.store.Read(sm.loc())
			if err != nil {
				return fmt.Errorf("persist snapshot: body of seq %d: %w", sm.Seq, err)
			}
			sm.Payload = payload
		}
		if err := c.encodeMessage(enc, &sm, form); err != nil {
			return fmt.Errorf("persist snapshot: seq %d: %w", sm.Seq, err)
		}
	}
	err := s.dedup.each(func(d *snapDedup) error { return c.encodeDedup(enc, d) })
	if err != nil {
		return fmt.Errorf("persist snapshot dedup: %w", err)
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
		f.releaseBody(m)
	}
	return err
}

func (f *FSM) restore(r io.Reader) error {
	dec := msgpack.NewDecoder(bufio.NewReaderSize(r, 1<<16))
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("%w: header: %w", ErrSnapshotFormat, err)
	}
	legacy, err := snapReadable(&h)
	if err != nil {
		return err
	}
	if err := h.Config.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
	}
	f.cfg, f.clock, f.lastSeq, f.counters = h.Config, h.Clock, h.LastSeq, h.Counters
	if h.Pause != nil {
		if !h.Pause.Paused {
			return fmt.Errorf("%w: pause recorded but not paused", ErrSnapshotFormat)
		}
		if err := ValidatePause(&PauseCmd{Paused: true, By: h.Pause.By}); err != nil {
			return fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
		}
		f.pause = *h.Pause
	}
	if h.RateTAT < 0 {
		return fmt.Errorf("%w: rate schedule %d", ErrSnapshotFormat, h.RateTAT)
	}
	f.rateTAT = h.RateTAT
	if h.Guard >= GuardEvery {
		return fmt.Errorf("%w: starvation guard at %d (below %d)", ErrSnapshotFormat, h.Guard, GuardEvery)
	}
	f.guard = h.Guard
	if err := f.restoreSchedules(h.Schedules); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
	}
	rd := snapReader{dec: dec, form: h.Form, legacy: legacy}
	var prev uint64
	for i := range h.Messages {
		var sm snapMessage
		if err := rd.message(&sm); err != nil {
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
	if err := f.restoreLanes(&h); err != nil {
		return err
	}
	for i := range h.Dedup {
		var d snapDedup
		if err := rd.dedup(&d); err != nil {
			return fmt.Errorf("%w: dedup entry %d of %d: %w", ErrSnapshotFormat, i, h.Dedup, err)
		}
		if err := f.restoreDedup(&d); err != nil {
			return fmt.Errorf("%w: dedup entry %d of %d: %w", ErrSnapshotFormat, i, h.Dedup, err)
		}
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
	if sm.Priority > PriorityMax {
		return fmt.Errorf("seq %d: priority %d (at most %d)", sm.Seq, sm.Priority, PriorityMax)
	}
	m := &message{seq: sm.Seq, enqueuedAt: sm.EnqueuedAt, attempts: sm.Attempts}
	m.setID(sm.ID)
	m.setPriority(sm.Priority)
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
	} else if err := f.tryStoreBody(m, sm.Payload); err != nil {
		// A restore that cannot store a body (a full disk) fails as a
		// whole and can be tried again; it does not crash the replica.
		return err
	}
	m.visibleAt = sm.VisibleAt
	if sm.State == stateDead {
		if sm.Group != "" {
			m.group = &group{name: sm.Group}
		}
		if m.info == nil {
			return fmt.Errorf("seq %d: dead letter without delivery info", sm.Seq)
		}
		m.state = stateDead
		f.dead.ReplaceOrInsert(m)
		f.deadOrder.ReplaceOrInsert(m)
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
		key, err := r.Retain(m.seq, m.pos)
		if err != nil {
			return fmt.Errorf("seq %d: body store: %w", m.seq, err)
		}
		f.keys.set(m.seq, key) // a body redriven to m is stored under an older seq
	}
	return nil
}
