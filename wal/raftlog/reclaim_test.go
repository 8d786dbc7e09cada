package raftlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wal"
	"github.com/hashicorp/raft"
)

// segmentExists reports whether segment num's file is in dir.
func segmentExists(dir string, num uint32) bool {
	_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%010d.seg", num)))
	return err == nil
}

// fillUntilRotation stores entries in g until one lands in a segment
// after seg; it returns the next free index.
func fillUntilRotation(t *testing.T, g *GroupLog, next uint64, seg uint32) uint64 {
	t.Helper()
	for {
		mustStore(t, g, []*raft.Log{entry(next, 1, 400)})
		p, _, _ := g.EntryPos(next)
		next++
		if p.Segment > seg {
			return next
		}
	}
}

// TestRaftlog_NoResurrectionAfterTruncationAndReclaim truncates a suffix,
// rewrites part of it, reopens, then lets compaction move the truncate
// marker out of its segment and delete that segment while the truncated
// entries still sit in an older one, reopens, then lets the older segment
// die too, and reopens again. The truncated entries must never return.
func TestRaftlog_NoResurrectionAfterTruncationAndReclaim(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	a, b, c := mustGroup(t, s, "a"), mustGroup(t, s, "b"), mustGroup(t, s, "c")
	mustStore(t, a, entries(1, 20, 1, 200))
	mustStore(t, c, []*raft.Log{entry(1, 1, 7000)}) // keeps segment 1 mostly live
	seg1, _, _ := a.EntryPos(1)
	nextB := fillUntilRotation(t, b, 1, seg1.Segment)
	mustDelete(t, a, 11, 20)
	mustStore(t, a, entries(11, 15, 2, 200))
	want := append(entries(1, 10, 1, 200), entries(11, 15, 2, 200)...)
	seg2, _, _ := a.EntryPos(11)
	if seg2.Segment == seg1.Segment {
		t.Fatal("setup: the truncation did not land in a later segment")
	}
	checkGroup(t, a, want)

	mustClose(t, s)
	s, sum := openStore(t, cfg)
	a, b, _ = mustGroup(t, s, "a"), mustGroup(t, s, "b"), mustGroup(t, s, "c")
	checkGroup(t, a, want)
	if sum.Markers == 0 {
		t.Fatalf("the truncate marker should still be needed: %s", sum)
	}

	// Make the marker's segment mostly dead: b fills two more segments and
	// compacts them all away.
	nextB = fillUntilRotation(t, b, nextB, seg2.Segment+1)
	mustDelete(t, b, 1, nextB-2)
	testwait.Until(t, waitTimeout, "the marker's segment to be compacted away", func() bool { return !segmentExists(cfg.Dir, seg2.Segment) })
	if !segmentExists(cfg.Dir, seg1.Segment) {
		t.Fatal("segment 1 with the truncated entries was reclaimed too early for this test")
	}
	checkGroup(t, a, want)
	mustClose(t, s)
	s, sum = openStore(t, cfg)
	a = mustGroup(t, s, "a")
	checkGroup(t, a, want)
	if sum.Markers == 0 {
		t.Fatalf("the moved truncate marker should still be needed: %s", sum)
	}

	// Now let segment 1 die: drop c, whose entry kept it live.
	if err := s.DropGroup("c"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, waitTimeout, "segment 1 to be reclaimed", func() bool { return !segmentExists(cfg.Dir, seg1.Segment) })
	checkGroup(t, a, want)
	mustClose(t, s)
	s, sum = openStore(t, cfg)
	checkGroup(t, mustGroup(t, s, "a"), want)
	if sum.Markers != 0 {
		t.Fatalf("no marker should be needed once the truncated entries are gone: %s", sum)
	}
	if st := s.Stats(); st.SegmentsLive > 3 {
		t.Fatalf("%d segments live after everything old died", st.SegmentsLive)
	}
}

// TestRaftlog_IdleGroupDoesNotPinSegments keeps a few entries of an idle
// group in the oldest segment while a busy group writes and compacts:
// compaction must move the idle entries so the old segments go, and a
// reopen must still find them.
func TestRaftlog_IdleGroupDoesNotPinSegments(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	idle, busy := mustGroup(t, s, "idle"), mustGroup(t, s, "busy")
	mustStore(t, idle, entries(1, 3, 1, 100))
	first, _, _ := idle.EntryPos(1)
	var next uint64 = 1
	for ; next <= 300; next += 5 {
		mustStore(t, busy, entries(next, next+4, 1, 300))
		if next > 20 {
			mustDelete(t, busy, 1, next-10)
		}
	}
	testwait.Until(t, waitTimeout, "the idle group's first segment to go", func() bool { return !segmentExists(cfg.Dir, first.Segment) })
	moved, _, _ := idle.EntryPos(1)
	if moved.Segment == first.Segment {
		t.Fatal("idle entry still in its first segment")
	}
	st := s.Stats()
	if st.RecordsCompacted == 0 || st.SegmentsLive > 4 {
		t.Fatalf("stats after compaction: %+v", st)
	}
	checkGroup(t, idle, entries(1, 3, 1, 100))
	mustClose(t, s)
	s2, _ := openStore(t, cfg)
	checkGroup(t, mustGroup(t, s2, "idle"), entries(1, 3, 1, 100))
	checkGroup(t, mustGroup(t, s2, "busy"), entries(287, 300, 1, 300)) // the last delete removed 1..286
}

