package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ferrymq/ferry/wal"
	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

func walPos(seg, off uint32) wal.Pos { return wal.Pos{Segment: seg, Offset: off} }

// entryHarness drives an FSM on a MemEntryStore the way a replica applying
// its log does: each entry is handed to the store, then applied by index.
type entryHarness struct {
	t     testing.TB
	f     *FSM
	store *MemEntryStore
	index uint64
	now   int64
}

func newEntryHarness(t testing.TB) *entryHarness {
	t.Helper()
	store := NewMemEntryStore()
	f, err := New(DefaultQueueConfig(), store)
	wantNoErr(t, err)
	return &entryHarness{t: t, f: f, store: store, now: t0}
}

func (h *entryHarness) apply(c Command) Result {
	h.t.Helper()
	c.At = h.now
	data, err := EncodeCommand(c)
	wantNoErr(h.t, err)
	h.index++
	wantNoErr(h.t, h.store.PutEntry(h.index, data))
	r := h.f.ApplyEntry(h.index, data)
	if err := h.f.checkInvariants(); err != nil {
		h.t.Fatalf("after %s: %v", c.Type, err)
	}
	return r
}

func (h *entryHarness) send(msgs ...NewMessage) []SendOutcome {
	h.t.Helper()
	r := h.apply(Command{Type: CmdSend, Send: &SendCmd{Messages: msgs}})
	wantNoErr(h.t, r.Err)
	return r.Sent
}

func (h *entryHarness) receive(max int) []Delivery {
	h.t.Helper()
	r := h.apply(Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: max, Visibility: time.Minute}})
	wantNoErr(h.t, r.Err)
	return r.Delivered
}

// encodeSendV1 encodes a send command with every message in the 5-field
// form that entries written before the 4-field form hold.
func encodeSendV1(t testing.TB, at int64, msgs []NewMessage) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	wantNoErr(t, enc.Encode(&commandHeader{Type: CmdSend, At: at}))
	wantNoErr(t, enc.EncodeArrayLen(len(msgs)))
	for i := range msgs {
		wantNoErr(t, msgs[i].encodeV1(enc))
	}
	return buf.Bytes()
}

func sampleMessages() []NewMessage {
	return []NewMessage{
		{ID: "a", Body: []byte("alpha")},
		{ID: "b", Group: "g", Headers: map[string]string{"z": "1", "a": "", "m": "mid"}, Body: []byte("bravo"), Delay: time.Second},
		{ID: "c", Body: nil},
		{ID: "d", Headers: map[string]string{"k": strings.Repeat("v", 300)}, Body: bytes.Repeat([]byte{7}, 70000)},
	}
}

func TestFSM_SendDecodeRecordsWherePayloadsLie(t *testing.T) {
	msgs := sampleMessages()
	data, err := EncodeCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: msgs}})
	wantNoErr(t, err)
	c, err := decodeCommand(data)
	wantNoErr(t, err)
	for i, m := range c.Send.Messages {
		want := encodePayload(msgs[i].Headers, msgs[i].Body)
		if m.storedAt < 0 || m.storedAt+len(m.stored) > len(data) {
			t.Fatalf("message %d: payload at %d+%d outside %d bytes", i, m.storedAt, len(m.stored), len(data))
		}
		if !bytes.Equal(data[m.storedAt:m.storedAt+len(m.stored)], want) || !bytes.Equal(m.stored, want) {
			t.Fatalf("message %d: bytes at the recorded offset are not its stored payload", i)
		}
		if &m.stored[0] != &data[m.storedAt] {
			t.Fatalf("message %d: payload copied, not taken in place", i)
		}
	}
	// Re-encoding what was decoded reproduces the entry byte for byte.
	again, err := EncodeCommand(c)
	wantNoErr(t, err)
	if !bytes.Equal(again, data) {
		t.Fatal("re-encoded send differs")
	}
	// The public decoder hands back headers and bodies sharing nothing.
	pub, err := DecodeCommand(data)
	wantNoErr(t, err)
	for i, m := range pub.Send.Messages {
		if m.stored != nil || !reflect.DeepEqual(m.Headers, msgs[i].Headers) || !bytes.Equal(m.Body, msgs[i].Body) {
			t.Fatalf("message %d decoded as %+v", i, m)
		}
	}
	pub.Send.Messages[0].Body[0] = 'X'
	if !bytes.Equal(data, again) {
		t.Fatal("DecodeCommand's body aliases the entry")
	}
}

