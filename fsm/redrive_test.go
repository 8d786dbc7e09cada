package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wal"
)

// redriveRig drives an FSM on any store: through ApplyEntry when put hands
// each entry to an entry store first, through Apply otherwise.
type redriveRig struct {
	t     *testing.T
	f     *FSM
	put   func(index uint64, data []byte) error
	index uint64
	now   int64
}

func (r *redriveRig) apply(c Command) Result {
	r.t.Helper()
	r.now += int64(time.Millisecond)
	c.At = r.now
	data, err := EncodeCommand(c)
	wantNoErr(r.t, err)
	var res Result
	if r.put != nil {
		r.index++
		wantNoErr(r.t, r.put(r.index, data))
		res = r.f.ApplyEntry(r.index, data)
	} else {
		res = r.f.Apply(data)
	}
	wantNoErr(r.t, res.Err)
	if err := r.f.checkInvariants(); err != nil {
		r.t.Fatalf("after %s: %v", c.Type, err)
	}
	return res
}

func (r *redriveRig) send(prefix string, n, bodyBytes int) {
	r.t.Helper()
	msgs := make([]NewMessage, n)
	for i := range msgs {
		msgs[i] = NewMessage{ID: fmt.Sprintf("%s-%d", prefix, i), Body: redriveBody(prefix, i, bodyBytes)}
	}
	for _, o := range r.apply(Command{Type: CmdSend, Send: &SendCmd{Messages: msgs}}).Sent {
		if o.Err != nil {
			r.t.Fatalf("send: %v", o.Err)
		}
	}
}

func redriveBody(prefix string, i, n int) []byte {
	return []byte(fmt.Sprintf("%s-%d:", prefix, i) + strings.Repeat("b", n))
}

func (r *redriveRig) receive(max int) []Delivery {
	r.t.Helper()
	return r.apply(Command{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: max, Visibility: time.Hour}}).Delivered
}

func (r *redriveRig) ack(ds []Delivery) {
	r.t.Helper()
	if len(ds) == 0 {
		return
	}
	rs := make([]Receipt, len(ds))
	for i, d := range ds {
		rs[i] = d.Receipt
	}
	for _, err := range r.apply(Command{Type: CmdAck, Ack: &AckCmd{Receipts: rs}}).Settled {
		wantNoErr(r.t, err)
	}
}

// deadLetterFirst receives everything ready, rejects the message with id
// and acks the rest.
func (r *redriveRig) deadLetterFirst(id string) {
	r.t.Helper()
	var rest []Delivery
	found := false
	for _, d := range r.receive(BatchMax) {
		if d.ID != id {
			rest = append(rest, d)
			continue
		}
		found = true
		res := r.apply(Command{Type: CmdReject, Reject: &RejectCmd{Items: []RejectItem{{Receipt: d.Receipt, Reason: "bad"}}}})
		wantNoErr(r.t, res.Settled[0])
	}
	if !found {
		r.t.Fatalf("%s was not delivered", id)
	}
	r.ack(rest)
}

func (r *redriveRig) redrive() {
	r.t.Helper()
	if n := r.apply(Command{Type: CmdRedrive, Redrive: &DeadFilter{}}).Count; n != 1 {
		r.t.Fatalf("redrove %d dead letters, want 1", n)
	}
}

// receiveBody receives the one ready message and checks its id and body.
func (r *redriveRig) receiveBody(id string, body []byte) Delivery {
	r.t.Helper()
	ds := r.receive(BatchMax)
	if len(ds) != 1 || ds[0].ID != id || !bytes.Equal(ds[0].Body, body) {
		r.t.Fatalf("want %s with its body, got %d deliveries %+v", id, len(ds), ds)
	}
	return ds[0]
}

// noAppendEntryStore is a MemEntryStore whose Append fails once refuse is
// set: a replica whose disk is full.
type noAppendEntryStore struct {
	*MemEntryStore
	refuse bool
}

func (s *noAppendEntryStore) Append(key uint64, payload []byte) (Loc, error) {
	if s.refuse {
		return Loc{}, errors.New("no space left on device")
	}
	return s.MemEntryStore.Append(key, payload)
}

