package raftlog

import (
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// benchEntriesPerCall is the entries one StoreLogs call carries, like a
// leader's dispatch of a few queued proposals or a follower's
// AppendEntries batch under moderate load.
const benchEntriesPerCall = 8

// benchCases are the group counts and entry sizes compared.
var benchCases = func() (out []struct{ groups, size int }) {
	for _, g := range []int{1, 4, 16} {
		for _, size := range []int{256, 4 << 10} {
			out = append(out, struct{ groups, size int }{g, size})
		}
	}
	return out
}()

// runStoreLogs drives b.N entries through stores[i] from one goroutine
// per store, benchEntriesPerCall per call, and reports entries/s.
func runStoreLogs(b *testing.B, stores []raft.LogStore, size int) {
	b.Helper()
	calls := (b.N + benchEntriesPerCall*len(stores) - 1) / (benchEntriesPerCall * len(stores))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(stores))
	for _, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs := make([]*raft.Log, benchEntriesPerCall)
			next := uint64(1)
			for c := 0; c < calls; c++ {
				for i := range logs {
					logs[i] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
					next++
				}
				if err := st.StoreLogs(logs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	total := calls * benchEntriesPerCall * len(stores)
	b.ReportMetric(float64(total)/elapsed.Seconds(), "entries/s")
}

// BenchmarkRaftlog_StoreLogs appends with 1, 4 and 16 concurrent groups on
// one Store (default segment and batch sizes, fdatasync per batch).
func BenchmarkRaftlog_StoreLogs(b *testing.B) {
	for _, c := range benchCases {
		b.Run(fmt.Sprintf("groups=%d/entry=%dB", c.groups, c.size), func(b *testing.B) {
			cfg := DefaultConfig(b.TempDir())
			cfg.Logger = slog.New(slog.DiscardHandler)
			s, _ := openStore(b, cfg)
			stores := make([]raft.LogStore, c.groups)
			for i := range stores {
				stores[i] = mustGroup(b, s, fmt.Sprintf("q/bench/%d", i))
			}
			runStoreLogs(b, stores, c.size)
			st := s.Stats()
			b.ReportMetric(float64(st.CallsCommitted)/float64(max(st.Batches, 1)), "calls/batch")
		})
	}
}

// BenchmarkBoltDB_StoreLogs is the same load on raft-boltdb as partitions
// use it today: one bolt file per group, NoFreelistSync.
func BenchmarkBoltDB_StoreLogs(b *testing.B) {
	for _, c := range benchCases {
		b.Run(fmt.Sprintf("groups=%d/entry=%dB", c.groups, c.size), func(b *testing.B) {
			dir := b.TempDir()
			stores := make([]raft.LogStore, c.groups)
			for i := range stores {
				bs, err := raftboltdb.New(raftboltdb.Options{
					Path:        filepath.Join(dir, fmt.Sprintf("raft-%d.db", i)),
					BoltOptions: &bbolt.Options{NoFreelistSync: true, Timeout: time.Second},
				})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = bs.Close() })
				stores[i] = bs
			}
			runStoreLogs(b, stores, c.size)
		})
	}
}

// BenchmarkRaftlog_Open measures recovery of a store holding 64 MiB of
// 1 KiB entries in 4 groups (files in the page cache).
func BenchmarkRaftlog_Open(b *testing.B) {
	const entrySize = 1 << 10
	const perGroup = 16 << 10
	cfg := DefaultConfig(b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.SyncMode = SyncNone
	s, _, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, entrySize)
	for gi := 0; gi < 4; gi++ {
		g := mustGroup(b, s, fmt.Sprintf("q/open/%d", gi))
		for i := uint64(1); i <= perGroup; i += 64 {
			logs := make([]*raft.Log, 64)
			for j := range logs {
				logs[j] = &raft.Log{Index: i + uint64(j), Term: 1, Data: data}
			}
			if err := g.StoreLogs(logs); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(4 * perGroup * entrySize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, sum, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if sum.Entries != 4*perGroup {
			b.Fatalf("recovered %d entries", sum.Entries)
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkRaftlog_ReadData reads 1 KiB bodies out of stored entries the
// way a delivery does: one body per call, from an entry holding one body
// (near its start) and from merged entries of 64 (mostly far into them).
func BenchmarkRaftlog_ReadData(b *testing.B) {
	for _, perEntry := range []int{1, 64} {
		b.Run(fmt.Sprintf("bodies_per_entry=%d", perEntry), func(b *testing.B) {
			cfg := DefaultConfig(b.TempDir())
			cfg.Logger = slog.New(slog.DiscardHandler)
			s, _ := openStore(b, cfg)
			g := mustGroup(b, s, "q/read")
			const bodyBytes, entries = 1024, 256
			logs := make([]*raft.Log, entries)
			for i := range logs {
				logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: make([]byte, perEntry*bodyBytes)}
			}
			if err := g.StoreLogs(logs); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				pos, _, ok := g.EntryPos(uint64(i%entries + 1))
				if !ok {
					b.Fatal("entry gone")
				}
				if _, err := s.ReadData(pos, (i/entries)%perEntry*bodyBytes, bodyBytes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRaftlog_StoreLogsPrewritten compares appends into pre-written
// segments (PreallocateSegments) with appends that grow the file, 256-byte
// entries, 16 MiB segments. A warm-up group first fills the store's first
// segment, which is never pre-written, so that the timed appends land in
// the second segment and later ones, rotations and spare fills included.
func BenchmarkRaftlog_StoreLogsPrewritten(b *testing.B) {
	for _, groups := range []int{1, 4, 16} {
		for _, prealloc := range []bool{true, false} {
			b.Run(fmt.Sprintf("prealloc=%v/groups=%d", prealloc, groups), func(b *testing.B) {
				cfg := DefaultConfig(b.TempDir())
				cfg.Logger = slog.New(slog.DiscardHandler)
				cfg.SegmentBytesMax = 16 << 20
				cfg.EntryBytesMax = 1 << 20
				cfg.PreallocateSegments = prealloc
				cfg.PrewriteRateMaxBytesPerSecond = math.MaxInt64 // measure the pre-written path at any rate
				s, _ := openStore(b, cfg)
				warmPastFirstSegment(b, s)
				stores := make([]raft.LogStore, groups)
				for i := range stores {
					stores[i] = mustGroup(b, s, fmt.Sprintf("q/bench/%d", i))
				}
				runStoreLogs(b, stores, 256)
			})
		}
	}
}

// warmPastFirstSegment stores 64 KiB entries in a group of its own until
// one lands in segment 2, waiting for the spare when preallocation is on.
func warmPastFirstSegment(b *testing.B, s *Store) {
	b.Helper()
	g := mustGroup(b, s, "warm")
	deadline := time.Now().Add(time.Minute)
	for i := uint64(1); ; i++ {
		if err := g.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: make([]byte, 64<<10)}}); err != nil {
			b.Fatal(err)
		}
		if p, _, _ := g.EntryPos(i); p.Segment >= 2 {
			return
		}
		for s.cfg.PreallocateSegments && s.Stats().SpareBytes == 0 && time.Now().Before(deadline) &&
			s.log.Stats().TotalBytes > s.cfg.SegmentBytesMax*3/4 {
			time.Sleep(time.Millisecond)
		}
	}
}
