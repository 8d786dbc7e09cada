package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// dedupModel is the plain version of a dedupTable: entries in order.
type dedupModel struct{ entries []dedupEntry }

func (m *dedupModel) get(k idKey) (uint64, bool) {
	for _, e := range m.entries {
		if e.key == k {
			return e.seq, true
		}
	}
	return 0, false
}

func checkTableAgainst(t *testing.T, tb *dedupTable, m *dedupModel, absent []idKey) {
	t.Helper()
	if err := tb.check(); err != nil {
		t.Fatal(err)
	}
	if tb.len() != len(m.entries) {
		t.Fatalf("%d ids, model %d", tb.len(), len(m.entries))
	}
	for i, e := range m.entries {
		if got := tb.at(i); got != e {
			t.Fatalf("entry %d = %+v, model %+v", i, got, e)
		}
		if seq, ok := tb.get(e.key); !ok || seq != e.seq {
			t.Fatalf("get entry %d = %d %v, model %d", i, seq, ok, e.seq)
		}
	}
	for _, k := range absent {
		if _, ok := m.get(k); ok {
			continue
		}
		if seq, ok := tb.get(k); ok {
			t.Fatalf("get of a key not held = %d", seq)
		}
	}
}

// TestDedupTable_MatchesAModel runs random pushes, pops and seq changes
// through growth and shrinking of the index, starting at ring positions
// just below 2^32 so that positions wrap.
func TestDedupTable_MatchesAModel(t *testing.T) {
	for _, start := range []uint64{0, math.MaxUint32 - 700} {
		t.Run(fmt.Sprint(start), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, start))
			tb := newDedupTable()
			tb.first = start
			var m dedupModel
			var popped []idKey
			next := 0
			for step := range 20000 {
				phase := (step / 2500) % 2 // grow, then shrink, then grow...
				switch r := rng.IntN(10); {
				case r < 6-4*phase || len(m.entries) == 0:
					k := keyOf(fmt.Sprint("id-", next))
					next++
					tb.push(k, uint64(next))
					m.entries = append(m.entries, dedupEntry{k, uint64(next)})
				case r < 9:
					want := m.entries[0]
					if got := tb.pop(); got != want.key {
						t.Fatalf("step %d: pop %v, model %v", step, got, want.key)
					}
					m.entries = m.entries[1:]
					popped = append(popped, want.key)
				default:
					i := rng.IntN(len(m.entries))
					e := &m.entries[i]
					tb.setSeq(e.key, e.seq+1, 7) // wrong old seq: no change
					tb.setSeq(e.key, e.seq, e.seq+1000)
					e.seq += 1000
				}
				if step%500 == 0 {
					checkTableAgainst(t, &tb, &m, popped[max(0, len(popped)-50):])
				}
			}
			checkTableAgainst(t, &tb, &m, popped)
		})
	}
}

// TestDedupTable_FrozenRingIgnoresLaterChanges freezes a table, then
// changes seqs, pops and pushes while another goroutine reads the frozen
// ring: it reads what it held (and, under -race, without a data race).
func TestDedupTable_FrozenRingIgnoresLaterChanges(t *testing.T) {
	tb := newDedupTable()
	for i := range 1500 {
		tb.push(keyOf(fmt.Sprint(i)), uint64(i+1))
	}
	for range 100 {
		tb.pop()
	}
	want := make([]dedupEntry, tb.len())
	for i := range want {
		want[i] = tb.at(i)
	}
	fr := tb.freeze()
	read := make(chan []dedupEntry)
	go func() { // as a snapshot being persisted does, while the table changes
		got := make([]dedupEntry, fr.n)
		for i := range got {
			got[i] = fr.at(i)
		}
		read <- got
	}()
	for i := 100; i < 1500; i += 97 {
		tb.setSeq(keyOf(fmt.Sprint(i)), uint64(i+1), 9999)
	}
	for range 600 {
		tb.pop()
	}
	for i := range 1000 {
		tb.push(keyOf(fmt.Sprint("later", i)), uint64(5000+i))
	}
	got := <-read
	if len(got) != len(want) {
		t.Fatalf("frozen ring holds %d, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] || fr.at(i) != want[i] {
			t.Fatalf("frozen entry %d = %+v / %+v, want %+v", i, got[i], fr.at(i), want[i])
		}
	}
	if seq, ok := tb.get(keyOf("973")); !ok || seq != 9999 {
		t.Fatalf("table after setSeq: %d %v", seq, ok)
	}
}

