package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// sampleRecords returns message records of form covering every field: no
// info, info with history, dead letters, groups, zero and extreme values,
// and times and locations that go backwards from one record to the next.
func sampleRecords(form snapForm) []snapMessage {
	hist := []Event{
		{Kind: EventNacked, At: t0 + 5, Attempt: 1, Consumer: "c1", Reason: "busy"},
		{Kind: EventLeaseExpired, At: 0, Attempt: 2, Consumer: "c2"},
		{Kind: EventRedriven, At: t0 - 7, Attempt: math.MaxUint32},
	}
	recs := []snapMessage{
		{Seq: 1, ID: benchID(1), EnqueuedAt: t0, VisibleAt: t0, State: stateReady},
		{Seq: 2, ID: "a", Group: "g", EnqueuedAt: t0, VisibleAt: t0 + int64(time.Hour), State: stateDelayed},
		{Seq: 9, ID: strings.Repeat("i", IDBytesMax), Group: strings.Repeat("g", GroupBytesMax), EnqueuedAt: t0 - 1000,
			VisibleAt: t0 + 30, Attempts: 3, State: stateInFlight, HasInfo: true,
			Info: snapInfo{Consumer: "c3", FirstDeliveredAt: t0, LastDeliveredAt: t0 + 20, History: hist}},
		{Seq: 10, ID: "dead", Group: "dg", EnqueuedAt: 0, VisibleAt: -5, Attempts: 2, State: stateDead, HasInfo: true,
			Info: snapInfo{Consumer: strings.Repeat("c", ConsumerBytesMax), FirstEnqueuedAt: t0 - 50, FirstDeliveredAt: 1,
				LastDeliveredAt: math.MaxInt64, History: hist[:1], DeadAt: math.MinInt64, DeadReason: DeadRejected,
				DeadText: strings.Repeat("r", ReasonBytesMax)}},
		{Seq: math.MaxUint64, EnqueuedAt: math.MaxInt64, VisibleAt: math.MinInt64, Attempts: math.MaxUint32,
			State: stateReady, HasInfo: true, Info: snapInfo{DeadReason: DeadLeaseExpired}},
	}
	locs := []Loc{{A: 7, B: 100, C: 1026}, {A: 7, B: 1130, C: 1026}, {A: 2, B: 5, C: math.MaxUint32},
		{A: math.MaxUint64, B: math.MaxUint32}, {}}
	for i := range recs {
		if form == formFull {
			recs[i].Payload = encodePayload(map[string]string{"n": fmt.Sprint(i)}, bytes.Repeat([]byte{byte(i)}, 100*i))
			continue
		}
		recs[i].Stored, recs[i].CRC = uint32(2+100*i), math.MaxUint32-uint32(i)
		recs[i].LocA, recs[i].LocB, recs[i].LocC = locs[i].A, locs[i].B, locs[i].C
	}
	if form == formLocal {
		recs[4].Stored = storedBytesMax
	}
	return recs
}

func sampleDedup() []snapDedup {
	return []snapDedup{{ID: keyOf("a"), Seq: 5, At: t0}, {ID: keyOf("b"), Seq: 3, At: t0 - 9},
		{ID: idKey{Hi: math.MaxUint64}, Seq: math.MaxUint64, At: math.MinInt64}, {}}
}

func newSnapEncoder(w io.Writer) *msgpack.Encoder {
	enc := msgpack.NewEncoder(w)
	enc.UseCompactInts(true)
	return enc
}