func TestFSM_OldFiveFieldSendDecodesAndAppliesAlike(t *testing.T) {
	msgs := sampleMessages()
	old := encodeSendV1(t, t0, msgs)
	c, err := DecodeCommand(old)
	wantNoErr(t, err)
	want := Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: msgs}}
	for i := range c.Send.Messages {
		got, w := c.Send.Messages[i], want.Send.Messages[i]
		if got.ID != w.ID || got.Group != w.Group || got.Delay != w.Delay || !bytes.Equal(got.Body, w.Body) ||
			len(got.Headers) != len(w.Headers) || (len(w.Headers) > 0 && !reflect.DeepEqual(got.Headers, w.Headers)) {
			t.Fatalf("message %d: %+v, want %+v", i, got, w)
		}
	}
	// An old entry and a new one with the same messages give the same state,
	// on a copying store and on an entry store alike.
	cur, err := EncodeCommand(want)
	wantNoErr(t, err)
	a, _ := New(DefaultQueueConfig(), NewMemBodyStore())
	a.Apply(old)
	es := NewMemEntryStore()
	b, _ := New(DefaultQueueConfig(), es)
	wantNoErr(t, es.PutEntry(1, old))
	b.ApplyEntry(1, old)
	n, _ := New(DefaultQueueConfig(), NewMemBodyStore())
	n.Apply(cur)
	if a.Digest() != n.Digest() || b.Digest() != n.Digest() {
		t.Fatal("old and new send encodings give different states")
	}
	if es.LiveEntries() != 0 || es.Live() != len(msgs) {
		t.Fatalf("old entry: %d entries referenced, %d live locations (want 0, %d body records)", es.LiveEntries(), es.Live(), len(msgs))
	}
}

func TestFSM_UnrepresentableHeadersFallBackToOldFormAndAreRefused(t *testing.T) {
	h := newEntryHarness(t)
	long := strings.Repeat("k", 0x10000)
	out := h.send(NewMessage{ID: "ok", Body: []byte("x")}, NewMessage{ID: "bad", Headers: map[string]string{long: "v"}, Body: []byte("y")})
	if out[0].Err != nil || !errors.Is(out[1].Err, ErrInvalidArgument) {
		t.Fatalf("outcomes %+v", out)
	}
	if h.store.LiveEntries() != 1 || h.store.Live() != 1 {
		t.Fatalf("%d entries, %d locations referenced", h.store.LiveEntries(), h.store.Live())
	}
}