// A redrive writes nothing: on a store that fails every Append, it applies
// and the redriven message is delivered with its body, whether the dead
// letter's body was a reference into a log entry or a body record; a later
// ack releases that body exactly once.
func TestFSM_RedriveNeverAppends(t *testing.T) {
	for _, viaEntry := range []bool{true, false} {
		t.Run(fmt.Sprintf("entry=%v", viaEntry), func(t *testing.T) {
			store := &noAppendEntryStore{MemEntryStore: NewMemEntryStore()}
			f, err := New(DefaultQueueConfig(), store)
			wantNoErr(t, err)
			r := &redriveRig{t: t, f: f, now: t0}
			if viaEntry {
				r.put = store.PutEntry
			}
			r.send("m", 3, 100)
			r.deadLetterFirst("m-1")
			if (store.LiveEntries() == 1) != viaEntry || store.Live() != 1 {
				t.Fatalf("setup: %d entries, %d locations live", store.LiveEntries(), store.Live())
			}
			store.refuse = true
			r.redrive()
			if store.Live() != 1 {
				t.Fatalf("%d locations live after the redrive, want the one", store.Live())
			}
			d := r.receiveBody("m-1", redriveBody("m", 1, 100))
			r.ack([]Delivery{d})
			if store.Live() != 0 || store.LiveEntries() != 0 {
				t.Fatalf("after the ack: %d locations, %d entries live", store.Live(), store.LiveEntries())
			}
		})
	}
}

// Redriving the same message twice, compacting the entry its body lies in
// after each redrive, snapshotting and restoring it on the same store: the
// body stays readable, the compaction keeps it, the restored FSM finds its
// owner, and the final ack frees it.
func TestFSM_RedriveTwiceCompactAndRestoreOnEntryStore(t *testing.T) {
	store := NewMemEntryStore()
	f, err := New(DefaultQueueConfig(), store)
	wantNoErr(t, err)
	r := &redriveRig{t: t, f: f, put: store.PutEntry, now: t0}
	r.send("m", 10, 100)
	body := redriveBody("m", 4, 100)
	r.deadLetterFirst("m-4")
	r.redrive()
	st, err := f.CompactBodies() // the entry is mostly dead: the body moves
	wantNoErr(t, err)
	if st.RecordsMoved != 1 || store.LiveEntries() != 0 || store.Live() != 1 {
		t.Fatalf("compaction %+v, %d entries and %d locations live", st, store.LiveEntries(), store.Live())
	}
	r.deadLetterFirst("m-4")
	r.redrive()
	digest := f.Digest()

	// A full snapshot (what a follower that lacks the entries is sent)
	// stores the body again under the message's own seq: no key to map.
	var full bytes.Buffer
	snap := f.Snapshot()
	wantNoErr(t, snap.Persist(&full))
	snap.Release()
	follower, err := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, err)
	wantNoErr(t, follower.Restore(&full))
	wantNoErr(t, follower.checkInvariants())
	if follower.Digest() != digest || follower.keys.len() != 0 {
		t.Fatalf("full restore: digest equal %v, %d redriven keys", follower.Digest() == digest, follower.keys.len())
	}
	if got := allBodies(t, follower, r.now+int64(time.Hour)); got["m-4"] != "map[]"+string(body) {
		t.Fatalf("full restore: body of m-4 %q", got["m-4"])
	}

	snap = f.Snapshot()
	var local bytes.Buffer
	wantNoErr(t, snap.PersistLocal(&local))
	snap.Release()
	g, err := New(DefaultQueueConfig(), store)
	wantNoErr(t, err)
	wantNoErr(t, g.Restore(bytes.NewReader(local.Bytes())))
	wantNoErr(t, g.checkInvariants())
	if g.Digest() != digest || g.keys.len() != 1 {
		t.Fatalf("restored: digest equal %v, %d redriven keys", g.Digest() == digest, g.keys.len())
	}
	f.Reset() // the restored FSM is the only owner now
	if store.Live() != 1 {
		t.Fatalf("%d locations live with one owner", store.Live())
	}
	r.f = g
	r.send("n", 3, 1000)
	_, err = g.CompactBodies()
	wantNoErr(t, err)
	d := r.receive(BatchMax)
	if len(d) != 4 || d[0].ID != "m-4" || !bytes.Equal(d[0].Body, body) {
		t.Fatalf("after restore and compaction: %+v", d)
	}
	r.ack(d)
	if store.Live() != 0 {
		t.Fatalf("%d locations live after acking everything", store.Live())
	}
}