func TestFSM_SnapshotRecordsRoundTrip(t *testing.T) {
	for _, form := range []snapForm{formFull, formLocal} {
		recs, dedup := sampleRecords(form), sampleDedup()
		var buf bytes.Buffer
		enc := newSnapEncoder(&buf)
		var ec, dc snapCodec
		for i := range recs {
			wantNoErr(t, ec.encodeMessage(enc, &recs[i], form))
		}
		for i := range dedup {
			wantNoErr(t, ec.encodeDedup(enc, &dedup[i]))
		}
		dec := msgpack.NewDecoder(&buf)
		for i, want := range recs {
			var got snapMessage
			if err := dc.decodeMessage(dec, &got, form); err != nil {
				t.Fatalf("form %d record %d: %v", form, i, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("form %d record %d:\n got %+v\nwant %+v", form, i, got, want)
			}
		}
		for i, want := range dedup {
			var got snapDedup
			if err := dc.decodeDedup(dec, &got); err != nil || got != want {
				t.Fatalf("dedup %d: %+v, %v (want %+v)", i, got, err, want)
			}
		}
		if err := dec.Skip(); err != io.EOF {
			t.Fatalf("form %d: bytes left after the records: %v", form, err)
		}
	}
}

// TestFSM_LocalSnapshotTakesFewBytesPerMessage guards the size of the
// local form: at most 60 bytes for a queued 1 KiB message with a
// 26-character id and no group, and 40 bytes frozen in RAM.
func TestFSM_LocalSnapshotTakesFewBytesPerMessage(t *testing.T) {
	if n := unsafe.Sizeof(frozenMessage{}); n > 40 {
		t.Fatalf("frozenMessage is %d bytes, more than 40", n)
	}
	const count = 5000
	cfg := DefaultQueueConfig()
	cfg.DedupWindow = 0
	f := snapBenchFSM(t, cfg, count)
	s := f.Snapshot()
	defer s.Release()
	var w countWriter
	wantNoErr(t, s.PersistLocal(&w))
	if per := float64(w.n) / count; per > 60 {
		t.Fatalf("local snapshot takes %.1f bytes per message", per)
	}
	g, _ := New(DefaultQueueConfig(), locStore{})
	var buf bytes.Buffer
	wantNoErr(t, s.PersistLocal(&buf))
	wantNoErr(t, g.Restore(&buf))
	if g.Digest() != f.Digest() {
		t.Fatal("local snapshot does not restore the state")
	}
}

// richEntryHarness is busyEntryHarness with a redriven message (first
// enqueue time, redrive event), a dead letter with history and messages in
// flight.
func richEntryHarness(t *testing.T) *entryHarness {
	h := busyEntryHarness(t)
	h.now += int64(time.Second)
	if r := h.apply(Command{Type: CmdRedrive, Redrive: &DeadFilter{}}); r.Err != nil || r.Count != 1 {
		t.Fatalf("redrive: %d, %v", r.Count, r.Err)
	}
	h.now += int64(time.Minute)
	ds := h.receive(4)
	items := []NackItem{{Receipt: ds[0].Receipt, ExplicitDelay: true, Delay: time.Minute, Reason: "again"}}
	h.apply(Command{Type: CmdNack, Nack: &NackCmd{Items: items}})
	h.apply(Command{Type: CmdReject, Reject: &RejectCmd{Items: []RejectItem{{Receipt: ds[1].Receipt, Reason: "no"}}}})
	if st := h.f.Stats(); st.Dead == 0 || st.InFlight == 0 || st.Delayed == 0 {
		t.Fatalf("harness lacks a state: %+v", st)
	}
	return h
}

// The record layouts of snapshot versions 2 and 3 as the code that wrote
// them declared them, kept apart from today's types so that the bytes old
// replicas wrote are generated independently.
type (
	oldSnapHeader struct {
		Version  int         `msgpack:"version"`
		Form     uint8       `msgpack:"form,omitempty"`
		Config   QueueConfig `msgpack:"config"`
		Clock    int64       `msgpack:"clock"`
		LastSeq  uint64      `msgpack:"last_seq"`
		Counters Counters    `msgpack:"counters"`
		Messages int         `msgpack:"messages"`
		Dedup    int         `msgpack:"dedup"`
	}
	oldSnapMessage struct {
		Seq        uint64      `msgpack:"seq"`
		ID         string      `msgpack:"id"`
		Group      string      `msgpack:"group,omitempty"`
		EnqueuedAt int64       `msgpack:"enq"`
		VisibleAt  int64       `msgpack:"vis"`
		Attempts   uint32      `msgpack:"att"`
		State      uint8       `msgpack:"state"`
		HasInfo    bool        `msgpack:"has_info,omitempty"`
		Info       oldSnapInfo `msgpack:"info"`
		Payload    []byte      `msgpack:"payload"`
		Stored     uint32      `msgpack:"stored,omitempty"`
		CRC        uint32      `msgpack:"crc,omitempty"`
		LocA       uint64      `msgpack:"loc_a,omitempty"`
		LocB       uint32      `msgpack:"loc_b,omitempty"`
		LocC       uint32      `msgpack:"loc_c,omitempty"`
	}
	oldSnapInfo struct {
		Consumer         string     `msgpack:"consumer,omitempty"`
		FirstEnqueuedAt  int64      `msgpack:"first_enq,omitempty"`
		FirstDeliveredAt int64      `msgpack:"first_del,omitempty"`
		LastDeliveredAt  int64      `msgpack:"last_del,omitempty"`
		History          []oldEvent `msgpack:"history,omitempty"`
		DeadAt           int64      `msgpack:"dead_at,omitempty"`
		DeadReason       uint8      `msgpack:"dead_reason,omitempty"`
		DeadText         string     `msgpack:"dead_text,omitempty"`
	}
	oldEvent struct {
		Kind     uint8  `msgpack:"kind"`
		At       int64  `msgpack:"at"`
		Attempt  uint32 `msgpack:"attempt"`
		Consumer string `msgpack:"consumer,omitempty"`
		Reason   string `msgpack:"reason,omitempty"`
	}
	oldSnapDedup struct {
		ID struct {
			Hi uint64 `msgpack:"hi"`
			Lo uint64 `msgpack:"lo"`
		} `msgpack:"id"`
		Seq uint64 `msgpack:"seq"`
		At  int64  `msgpack:"at"`
	}
)

// persistOld writes f's state as a snapshot of version 2 or 3 in form, as
// the code of those versions did.
func persistOld(t *testing.T, f *FSM, version int, form snapForm) []byte {
	var msgs []*message
	f.eachMessage(func(m *message) { msgs = append(msgs, m) })
	dedup := f.dedupEntries()
	var buf bytes.Buffer
	enc := newSnapEncoder(&buf)
	wantNoErr(t, enc.Encode(&oldSnapHeader{Version: version, Form: uint8(form), Config: f.cfg, Clock: f.clock,
		LastSeq: f.lastSeq, Counters: f.counters, Messages: len(msgs), Dedup: len(dedup)}))
	for _, m := range msgs {
		sm := oldSnapMessage{Seq: m.seq, ID: m.id(), EnqueuedAt: m.enqueuedAt, VisibleAt: m.visibleAt,
			Attempts: m.attempts, State: uint8(m.state)}
		if m.group != nil {
			sm.Group = m.group.name
		}
		if in := m.info; in != nil {
			sm.HasInfo = true
			sm.Info = oldSnapInfo{Consumer: in.consumer, FirstEnqueuedAt: in.firstEnqueuedAt,
				FirstDeliveredAt: in.firstDeliveredAt, LastDeliveredAt: in.lastDeliveredAt, DeadAt: in.deadAt,
				DeadReason: uint8(in.deadReason), DeadText: in.deadText}
			for _, e := range in.history {
				sm.Info.History = append(sm.Info.History, oldEvent{uint8(e.Kind), e.At, e.Attempt, e.Consumer, e.Reason})
			}
		}
		if form == formFull {
			var err error
			_, sm.Payload, err = f.store.Read(m.pos)
			wantNoErr(t, err)
		} else {
			sm.Stored, sm.CRC, sm.LocA, sm.LocB, sm.LocC = m.stored, m.crc, m.pos.A, m.pos.B, m.pos.C
		}
		wantNoErr(t, enc.Encode(&sm))
	}
	for _, d := range dedup {
		var od oldSnapDedup
		od.ID.Hi, od.ID.Lo, od.Seq, od.At = d.ID.Hi, d.ID.Lo, d.Seq, d.At
		wantNoErr(t, enc.Encode(&od))
	}
	return buf.Bytes()
}

// TestFSM_RestoreReadsEveryVersion restores snapshots of versions 2, 3
// and 4 in each form they exist in, directly and after WriteFullSnapshot
// turned them into the newest full form.
func TestFSM_RestoreReadsEveryVersion(t *testing.T) {
	h := richEntryHarness(t)
	at := h.now + int64(time.Hour)
	snap := h.f.Snapshot()
	var local4, full4 bytes.Buffer
	wantNoErr(t, snap.PersistLocal(&local4))
	wantNoErr(t, snap.Persist(&full4))
	snap.Release()
	cases := []struct {
		name  string
		data  []byte
		local bool
	}{
		{"v2 full", persistOld(t, h.f, snapshotVersionFull, formFull), false},
		{"v3 full", persistOld(t, h.f, snapshotVersionLocal, formFull), false},
		{"v3 local", persistOld(t, h.f, snapshotVersionLocal, formLocal), true},
		{"v4 full", full4.Bytes(), false},
		{"v4 local", local4.Bytes(), true},
	}
	want, wantBodies := h.f.Digest(), allBodies(t, h.f, at)
	check := func(name string, data []byte, store BodyStore) {
		t.Helper()
		g, _ := New(DefaultQueueConfig(), store)
		if err := g.Restore(bytes.NewReader(data)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantNoErr(t, g.checkInvariants())
		if g.Digest() != want {
			t.Fatalf("%s: restored digest differs", name)
		}
		if got := allBodies(t, g, at); !reflect.DeepEqual(got, wantBodies) {
			t.Fatalf("%s: bodies\n%v\nwant\n%v", name, got, wantBodies)
		}
		g.Reset()
	}
	for _, c := range cases {
		if c.local {
			check(c.name, c.data, h.store)
		} else {
			check(c.name, c.data, NewMemBodyStore())
		}
		var full bytes.Buffer
		if err := WriteFullSnapshot(bytes.NewReader(c.data), &full, h.store); err != nil {
			t.Fatalf("%s: WriteFullSnapshot: %v", c.name, err)
		}
		var head snapHeader
		wantNoErr(t, msgpack.NewDecoder(bytes.NewReader(full.Bytes())).Decode(&head))
		if head.Version != snapshotVersionCompact || head.Form != formFull {
			t.Fatalf("%s: WriteFullSnapshot wrote version %d form %d", c.name, head.Version, head.Form)
		}
		if c.name == "v4 full" && !bytes.Equal(full.Bytes(), full4.Bytes()) {
			t.Fatal("WriteFullSnapshot of a version 4 full snapshot differs from it")
		}
		check(c.name+" converted", full.Bytes(), NewMemBodyStore())
	}
}

// TestFSM_SnapshotOfDeliveredMessagesPersistsWhileTheyChange persists a
// snapshot while the FSM leases, nacks and dead-letters the messages it
// froze, all of which have delivery info (changed in place by those
// transitions). Run with -race.
func TestFSM_SnapshotOfDeliveredMessagesPersistsWhileTheyChange(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxReceives = 3 })
	for i := range 200 {
		h.send(fmt.Sprint(i), fmt.Sprintf("g%d", i%3), "body")
	}
	h.f.cfg.MaxReceives = 3
	for range 2 {
		for _, d := range h.receive("c1", 1000, time.Minute) {
			wantNoErr(t, h.nack(d.Receipt, 0, true, "retry"))
		}
	}
	want := h.f.Digest()
	snap := h.f.Snapshot()
	var buf bytes.Buffer
	var perr error
	var wg sync.WaitGroup
	wg.Go(func() { perr = snap.Persist(&buf) })
	for ds := h.receive("c2", 1000, time.Minute); len(ds) > 0; ds = h.receive("c2", 1000, time.Minute) {
		for _, d := range ds {
			wantNoErr(t, h.reject(d.Receipt, "no"))
		}
	}
	wg.Wait()
	snap.Release()
	wantNoErr(t, perr)
	if st := h.f.Stats(); st.Dead != 200 {
		t.Fatalf("%+v", st)
	}
	g, _ := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, g.Restore(&buf))
	if g.Digest() != want {
		t.Fatal("snapshot persisted while its messages changed does not restore the state it froze")
	}
}