func TestFSM_DecodeRefusesNonCanonicalPayloads(t *testing.T) {
	good, err := EncodeCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: []NewMessage{
		{ID: "a", Headers: map[string]string{"a": "1", "b": "2"}, Body: []byte("body")}}}})
	wantNoErr(t, err)
	i := bytes.Index(good, []byte("a\x01\x00\x00\x001"))
	if i < 0 {
		t.Fatal("header a not found in the entry")
	}
	swapped := bytes.Clone(good)
	swapped[i] = 'b' // keys now "b", "b": not strictly increasing
	short := bytes.Clone(good)
	short[i+1] = 9 // value length runs past the payload
	for name, data := range map[string][]byte{"duplicate keys": swapped, "bad value length": short} {
		if _, err := DecodeCommand(data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestFSM_ApplyEntryReferencesAcceptedPayloadsOnly(t *testing.T) {
	h := newEntryHarness(t)
	h.f.cfg.MaxMessageBytes = 10
	out := h.send(NewMessage{ID: "a", Body: []byte("one")}, NewMessage{ID: "big", Body: make([]byte, 11)},
		NewMessage{ID: "a", Body: []byte("dup")}, NewMessage{ID: "b", Headers: map[string]string{"h": "v"}, Body: []byte("two")})
	if out[0].Err != nil || out[1].Err == nil || !out[2].Duplicate || out[3].Err != nil {
		t.Fatalf("outcomes %+v", out)
	}
	if h.store.Live() != 2 || h.store.LiveEntries() != 1 {
		t.Fatalf("%d locations in %d entries, want 2 in 1", h.store.Live(), h.store.LiveEntries())
	}
	for _, m := range []*message{h.f.table.get(out[0].Seq), h.f.table.get(out[3].Seq)} {
		if m.pos.A != h.index {
			t.Fatalf("seq %d at %v, not in entry %d", m.seq, m.pos, h.index)
		}
	}
	ds := h.receive(10)
	if len(ds) != 2 || string(ds[0].Body) != "one" || string(ds[1].Body) != "two" || ds[1].Headers["h"] != "v" {
		t.Fatalf("deliveries %+v", ds)
	}
}

func TestFSM_EntryUnreferencedOnceEveryMessageIsGone(t *testing.T) {
	h := newEntryHarness(t)
	h.send(NewMessage{ID: "acked", Body: []byte("1")}, NewMessage{ID: "deleted", Body: []byte("2")},
		NewMessage{ID: "redriven", Body: []byte("3")}, NewMessage{ID: "purged", Body: []byte("4")})
	if h.store.LiveEntries() != 1 {
		t.Fatalf("%d live entries after the send", h.store.LiveEntries())
	}
	ds := h.receive(2)
	wantNoErr(t, h.apply(Command{Type: CmdAck, Ack: &AckCmd{Receipts: []Receipt{ds[0].Receipt}}}).Settled[0])
	wantNoErr(t, h.apply(Command{Type: CmdReject, Reject: &RejectCmd{Items: []RejectItem{{Receipt: ds[1].Receipt}}}}).Settled[0])
	h.apply(Command{Type: CmdDeleteDead, DeleteDead: &DeadFilter{}})
	ds = h.receive(1)
	if len(ds) != 1 || ds[0].ID != "redriven" {
		t.Fatalf("deliveries %+v", ds)
	}
	wantNoErr(t, h.apply(Command{Type: CmdReject, Reject: &RejectCmd{Items: []RejectItem{{Receipt: ds[0].Receipt}}}}).Settled[0])
	h.apply(Command{Type: CmdRedrive, Redrive: &DeadFilter{}}) // a redrive copies the body into a body record
	if h.store.LiveEntries() != 1 || h.store.Live() != 2 {
		t.Fatalf("%d live entries, %d locations with two messages left", h.store.LiveEntries(), h.store.Live())
	}
	h.apply(Command{Type: CmdPurge})
	if st := h.f.Stats(); st.Ready+st.InFlight+st.Dead != 0 {
		t.Fatalf("messages left: %+v", st)
	}
	if h.store.LiveEntries() != 0 || h.store.Live() != 0 || len(h.store.entries) != 1 {
		t.Fatalf("after every message is gone: %d entries, %d locations referenced, %d entries kept",
			h.store.LiveEntries(), h.store.Live(), len(h.store.entries))
	}
}

func TestFSM_EntryKeptWhilePinnedAfterItsMessagesGo(t *testing.T) {
	h := newEntryHarness(t)
	h.send(NewMessage{ID: "a", Body: []byte("kept")})
	snap := h.f.Snapshot()
	h.apply(Command{Type: CmdPurge})
	if h.store.LiveEntries() != 0 {
		t.Fatal("purged message still counted live")
	}
	var buf bytes.Buffer
	wantNoErr(t, snap.Persist(&buf))
	snap.Release()
	if h.store.entries[1] != nil || len(h.store.refs) != 0 {
		t.Fatalf("after release the store keeps the send entry (%v) or %d locations", h.store.entries[1] != nil, len(h.store.refs))
	}
	f, _ := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, f.Restore(&buf))
	if ds := f.ApplyCommand(Command{Type: CmdReceive, At: h.now, Receive: &ReceiveCmd{Consumer: "c", Max: 1}}).Delivered; len(ds) != 1 || string(ds[0].Body) != "kept" {
		t.Fatalf("deliveries %+v", ds)
	}
}

// busyEntryHarness is busyHarness on an entry store.
func busyEntryHarness(t *testing.T) *entryHarness {
	h := newEntryHarness(t)
	h.f.cfg.MaxReceives = 2
	for i := range 20 {
		group := ""
		if i%3 == 0 {
			group = fmt.Sprintf("g%d", i%2)
		}
		h.send(NewMessage{ID: fmt.Sprintf("m%d", i), Group: group, Body: []byte(fmt.Sprintf("body %d", i)),
			Headers: map[string]string{"n": fmt.Sprint(i)}})
	}
	h.send(NewMessage{ID: "later", Delay: time.Hour})
	ds := h.receive(8)
	wantNoErr(t, h.apply(Command{Type: CmdAck, Ack: &AckCmd{Receipts: []Receipt{ds[0].Receipt}}}).Settled[0])
	wantNoErr(t, h.apply(Command{Type: CmdReject, Reject: &RejectCmd{Items: []RejectItem{{Receipt: ds[1].Receipt, Reason: "bad"}}}}).Settled[0])
	h.apply(Command{Type: CmdNack, Nack: &NackCmd{Items: []NackItem{{Receipt: ds[2].Receipt, ExplicitDelay: true, Delay: time.Minute}}}})
	return h
}

// allBodies receives everything (an hour later) and returns id -> body,
// with the dead letters' bodies under "dead:" + id.
func allBodies(t testing.TB, f *FSM, at int64) map[string]string {
	t.Helper()
	out := map[string]string{}
	dead, _, err := f.PeekDead(DeadFilter{}, 0)
	wantNoErr(t, err)
	for _, d := range dead {
		out["dead:"+d.ID] = fmt.Sprint(d.Headers) + string(d.Body)
	}
	for _, d := range f.ApplyCommand(Command{Type: CmdReceive, At: at, Receive: &ReceiveCmd{Consumer: "z", Max: 100}}).Delivered {
		out[d.ID] = fmt.Sprint(d.Headers) + string(d.Body)
	}
	return out
}

func TestFSM_LocalSnapshotRestoresOnTheSameStore(t *testing.T) {
	h := busyEntryHarness(t)
	snap := h.f.Snapshot()
	var local, full bytes.Buffer
	wantNoErr(t, snap.PersistLocal(&local))
	wantNoErr(t, snap.Persist(&full))
	snap.Release()
	if bytes.Contains(local.Bytes(), []byte("body 7")) || !bytes.Contains(full.Bytes(), []byte("body 7")) {
		t.Fatal("local snapshot holds bodies, or the full one lacks them")
	}
	before := h.store.Live()
	g, _ := New(DefaultQueueConfig(), h.store)
	wantNoErr(t, g.Restore(bytes.NewReader(local.Bytes())))
	wantNoErr(t, g.checkInvariants())
	if g.Digest() != h.f.Digest() || !slices.Equal(fsmListing(g), fsmListing(h.f)) {
		t.Fatal("local restore differs from the original")
	}
	if h.store.Live() != before || len(h.store.entries) == 0 {
		t.Fatalf("local restore wrote bodies: %d locations, %d before", h.store.Live(), before)
	}
	// Restoring its own local snapshot onto a running FSM keeps the bodies.
	wantNoErr(t, h.f.Restore(bytes.NewReader(local.Bytes())))
	at := h.now + int64(time.Hour)
	got, want := allBodies(t, g, at), allBodies(t, h.f, at)
	if len(want) != 11 || !reflect.DeepEqual(got, want) {
		t.Fatalf("bodies after local restore:\n%v\nwant\n%v", got, want)
	}
	// Dropping both FSMs frees every entry.
	g.Reset()
	h.f.Reset()
	if h.store.LiveEntries() != 0 || h.store.Live() != 0 {
		t.Fatalf("after reset: %d entries, %d locations", h.store.LiveEntries(), h.store.Live())
	}
}

func TestFSM_FullSnapshotOfEntryStoreRestoresOnACopyingStore(t *testing.T) {
	h := busyEntryHarness(t)
	buf := persist(t, h.f)
	store := NewMemBodyStore()
	g, _ := New(DefaultQueueConfig(), store)
	wantNoErr(t, g.Restore(buf))
	if g.Digest() != h.f.Digest() || store.Live() != h.store.Live() {
		t.Fatalf("full restore: digest equal %v, %d bodies vs %d", g.Digest() == h.f.Digest(), store.Live(), h.store.Live())
	}
	at := h.now + int64(time.Hour)
	if got, want := allBodies(t, g, at), allBodies(t, h.f, at); !reflect.DeepEqual(got, want) {
		t.Fatalf("bodies differ:\n%v\n%v", got, want)
	}
}

// TestFSM_FullSnapshotIsCompactVersion4 checks the layout a follower
// receives: a version 4 header of form full, then message records as
// arrays of the full form's fields ending with the payload.
func TestFSM_FullSnapshotIsCompactVersion4(t *testing.T) {
	h := busyEntryHarness(t)
	dec := msgpack.NewDecoder(persist(t, h.f))
	head, err := dec.DecodeMap()
	wantNoErr(t, err)
	if fmt.Sprint(head["version"]) != fmt.Sprint(snapshotVersionCompact) || head["form"] != nil {
		t.Fatalf("full snapshot header %v", head)
	}
	rec, err := dec.DecodeSlice()
	wantNoErr(t, err)
	if len(rec) != snapFieldsFull {
		t.Fatalf("full snapshot record of %d fields: %v", len(rec), rec)
	}
	if p, ok := rec[len(rec)-1].([]byte); !ok || len(p) < 2 {
		t.Fatalf("full snapshot record without payload: %v", rec)
	}
}

func TestFSM_LocalSnapshotOnAnotherStoreFailsCleanly(t *testing.T) {
	h := busyEntryHarness(t)
	snap := h.f.Snapshot()
	var local bytes.Buffer
	wantNoErr(t, snap.PersistLocal(&local))
	snap.Release()
	other := NewMemEntryStore()
	g, _ := New(DefaultQueueConfig(), other)
	if err := g.Restore(&local); !errors.Is(err, ErrSnapshotFormat) {
		t.Fatalf("restore on another store: %v", err)
	}
	if st := g.Stats(); st.Ready+st.InFlight+st.Delayed+st.Dead != 0 || other.Live() != 0 {
		t.Fatalf("FSM not empty after failed restore: %+v", st)
	}
	// A header naming an unknown form is refused.
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	wantNoErr(t, enc.Encode(&snapHeader{Version: snapshotVersionLocal, Form: 7, Config: DefaultQueueConfig()}))
	if err := g.Restore(&buf); !errors.Is(err, ErrSnapshotFormat) {
		t.Fatalf("unknown form: %v", err)
	}
}

func TestFSM_CompactBodiesMovesPayloadsOutOfMostlyDeadEntries(t *testing.T) {
	h := newEntryHarness(t)
	var msgs []NewMessage
	for i := range 10 {
		msgs = append(msgs, NewMessage{ID: fmt.Sprint(i), Body: bytes.Repeat([]byte{byte('a' + i)}, 100)})
	}
	h.send(msgs...)
	ds := h.receive(9)
	rs := make([]Receipt, len(ds))
	for i, d := range ds {
		rs[i] = d.Receipt
	}
	h.apply(Command{Type: CmdAck, Ack: &AckCmd{Receipts: rs}})
	want := h.f.Digest()
	snap := h.f.Snapshot() // the old location must stay readable while pinned
	st, err := h.f.CompactBodies()
	wantNoErr(t, err)
	if st.SegmentsCompacted != 1 || st.RecordsMoved != 1 || st.SegmentsDeferred != 1 {
		t.Fatalf("compaction %+v", st)
	}
	if h.store.LiveEntries() != 0 || h.f.Digest() != want {
		t.Fatalf("after compaction %d entries live; digest kept %v", h.store.LiveEntries(), h.f.Digest() == want)
	}
	var old bytes.Buffer
	wantNoErr(t, snap.Persist(&old)) // reads the old location
	snap.Release()
	if len(h.store.entries) != 1 { // only the ack entry, unreferenced, is left
		t.Fatalf("%d entries kept after the pin was released", len(h.store.entries))
	}
	g, _ := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, g.Restore(&old))
	if g.Digest() != want {
		t.Fatal("snapshot taken before compaction restores another state")
	}
	ds = h.receive(1)
	if len(ds) != 1 || string(ds[0].Body) != strings.Repeat("j", 100) {
		t.Fatalf("after compaction: %+v", ds)
	}
}