// TestFSM_DedupWindowCostsFewBytesPerID measures the heap that remembered
// ids take: the same sends with the dedup window on and off. A Go map with
// a FIFO of keys beside it took about 70 bytes per id.
func TestFSM_DedupWindowCostsFewBytesPerID(t *testing.T) {
	const count = 200_000
	heapAfter := func(dedup bool) float64 {
		cfg := DefaultQueueConfig()
		if !dedup {
			cfg.DedupWindow = 0
		}
		f, err := New(cfg, NewMemBodyStore())
		wantNoErr(t, err)
		before := heapInUse()
		msgs := make([]NewMessage, 500)
		for done := 0; done < count; done += len(msgs) {
			for i := range msgs {
				msgs[i] = NewMessage{ID: fmt.Sprintf("%026d", done+i)}
			}
			f.ApplyCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: msgs}})
		}
		n := float64(heapInUse()) - float64(before)
		runtime.KeepAlive(f)
		return n
	}
	on, off := heapAfter(true), heapAfter(false)
	if perID := (on - off) / count; perID > 48 {
		t.Fatalf("the dedup window takes %.1f bytes per id (want at most 48)", perID)
	} else {
		t.Logf("%.1f bytes per id", perID)
	}
}

// TestFSM_RestoreRefusesBadDedupWindows restores snapshots whose dedup
// entries list a key twice or go back in time: Restore fails cleanly.
func TestFSM_RestoreRefusesBadDedupWindows(t *testing.T) {
	for name, entries := range map[string][]snapDedup{
		"key twice":      {{ID: keyOf("a"), Seq: 1, At: t0}, {ID: keyOf("a"), Seq: 2, At: t0}},
		"time goes back": {{ID: keyOf("a"), Seq: 1, At: t0}, {ID: keyOf("b"), Seq: 2, At: t0 - 1}},
	} {
		var buf bytes.Buffer
		enc := newSnapEncoder(&buf)
		wantNoErr(t, enc.Encode(&snapHeader{Version: snapshotVersionCompact, Form: formLocal,
			Config: DefaultQueueConfig(), Clock: t0, LastSeq: 5, Dedup: len(entries)}))
		var c snapCodec
		for i := range entries {
			wantNoErr(t, c.encodeDedup(enc, &entries[i]))
		}
		h := busyHarness(t)
		err := h.f.Restore(&buf)
		if !errors.Is(err, ErrSnapshotFormat) {
			t.Fatalf("%s: restore = %v", name, err)
		}
		if st := h.f.Stats(); st.Ready+st.Delayed+st.InFlight+st.Dead != 0 || h.f.dedup.len() != 0 {
			t.Fatalf("%s: FSM not empty after a failed restore: %+v, %d ids", name, st, h.f.dedup.len())
		}
	}
}

// TestDedupTable_SlidingWindowNeverRebuildsItsIndex pushes and pops at a
// steady size: removal shifts slots back instead of leaving tombstones, so
// the index is never rebuilt (a rebuild of a million ids stalls the FSM
// for a few hundred milliseconds).
func TestDedupTable_SlidingWindowNeverRebuildsItsIndex(t *testing.T) {
	tb := newDedupTable()
	const size = 5000
	for i := range size {
		tb.push(keyOf(fmt.Sprint(i)), uint64(i))
	}
	index := &tb.tags[0]
	for i := size; i < 30*size; i++ {
		tb.push(keyOf(fmt.Sprint(i)), uint64(i))
		tb.pop()
		if &tb.tags[0] != index {
			t.Fatalf("index rebuilt after %d pushes at a steady %d ids", i-size+1, tb.len())
		}
	}
	if err := tb.check(); err != nil {
		t.Fatal(err)
	}
	for i := 30*size - size; i < 30*size; i++ {
		if seq, ok := tb.get(keyOf(fmt.Sprint(i))); !ok || seq != uint64(i) {
			t.Fatalf("id %d: %d %v", i, seq, ok)
		}
	}
}

// TestDedupTable_CraftedKeysStillSpread pushes keys that share all but a
// few bits, as ids searched for to collide under an unseeded slot choice
// would, and checks that the index keeps every key near its home slot and
// that two tables place the same keys differently (the seed is secret and
// per table).
func TestDedupTable_CraftedKeysStillSpread(t *testing.T) {
	const n = 1 << 14
	crafted := func(i int) idKey { return idKey{Hi: 7, Lo: uint64(i)} } // same top bits: one home slot if taken from the key
	a, b := newDedupTable(), newDedupTable()
	for i := range n {
		a.push(crafted(i), uint64(i))
		b.push(crafted(i), uint64(i))
	}
	if err := a.check(); err != nil {
		t.Fatal(err)
	}
	mask := len(a.tags) - 1
	worst, same := 0, 0
	for i, tag := range a.tags {
		if tag == tagEmpty {
			continue
		}
		k := a.entryAt(int(a.slots[i] - uint32(a.first))).key
		worst = max(worst, (i-a.home(a.hash(k)))&mask)
		if a.home(a.hash(k)) == b.home(b.hash(k)) {
			same++
		}
	}
	// A uniform spread at this load keeps the longest displacement to a
	// few dozen slots; a shared home would make it about n.
	if worst > 200 {
		t.Fatalf("a key sits %d slots past its home among %d", worst, n)
	}
	if same > n/16 {
		t.Fatalf("%d of %d keys have the same home slot in two tables", same, n)
	}
}