// compactRecord builds the bytes of a record: fields are msgpack values
// already encoded.
func compactRecord(fields ...[]byte) []byte {
	out := []byte{0x90 | byte(len(fields))}
	for _, f := range fields {
		out = append(out, f...)
	}
	return out
}

func TestFSM_SnapshotDecoderRefusesBadRecords(t *testing.T) {
	one, empty, zero, nilv := []byte{0x01}, []byte{0xa0}, []byte{0x00}, []byte{0xc0}
	head := [][]byte{one, empty, empty, zero, zero, zero, one, nilv} // seq, id, group, enq, vis, att, state, info
	full := func(payload []byte) []byte { return compactRecord(append(head[:8:8], payload)...) }
	local := func(rest ...[]byte) []byte { return compactRecord(append(head[:8:8], rest...)...) }
	with := func(i int, v []byte) []byte {
		f := append([][]byte(nil), head...)
		f[i] = v
		return compactRecord(append(f, []byte{0xc4, 0x02, 0, 0})...)
	}
	info := func(hist []byte) []byte {
		return append(append([]byte{0x98, 0xa0, 0xc0, 0xc0, 0xc0}, hist...), 0xc0, 0x00, 0xa0)
	}
	msgs := map[string][]byte{
		"not an array":         nilv,
		"unknown field count":  compactRecord(one, empty),
		"seq not increasing":   with(0, zero),
		"negative seq delta":   with(0, []byte{0xff}),
		"id too long":          with(1, []byte{0xda, 0x01, 0x01}),
		"id not a string":      with(1, []byte{0xc4, 0x01, 'a'}),
		"group too long":       with(2, []byte{0xdb, 0xff, 0xff, 0xff, 0xff}),
		"state zero":           with(6, zero),
		"state too large":      with(6, []byte{0x05}),
		"attempts too large":   with(5, []byte{0xcf, 0, 0, 0, 1, 0, 0, 0, 0}),
		"history too long":     with(7, info([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})),
		"event kind zero":      with(7, info([]byte{0x91, 0x95, 0x00, 0xc0, 0x00, 0xa0, 0xa0})),
		"info of 7 fields":     with(7, []byte{0x97}),
		"payload missing":      full(nilv),
		"payload malformed":    full([]byte{0xc4, 0x01, 0x00}),
		"payload over the max": full([]byte{0xc6, 0x01, 0x00, 0x00, 0x00}),
		"payload cut short":    full([]byte{0xc6, 0x00, 0x80, 0x00, 0x00, 0x01, 0x00}),
		"stored size zero":     local(zero, zero, zero, zero, zero),
		"stored size negative": local([]byte{0xff}, zero, zero, zero, zero),
		"location below zero":  local([]byte{0x10}, zero, zero, []byte{0xff}, zero),
		"location cut short":   local([]byte{0x10}, zero, zero),
	}
	for name, data := range msgs {
		form := formFull
		if data[0] == 0x9d {
			form = formLocal
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var c snapCodec
		var sm snapMessage
		err := c.decodeMessage(msgpack.NewDecoder(bytes.NewReader(data)), &sm, form)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: decoded %+v", name, sm)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: allocated %d bytes", name, n)
		}
	}
}