func TestFSM_WALBodyStoreRefusesForeignLocations(t *testing.T) {
	s := WALBodyStore{}
	if _, _, err := s.Read(Loc{A: 1}); err == nil {
		t.Fatal("read a location with A set")
	}
	if err := s.MarkDead(Loc{A: 1}, 1); err == nil {
		t.Fatal("marked a location with A set dead")
	}
	if p, err := posOfLoc(locOfPos(walPos(3, 4096))); err != nil || p != walPos(3, 4096) {
		t.Fatalf("round trip gave %v, %v", p, err)
	}
}

// TestFSM_PropertyEntryStoreMatchesCopyStore applies the same random log to
// an FSM on a copying store (Apply) and one on an entry store (ApplyEntry,
// which sometimes compacts, and is sometimes replaced by a restore of its
// own local snapshot). Results, digests, listings and delivered bodies must
// agree at every step; once everything is drained, no entry is referenced.
func TestFSM_PropertyEntryStoreMatchesCopyStore(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := genConfig(rt)
		a, _ := New(cfg, NewMemBodyStore())
		store := NewMemEntryStore()
		b, _ := New(cfg, store)
		now := t0
		var index uint64
		var handed []Receipt
		step := func(cmd Command) {
			cmd.At = now
			data, err := EncodeCommand(cmd)
			if err != nil {
				rt.Fatal(err)
			}
			index++
			if err := store.PutEntry(index, data); err != nil {
				rt.Fatal(err)
			}
			ra, rb := a.Apply(data), b.ApplyEntry(index, data)
			if !reflect.DeepEqual(ra, rb) {
				rt.Fatalf("%s: results differ:\ncopy  %+v\nentry %+v", cmd.Type, ra, rb)
			}
			if a.Digest() != b.Digest() || !slices.Equal(fsmListing(a), fsmListing(b)) {
				rt.Fatalf("after %s: states differ", cmd.Type)
			}
			if err := b.checkInvariants(); err != nil {
				rt.Fatal(err)
			}
			for _, d := range ra.Delivered {
				handed = append(handed, d.Receipt)
			}
		}
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now += int64(rapid.SampledFrom([]time.Duration{0, time.Second, 5 * time.Second}).Draw(rt, "dt"))
			step(genCommand(rt, handed))
			switch rapid.IntRange(0, 9).Draw(rt, "local") {
			case 0:
				if _, err := b.CompactBodies(); err != nil {
					rt.Fatal(err)
				}
			case 1:
				b = restoreLocal(rt, b, store, rapid.Bool().Draw(rt, "inPlace"))
			}
			if a.Digest() != b.Digest() {
				rt.Fatal("compaction or local restore changed the state")
			}
		}
		for range 8 { // drain: leases expire, then purge and delete everything
			now += int64(time.Hour)
			step(Command{Type: CmdPurge})
			step(Command{Type: CmdDeleteDead, DeleteDead: &DeadFilter{}})
		}
		if st := b.Stats(); st.Ready+st.Delayed+st.InFlight+st.Dead != 0 {
			rt.Fatalf("not drained: %+v", st)
		}
		if store.LiveEntries() != 0 || store.Live() != 0 {
			rt.Fatalf("drained, yet %d entries and %d locations referenced", store.LiveEntries(), store.Live())
		}
	})
}

