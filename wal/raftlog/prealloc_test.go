package raftlog

import (
	"math"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/ferrymq/ferry/internal/testwait"
)

// TestRaftlog_CrashInPrewrittenSegment writes until entries land in a
// pre-written segment, copies the directory while the store is open (the
// image a crash leaves: the active segment ends in zeros), and checks
// that the copy opens with every stored entry and takes new ones.
func TestRaftlog_CrashInPrewrittenSegment(t *testing.T) {
	cfg := testConfig(t.TempDir())
	if !cfg.PreallocateSegments {
		t.Fatal("DefaultConfig should turn PreallocateSegments on")
	}
	cfg.PrewriteRateMaxBytesPerSecond = math.MaxInt64 // a spare at any append rate
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "g")
	var want []*raft.Log
	next := uint64(1)
	// Until entries land in a pre-written segment: a rotation that finds
	// no spare ready yet makes an empty segment, and the next one that
	// finds one is pre-written.
	for st := s.log.Stats(); st.ActiveSegment < 3 || !st.ActivePrewritten; st = s.log.Stats() {
		if st.ActiveSegment > 50 {
			t.Fatalf("no pre-written segment after %d rotations: %+v", st.ActiveSegment, st)
		}
		batch := entries(next, next+3, 1, 500)
		mustStore(t, g, batch)
		want = append(want, batch...)
		next += 4
		if s.log.Stats().TotalBytes > cfg.SegmentBytesMax/2 {
			testwait.Until(t, waitTimeout, "a spare or a rotation", func() bool { return s.Stats().SpareBytes > 0 })
		}
	}
	if st := s.Stats(); st.SpareBytes == 0 || st.DiskBytes < st.SpareBytes {
		t.Fatalf("active segment should be pre-written: %+v", st)
	}
	crashed := copyDir(t, cfg.Dir)
	crashCfg := cfg
	crashCfg.Dir = crashed
	s2, sum := openStore(t, crashCfg)
	if !sum.TornTail {
		t.Fatalf("the zero tail should have been cut: %s", sum)
	}
	g2 := mustGroup(t, s2, "g")
	checkGroup(t, g2, want)
	more := entries(next, next+3, 1, 500)
	mustStore(t, g2, more)
	checkGroup(t, g2, append(want, more...))
	mustClose(t, s)
}