func TestFSM_SnapshotDecoderRefusesBadDedupEntriesAndRestoreFailsCleanly(t *testing.T) {
	one := []byte{0x01}
	for name, data := range map[string][]byte{
		"short key":     compactRecord([]byte{0xc4, 0x0f}, one, one),
		"unknown count": compactRecord([]byte{0xc4, 0x00}),
		"key as string": compactRecord(append([]byte{0xb0}, make([]byte, 16)...), one, one),
	} {
		var c snapCodec
		var d snapDedup
		if err := c.decodeDedup(msgpack.NewDecoder(bytes.NewReader(data)), &d); err == nil {
			t.Errorf("dedup %s: decoded %+v", name, d)
		}
	}
	// A version 4 header followed by a bad record fails Restore cleanly.
	var buf bytes.Buffer
	wantNoErr(t, newSnapEncoder(&buf).Encode(&snapHeader{Version: snapshotVersionCompact, Config: DefaultQueueConfig(),
		LastSeq: 5, Messages: 1}))
	buf.Write([]byte{0x99, 0x01, 0xa0, 0xa0, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xc4, 0x02, 0x00, 0x00}) // state 0
	hh := busyHarness(t)
	if err := hh.f.Restore(&buf); !errors.Is(err, ErrSnapshotFormat) {
		t.Fatalf("restore of a bad record: %v", err)
	}
	if st := hh.f.Stats(); st.Ready+st.Delayed+st.InFlight+st.Dead != 0 || hh.store.Live() != 0 {
		t.Fatalf("FSM not empty after a failed restore: %+v", st)
	}
}