// restoreLocal persists f's local snapshot and restores it onto f itself or
// onto a new FSM on the same store (then f is dropped).
func restoreLocal(t *rapid.T, f *FSM, store *MemEntryStore, inPlace bool) *FSM {
	snap := f.Snapshot()
	var buf bytes.Buffer
	if err := snap.PersistLocal(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	g := f
	if !inPlace {
		g, _ = New(f.Config(), store)
	}
	if err := g.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if !inPlace {
		f.Reset()
	}
	return g
}

// FuzzFSM_DecodeSend feeds arbitrary bytes to the send decoder, alone and
// behind a valid send header. It must never panic; what decodes must point
// at its payloads correctly and survive a re-encode.
func FuzzFSM_DecodeSend(f *testing.F) {
	good, _ := EncodeCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: sampleMessages()[:3]}})
	f.Add(good)
	f.Add(encodeSendV1(f, t0, sampleMessages()[:2]))
	f.Add([]byte{0x92, 0x01, 0x00, 0x91, 0x94, 0xa1, 'a', 0xa0, 0xc4, 0x02, 0x00, 0x00, 0x00})
	f.Add([]byte{0x92, 0x01, 0x00, 0x91, 0x94, 0xa1, 'a', 0xa0, 0xc6, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, append([]byte{0x92, 0x01, 0x00}, data...)} {
			c, err := decodeCommand(in)
			if err != nil {
				if _, err2 := DecodeCommand(in); err2 == nil {
					t.Fatal("public decoder accepted what the internal one refused")
				}
				continue
			}
			if c.Send == nil {
				continue
			}
			for i, m := range c.Send.Messages {
				if m.stored == nil {
					continue
				}
				if m.storedAt < 0 || m.storedAt+len(m.stored) > len(in) || !bytes.Equal(in[m.storedAt:m.storedAt+len(m.stored)], m.stored) {
					t.Fatalf("message %d: payload offset %d wrong", i, m.storedAt)
				}
			}
			again, err := EncodeCommand(c)
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeCommand(again)
			if err != nil || len(back.Send.Messages) != len(c.Send.Messages) {
				t.Fatalf("re-encoded send does not decode: %v", err)
			}
			if _, err := DecodeCommand(in); err != nil {
				t.Fatalf("public decoder refused what the internal one accepted: %v", err)
			}
		}
	})
}

