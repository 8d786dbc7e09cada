package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// A local snapshot converted to the full form restores, on a store that
// has none of the original's entries, to the same state and bodies; a
// full snapshot converts to itself; a body that does not match its
// recorded checksum stops the conversion.
func TestFSM_WriteFullSnapshotInlinesLocalPayloads(t *testing.T) {
	h := busyEntryHarness(t)
	snap := h.f.Snapshot()
	var local, full, direct bytes.Buffer
	wantNoErr(t, snap.PersistLocal(&local))
	wantNoErr(t, snap.Persist(&direct))
	snap.Release()
	wantNoErr(t, WriteFullSnapshot(bytes.NewReader(local.Bytes()), &full, h.store))
	if !bytes.Equal(full.Bytes(), direct.Bytes()) {
		t.Fatal("the converted snapshot differs from the one Persist writes")
	}
	g, _ := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, g.Restore(bytes.NewReader(full.Bytes())))
	at := h.now + int64(time.Hour)
	if g.Digest() != h.f.Digest() {
		t.Fatal("restored digest differs")
	}
	var again bytes.Buffer
	wantNoErr(t, WriteFullSnapshot(bytes.NewReader(full.Bytes()), &again, NewMemBodyStore()))
	if !bytes.Equal(again.Bytes(), full.Bytes()) {
		t.Fatal("converting a full snapshot changed it")
	}
	if got, want := allBodies(t, g, at), allBodies(t, h.f, at); !reflect.DeepEqual(got, want) {
		t.Fatalf("bodies differ:\n%v\n%v", got, want)
	}
	// Another store answers with other bytes: refused, not inlined.
	other := newEntryHarness(t)
	for i := range 30 {
		other.send(NewMessage{ID: fmt.Sprintf("other-%d", i), Body: []byte("zzzzzzzz")})
	}
	if err := WriteFullSnapshot(bytes.NewReader(local.Bytes()), &bytes.Buffer{}, other.store); err == nil {
		t.Fatal("a local snapshot converted against the wrong store")
	}
}

// RelocateBodies moves selected payloads out of their entries into body
// records, oldest first and within its budget: the entries are released,
// bodies and digest are unchanged.
func TestFSM_RelocateBodiesReleasesOldEntries(t *testing.T) {
	h := busyEntryHarness(t)
	digest := h.f.Digest()
	at := h.now + int64(time.Hour)
	entriesBefore := h.store.LiveEntries()
	if entriesBefore == 0 {
		t.Fatal("no entry referenced to start with")
	}
	// A copy that cannot be made durable moves nothing.
	locsBefore := fsmLocs(h.f)
	if _, _, err := h.f.RelocateBodies(func(l Loc) bool { return l.A != 0 }, 1<<30, func() error { return errors.New("sync failed") }); err == nil {
		t.Fatal("a failed sync was not reported")
	}
	if !reflect.DeepEqual(fsmLocs(h.f), locsBefore) || h.store.LiveEntries() != entriesBefore {
		t.Fatal("a relocation whose copies were not durable moved messages")
	}
	n, nb, err := h.f.RelocateBodies(func(l Loc) bool { return l.A != 0 && l.A <= 5 }, 10, func() error { return nil })
	wantNoErr(t, err)
	if n == 0 || nb < 10 {
		t.Fatalf("moved %d payloads, %d bytes, under a budget of 10", n, nb)
	}
	n2, _, err := h.f.RelocateBodies(func(l Loc) bool { return l.A != 0 }, 1<<30, func() error { return nil })
	wantNoErr(t, err)
	if n2 == 0 || h.store.LiveEntries() != 0 {
		t.Fatalf("after moving everything: %d more moved, %d entries still referenced", n2, h.store.LiveEntries())
	}
	wantNoErr(t, h.f.checkInvariants())
	if h.f.Digest() != digest {
		t.Fatal("relocation changed the digest")
	}
	fresh := busyEntryHarness(t)
	if got, want := allBodies(t, h.f, at), allBodies(t, fresh.f, at); !reflect.DeepEqual(got, want) {
		t.Fatalf("bodies after relocation:\n%v\nwant\n%v", got, want)
	}
}

// fsmLocs lists every message's location by seq.
func fsmLocs(f *FSM) map[uint64]Loc {
	out := map[uint64]Loc{}
	f.eachMessage(func(m *message) { out[m.seq] = m.pos })
	return out
}

// failingStore refuses appends, as a full disk does.
type failingStore struct{ *MemBodyStore }

func (failingStore) Append(uint64, []byte) (Loc, error) {
	return Loc{}, errors.New("no space left on device")
}

// Restoring a full snapshot onto a store that cannot take its bodies fails
// with an error, without a panic, and leaves the FSM empty.
func TestFSM_RestoreOnAFullStoreFailsCleanly(t *testing.T) {
	h := busyEntryHarness(t)
	buf := persist(t, h.f)
	g, err := New(DefaultQueueConfig(), failingStore{NewMemBodyStore()})
	wantNoErr(t, err)
	if err := g.Restore(buf); err == nil {
		t.Fatal("restore onto a full store succeeded")
	}
	if st := g.Stats(); st.Ready+st.Delayed+st.InFlight+st.Dead != 0 {
		t.Fatalf("a failed restore left state: %+v", st)
	}
}