// FuzzFSM_DecodeSnapshotMessage feeds arbitrary bytes to the decoders of
// version 4 message records (both forms) and dedup entries. They must
// return an error or a record that encodes back to an equal record; never
// panic.
func FuzzFSM_DecodeSnapshotMessage(f *testing.F) {
	for _, form := range []snapForm{formFull, formLocal} {
		for _, r := range sampleRecords(form) {
			var buf bytes.Buffer
			var c snapCodec
			wantNoErr(f, c.encodeMessage(newSnapEncoder(&buf), &r, form))
			f.Add(buf.Bytes())
		}
	}
	for _, d := range sampleDedup() {
		var buf bytes.Buffer
		var c snapCodec
		wantNoErr(f, c.encodeDedup(newSnapEncoder(&buf), &d))
		f.Add(buf.Bytes())
	}
	f.Add([]byte{0x99, 0x01, 0xa0, 0xa0, 0x00, 0x00, 0x00, 0x01, 0xc0, 0xc6, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, form := range []snapForm{formFull, formLocal} {
			var c snapCodec
			var sm snapMessage
			if err := c.decodeMessage(msgpack.NewDecoder(bytes.NewReader(data)), &sm, form); err != nil {
				continue
			}
			var buf bytes.Buffer
			var ec, dc snapCodec
			wantNoErr(t, ec.encodeMessage(newSnapEncoder(&buf), &sm, form))
			var back snapMessage
			if err := dc.decodeMessage(msgpack.NewDecoder(&buf), &back, form); err != nil || !reflect.DeepEqual(back, sm) {
				t.Fatalf("form %d: re-encoded record decodes to %+v, %v (want %+v)", form, back, err, sm)
			}
		}
		var c snapCodec
		var d snapDedup
		if err := c.decodeDedup(msgpack.NewDecoder(bytes.NewReader(data)), &d); err == nil {
			var buf bytes.Buffer
			var ec, dc snapCodec
			wantNoErr(t, ec.encodeDedup(newSnapEncoder(&buf), &d))
			var back snapDedup
			if err := dc.decodeDedup(msgpack.NewDecoder(&buf), &back); err != nil || back != d {
				t.Fatalf("re-encoded dedup entry decodes to %+v, %v (want %+v)", back, err, d)
			}
		}
	})
}
