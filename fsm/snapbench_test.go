package fsm

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
)

// locStore is an EntryBodyStore that hands out the locations the
// partition's store does (Loc{A: entry index, B: offset, C: length}) and
// keeps nothing: the snapshot benchmarks measure metadata, not bodies.
type locStore struct{}

func (locStore) Append(uint64, []byte) (Loc, error) { return Loc{}, errors.New("locStore: no appends") }
func (locStore) Read(Loc) (uint64, []byte, error) {
	return 0, nil, errors.New("locStore: keeps nothing")
}
func (locStore) MarkDead(Loc, int) error { return nil }
func (locStore) Pin() func()             { return func() {} }
func (locStore) Ref(index uint64, off, n int, _ uint64) (Loc, error) {
	return Loc{A: index, B: uint32(off), C: uint32(n)}, nil
}

// snapBenchFSM applies count sends of 1 KiB messages (26-character ids, no
// group), 500 per log entry, as the partition layer applies them.
func snapBenchFSM(b testing.TB, cfg QueueConfig, count int) *FSM {
	const batch = 500
	f, err := New(cfg, locStore{})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	msgs := make([]NewMessage, batch)
	for done := 0; done < count; done += batch {
		for i := range msgs {
			msgs[i] = NewMessage{ID: benchID(done + i), Body: body}
		}
		data, err := EncodeCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: msgs}})
		if err != nil {
			b.Fatal(err)
		}
		if r := f.ApplyEntry(uint64(done/batch+1), data); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	if st := f.Stats(); st.Ready != int64(count) {
		b.Fatalf("%d ready", st.Ready)
	}
	return f
}

// snapBenchCases runs fn with the default dedup window (every id of the
// run remembered: a snapshot also carries 1,000,000 dedup entries) and
// without dedup.
func snapBenchCases(b *testing.B, fn func(b *testing.B, f *FSM, count int)) {
	const count = 1_000_000
	for _, c := range []struct {
		name  string
		dedup bool
	}{{"dedup=5m", true}, {"dedup=off", false}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := DefaultQueueConfig()
			if !c.dedup {
				cfg.DedupWindow = 0
			}
			fn(b, snapBenchFSM(b, cfg, count), count)
		})
	}
}

// BenchmarkFSM_SnapshotFreezeMemory reports the bytes FSM.Snapshot
// allocates per message to freeze 1,000,000 queued messages.
func BenchmarkFSM_SnapshotFreezeMemory(b *testing.B) {
	snapBenchCases(b, func(b *testing.B, f *FSM, count int) {
		var total uint64
		b.ResetTimer()
		for range b.N {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s := f.Snapshot()
			runtime.ReadMemStats(&after)
			s.Release()
			total += after.TotalAlloc - before.TotalAlloc
		}
		b.ReportMetric(float64(total)/float64(b.N)/float64(count), "B/msg")
	})
}

// countWriter counts the bytes written to it.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// BenchmarkFSM_PersistLocalBytes reports the bytes per message of the local
// form of a snapshot of 1,000,000 queued messages.
func BenchmarkFSM_PersistLocalBytes(b *testing.B) {
	snapBenchCases(b, func(b *testing.B, f *FSM, count int) {
		s := f.Snapshot()
		defer s.Release()
		var w countWriter
		b.ResetTimer()
		for range b.N {
			w.n = 0
			if err := s.PersistLocal(&w); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(w.n)/float64(count), "B/msg")
	})
}

// BenchmarkFSM_RestoreLocal restores the local form of a snapshot of
// 1,000,000 queued messages, as a replica does at restart.
func BenchmarkFSM_RestoreLocal(b *testing.B) {
	snapBenchCases(b, func(b *testing.B, f *FSM, count int) {
		s := f.Snapshot()
		var buf bytes.Buffer
		if err := s.PersistLocal(&buf); err != nil {
			b.Fatal(err)
		}
		s.Release()
		data := buf.Bytes()
		b.ResetTimer()
		for range b.N {
			g, err := New(f.Config(), locStore{})
			if err != nil {
				b.Fatal(err)
			}
			if err := g.Restore(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(count), "ns/msg")
	})
}