// TestRaftlog_RetainKeepsDeletedEntryAcrossCompaction retains an entry,
// lets raft delete it, forces its segment through compaction, and checks
// that the holder is told of the move, reads the same bytes at the new
// place, and that release lets the record go.
func TestRaftlog_RetainKeepsDeletedEntryAcrossCompaction(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g, busy := mustGroup(t, s, "g"), mustGroup(t, s, "busy")
	body := entry(2, 1, 500)
	mustStore(t, g, entries(1, 3, 1, 500))
	var mu sync.Mutex
	var movedTo wal.Pos
	moves := 0
	ret, err := g.Retain(2, func(from, to wal.Pos) {
		mu.Lock()
		defer mu.Unlock()
		if moves > 0 && from != movedTo {
			t.Errorf("move from %v, but the last move went to %v", from, movedTo)
		}
		movedTo = to
		moves++
	})
	if err != nil {
		t.Fatal(err)
	}
	orig := ret.Pos()
	mustDelete(t, g, 1, 3) // raft forgets all three
	var next uint64 = 1
	for ; next <= 200; next += 5 {
		mustStore(t, busy, entries(next, next+4, 1, 300))
		mustDelete(t, busy, 1, next)
	}
	testwait.Until(t, waitTimeout, "the retained record's segment to be compacted", func() bool { return !segmentExists(cfg.Dir, orig.Segment) })
	mu.Lock()
	to, n := movedTo, moves
	mu.Unlock()
	if n == 0 {
		t.Fatal("moved callback not called")
	}
	if ret.Pos() != to || to.Segment == orig.Segment {
		t.Fatalf("retention at %v, callback said %v, original %v", ret.Pos(), to, orig)
	}
	got, err := ret.ReadData(10, 100)
	if err != nil || string(got) != string(body.Data[10:110]) {
		t.Fatalf("ReadData after move: %v", err)
	}
	direct, err := s.ReadData(to, 0, len(body.Data))
	if err != nil || string(direct) != string(body.Data) {
		t.Fatalf("Store.ReadData: %v", err)
	}
	if _, err := s.ReadData(to, 1, len(body.Data)); err == nil {
		t.Fatal("ReadData past the end of Data succeeded")
	}
	ret.Release()
	ret.Release()
	if st := s.Stats(); st.Retained != 0 {
		t.Fatalf("retained after release: %d", st.Retained)
	}
	checkGroup(t, g, nil)
	mustClose(t, s)
	s2, _ := openStore(t, cfg)
	checkGroup(t, mustGroup(t, s2, "g"), nil)
}

// TestRaftlog_HoldDeadAtOpenLetsOwnerRetainAfterRestart deletes entries
// whose bodies an owner still needs, restarts with HoldDeadAtOpen,
// re-registers the position, releases the hold, and checks that the body
// survives compaction of its segment until the owner releases it.
func TestRaftlog_HoldDeadAtOpenLetsOwnerRetainAfterRestart(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "g")
	want := entry(4, 1, 600)
	mustStore(t, g, entries(1, 6, 1, 600))
	pos, _, _ := g.EntryPos(4)
	mustDelete(t, g, 1, 5)
	mustClose(t, s)

	held := cfg
	held.HoldDeadAtOpen = true
	s, _ = openStore(t, held)
	if _, err := s.RetainPos(wal.Pos{Segment: pos.Segment, Offset: pos.Offset + 1}, nil); err == nil {
		t.Fatal("RetainPos accepted a position that is not a record")
	}
	ret, err := s.RetainPos(pos, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.ReleaseDeadFromOpen()
	busy := mustGroup(t, s, "busy")
	for next := uint64(1); next <= 200; next += 5 {
		mustStore(t, busy, entries(next, next+4, 1, 300))
		mustDelete(t, busy, 1, next)
	}
	testwait.Until(t, waitTimeout, "the retained record's first segment to be compacted", func() bool { return !segmentExists(cfg.Dir, pos.Segment) })
	got, err := ret.ReadData(0, len(want.Data))
	if err != nil || string(got) != string(want.Data) {
		t.Fatalf("retained body after restart and compaction: %v", err)
	}
	if _, err := s.RetainPos(wal.Pos{Segment: 1 << 20, Offset: 16}, nil); err == nil {
		t.Fatal("RetainPos accepted a missing segment")
	}
	ret.Release()
	checkGroup(t, mustGroup(t, s, "g"), entries(6, 6, 1, 600))
}

// A commit reaps (lists the wal's segments to forget deleted ones) only
// when a segment went away since the last reap; otherwise it costs no
// allocation. A deletion is still reaped.
func TestRaftlog_ReapOnlyAfterASegmentIsDeleted(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "q/reap/0")
	for i := uint64(1); i <= 100; i++ {
		mustStore(t, g, entries(i, i, 1, 1024))
	}
	allocs := testing.AllocsPerRun(100, func() {
		s.mu.Lock()
		s.reapLocked()
		s.mu.Unlock()
	})
	if allocs != 0 {
		t.Fatalf("a reap with no segment deleted allocated %v times, want 0", allocs)
	}
	segments := func() int {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return len(s.segs)
	}
	before := segments()
	mustDelete(t, g, 1, 90) // the early segments die and are deleted
	if s.Stats().SegmentsDeleted == 0 {
		t.Fatal("no segment deleted after the prefix was cut")
	}
	if after := segments(); after >= before {
		t.Fatalf("per-segment accounting kept %d segments after deletions (had %d)", after, before)
	}
	checkGroup(t, g, entries(91, 100, 1, 1024))
}