// TestFSM_MessageFitsItsSizeClass guards the per-message memory: the struct
// must stay within the 80-byte allocation class.
func TestFSM_MessageFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(message{}); n > 80 {
		t.Fatalf("message is %d bytes, more than 80", n)
	}
	var m message
	m.setID("0123456789")
	if m.id() != "0123456789" || (&message{}).id() != "" {
		t.Fatalf("id round trip gave %q", m.id())
	}
}

// TestFSM_DecodeRefusesCountsLargerThanTheEntry guards the decoders that
// allocate for a claimed length before reading: an entry claiming billions
// of items must fail at once instead of allocating for them.
func TestFSM_DecodeRefusesCountsLargerThanTheEntry(t *testing.T) {
	for name, data := range map[string][]byte{
		"reject items": {0x92, byte(CmdReject), 0x00, 0x91, 0xdd, 0x94, 0xa1, 0x61, 0xa0, 0xc3},
		"nack items":   {0x92, byte(CmdNack), 0x00, 0x81, 0xa5, 'i', 't', 'e', 'm', 's', 0xdd, 0x7f, 0xff, 0xff, 0xff, 0x80},
		"redrive seqs": {0x92, byte(CmdRedrive), 0x00, 0x81, 0xa4, 's', 'e', 'q', 's', 0xdc, 0xff, 0xff, 0x01},
		"cut string":   {0x92, byte(CmdRedrive), 0x00, 0x81, 0xa5, 'g', 'r', 'o', 'u', 'p', 0xdb, 0xff, 0xff, 0xff, 0xff},
		"bad code":     {0x92, byte(CmdExtend), 0x00, 0xc1},
	} {
		if _, err := DecodeCommand(data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	for _, c := range []Command{
		{Type: CmdRedrive, Redrive: &DeadFilter{Seqs: []uint64{1, 1 << 40}, Group: strings.Repeat("g", 300), FromAt: -5}},
		{Type: CmdNack, Nack: &NackCmd{Items: []NackItem{{Receipt: Receipt{Seq: 1 << 33, Attempt: 70000}, Delay: -1, Reason: strings.Repeat("r", 70000)}}}},
	} {
		data, err := EncodeCommand(c)
		wantNoErr(t, err)
		if err := checkMsgpackCounts(data); err != nil {
			t.Fatalf("%s: valid entry refused: %v", c.Type, err)
		}
		back, err := DecodeCommand(data)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("%s: round trip %+v, %v", c.Type, back, err)
		}
	}
}