// openRedriveWAL opens a wal of small segments, so that a few messages
// fill one and compaction has sealed segments to work on.
func openRedriveWAL(t *testing.T, dir string) *wal.Log {
	t.Helper()
	cfg := wal.DefaultConfig(dir)
	cfg.SegmentBytesMax = wal.SegmentBytesMin
	cfg.RecordBytesMax = 2048
	l, _, err := wal.Open(cfg)
	wantNoErr(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// churn sends and acks enough messages to fill and kill a few segments.
// Other messages it receives stay leased for an hour.
func (r *redriveRig) churn(prefix string) {
	r.t.Helper()
	for i := range 4 {
		r.send(fmt.Sprintf("%s%d", prefix, i), 8, 900)
		var mine []Delivery
		for _, d := range r.receive(BatchMax) {
			if strings.HasPrefix(d.ID, prefix) {
				mine = append(mine, d)
			}
		}
		r.ack(mine)
	}
}

// expire lets every lease run out, and the retry backoff after it.
func (r *redriveRig) expire() {
	r.t.Helper()
	for range 2 {
		r.now += int64(2 * time.Hour)
		r.apply(Command{Type: CmdTick})
	}
}

// On a wal body store (every body a record keyed by the seq that wrote
// it), a redriven body survives compaction of its segment, a local
// snapshot restored on the same wal (a restart), and compaction after the
// restore; acking it leaves the wal without live bytes.
func TestFSM_RedrivenBodyRecordSurvivesCompactionAndRestart(t *testing.T) {
	dir := t.TempDir()
	log := openRedriveWAL(t, dir)
	f, err := New(DefaultQueueConfig(), WALBodyStore{log})
	wantNoErr(t, err)
	r := &redriveRig{t: t, f: f, now: t0}
	r.send("m", 3, 900)
	body := redriveBody("m", 0, 900)
	r.deadLetterFirst("m-0")
	r.redrive()
	r.churn("a")
	st, err := f.CompactBodies()
	wantNoErr(t, err)
	if st.RecordsMoved == 0 {
		t.Fatalf("compaction moved nothing: %+v", st)
	}
	r.expire()
	r.receiveBody("m-0", body)

	snap := f.Snapshot()
	var local bytes.Buffer
	wantNoErr(t, snap.PersistLocal(&local))
	snap.Release()
	g, err := New(DefaultQueueConfig(), WALBodyStore{log}) // the restarted replica
	wantNoErr(t, err)
	wantNoErr(t, g.Restore(bytes.NewReader(local.Bytes())))
	if g.keys.len() != 1 || g.Digest() != f.Digest() {
		t.Fatalf("restored with %d redriven keys; digest equal %v", g.keys.len(), g.Digest() == f.Digest())
	}
	r.f = g
	r.churn("b")
	st, err = g.CompactBodies()
	wantNoErr(t, err)
	if st.SegmentsCompacted == 0 {
		t.Fatalf("second compaction did nothing: %+v", st)
	}
	r.expire()
	d := r.receiveBody("m-0", body)
	r.ack([]Delivery{d})
	if s := log.Stats(); s.LiveBytes != 0 {
		t.Fatalf("%d live bytes left in the wal after acking everything", s.LiveBytes)
	}
}

// Relocating a redriven body out of its entry stores it under the
// message's own seq: the redriven key is forgotten, compaction keeps the
// copy, and the ack releases it.
func TestFSM_RelocatedRedrivenBodyNeedsNoKey(t *testing.T) {
	store := NewMemEntryStore()
	f, err := New(DefaultQueueConfig(), store)
	wantNoErr(t, err)
	r := &redriveRig{t: t, f: f, put: store.PutEntry, now: t0}
	r.send("m", 2, 100)
	r.deadLetterFirst("m-0")
	r.redrive()
	if f.keys.len() != 1 {
		t.Fatalf("%d redriven keys after the redrive, want 1", f.keys.len())
	}
	n, _, err := f.RelocateBodies(func(l Loc) bool { return l.A != 0 }, 1<<30, func() error { return nil })
	wantNoErr(t, err)
	wantNoErr(t, f.checkInvariants())
	if n != 1 || f.keys.len() != 0 || store.LiveEntries() != 0 {
		t.Fatalf("relocated %d; %d redriven keys, %d entries live", n, f.keys.len(), store.LiveEntries())
	}
	_, err = f.CompactBodies()
	wantNoErr(t, err)
	d := r.receiveBody("m-0", redriveBody("m", 0, 100))
	r.ack([]Delivery{d})
	if store.Live() != 0 {
		t.Fatalf("%d locations live after the ack", store.Live())
	}
}
