package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wal"
)

// busyHarness builds a partition with messages in every state.
func busyHarness(t *testing.T) *harness {
	h := newHarness(t, func(c *QueueConfig) { c.MaxReceives = 2 })
	for i := range 20 {
		group := ""
		if i%3 == 0 {
			group = fmt.Sprintf("g%d", i%2)
		}
		h.sendMsgs(NewMessage{ID: fmt.Sprintf("m%d", i), Group: group, Body: []byte(fmt.Sprintf("body %d", i)),
			Headers: map[string]string{"n": fmt.Sprint(i)}})
	}
	h.sendMsgs(NewMessage{ID: "later", Delay: time.Hour})
	ds := h.receive("c", 8, time.Minute)
	wantNoErr(t, h.ack(ds[0].Receipt))
	wantNoErr(t, h.reject(ds[1].Receipt, "bad"))
	wantNoErr(t, h.nack(ds[2].Receipt, time.Minute, true, "later"))
	h.advance(time.Second)
	return h
}

func persist(t testing.TB, f *FSM) *bytes.Buffer {
	t.Helper()
	snap := f.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatalf("persist: %v", err)
	}
	return &buf
}

func TestFSM_SnapshotRestoreReproducesStateAndBehaviour(t *testing.T) {
	h := busyHarness(t)
	buf := persist(t, h.f)
	h2 := newHarness(t)
	h2.send("old", "", "replaced") // Restore must discard this
	if err := h2.f.Restore(buf); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := h2.f.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if h.f.Digest() != h2.f.Digest() {
		t.Fatal("restored digest differs")
	}
	if h2.store.Live() != h.store.Live() {
		t.Fatalf("restored store holds %d bodies, original %d", h2.store.Live(), h.store.Live())
	}
	// Both continue identically, including lease expiry and dead letters.
	h2.now = h.now
	for _, step := range []time.Duration{0, time.Minute, time.Hour} {
		h.advance(step)
		h2.advance(step)
		a, b := h.receive("z", 100, 0), h2.receive("z", 100, 0)
		if len(a) != len(b) || !slices.Equal(ids(a), ids(b)) {
			t.Fatalf("after %v: %v vs %v", step, ids(a), ids(b))
		}
		for i := range a {
			if !bytes.Equal(a[i].Body, b[i].Body) || a[i].Headers["n"] != b[i].Headers["n"] {
				t.Fatalf("delivery %d differs", i)
			}
		}
	}
	if h.f.Digest() != h2.f.Digest() {
		t.Fatal("digests diverged after restore")
	}
	da, _, _ := h.f.PeekDead(DeadFilter{}, 0)
	db, _, _ := h2.f.PeekDead(DeadFilter{}, 0)
	if len(da) == 0 || len(da) != len(db) || !bytes.Equal(da[0].Body, db[0].Body) || len(db[0].History) != len(da[0].History) {
		t.Fatalf("dead letters differ: %+v vs %+v", da, db)
	}
}

func TestFSM_RestoreRejectsBadSnapshotsAndLeavesFSMEmpty(t *testing.T) {
	good := persist(t, busyHarness(t).f).Bytes()
	for name, data := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("definitely not a snapshot"),
		"truncated": good[:len(good)/2],
	} {
		h := busyHarness(t)
		err := h.f.Restore(bytes.NewReader(data))
		if !errors.Is(err, ErrSnapshotFormat) {
			t.Fatalf("%s: error %v", name, err)
		}
		if st := h.f.Stats(); st.Ready+st.InFlight+st.Delayed+st.Dead != 0 || h.store.Live() != 0 {
			t.Fatalf("%s: FSM not empty after failed restore: %+v", name, st)
		}
	}
}

// TestFSM_SnapshotPersistsWhileCommandsApply persists a snapshot from one
// goroutine while another acks everything and compacts the WAL under it.
// The snapshot must still restore to the state it was taken at.
func TestFSM_SnapshotPersistsWhileCommandsApply(t *testing.T) {
	cfg := wal.DefaultConfig(t.TempDir())
	cfg.SegmentBytesMax = 4096
	cfg.RecordBytesMax = 2048
	log, _, err := wal.Open(cfg)
	wantNoErr(t, err)
	defer log.Close()
	f, err := New(DefaultQueueConfig(), WALBodyStore{log})
	wantNoErr(t, err)
	var mu sync.Mutex // the owner's lock, as the partition layer holds it
	apply := func(c Command) Result {
		mu.Lock()
		defer mu.Unlock()
		c.At = t0
		return f.ApplyCommand(c)
	}
	for i := range 400 {
		apply(Command{Type: CmdSend, Send: &SendCmd{Messages: []NewMessage{{ID: fmt.Sprint(i), Body: bytes.Repeat([]byte{byte(i)}, 100)}}}})
	}
	mu.Lock()
	want := f.Digest()
	snap := f.Snapshot()
	mu.Unlock()

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := snap.Persist(pw)
		pw.CloseWithError(err)
		done <- err
	}()
	for {
		ds := apply(Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: 50}}).Delivered
		if len(ds) == 0 {
			break
		}
		rs := make([]Receipt, len(ds))
		for i, d := range ds {
			rs[i] = d.Receipt
		}
		apply(Command{Type: CmdAck, Ack: &AckCmd{Receipts: rs}})
		mu.Lock()
		_, err := f.CompactBodies()
		mu.Unlock()
		wantNoErr(t, err)
	}
	restored, _ := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, restored.Restore(pr))
	wantNoErr(t, <-done)
	snap.Release()
	if restored.Digest() != want {
		t.Fatal("snapshot persisted during applies does not restore the state it froze")
	}
	if st := log.Stats(); st.Segments > 2 {
		t.Fatalf("after release and compaction %d segments remain", st.Segments)
	}
}
