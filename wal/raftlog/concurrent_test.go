package raftlog

import (
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// inParallel runs fn(0..n-1) on n goroutines and fails the test with the
// first error any returned, once all have ended.
func inParallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestRaftlog_ConcurrentGroups has 16 goroutines each drive their own
// group (appends of varying batch sizes, prefix compaction, suffix
// truncation and rewrite) against one store, then checks every group,
// reopens, and checks again. It also checks that calls were batched.
func TestRaftlog_ConcurrentGroups(t *testing.T) {
	const groups = 16
	const rounds = 60
	cfg := testConfig(t.TempDir())
	cfg.SegmentBytesMax = 64 << 10
	cfg.BatchBytesMax = 64 << 10
	s, _ := openStore(t, cfg)
	want := make([][]*raft.Log, groups)
	inParallel(t, groups, func(gi int) error {
		model, err := driveGroup(s, fmt.Sprintf("q/c/%d", gi), gi, rounds)
		want[gi] = model
		return err
	})
	for gi := 0; gi < groups; gi++ {
		checkGroup(t, mustGroup(t, s, fmt.Sprintf("q/c/%d", gi)), want[gi])
	}
	st := s.Stats()
	if st.MaxBatchCalls < 2 || st.Batches >= st.CallsCommitted {
		t.Fatalf("no group commit happened: %d batches for %d calls, largest %d", st.Batches, st.CallsCommitted, st.MaxBatchCalls)
	}
	t.Logf("%d calls in %d batches (largest %d), %d syncs, %d segments deleted, %d records compacted",
		st.CallsCommitted, st.Batches, st.MaxBatchCalls, st.Syncs, st.SegmentsDeleted, st.RecordsCompacted)
	mustClose(t, s)
	s2, sum := openStore(t, cfg)
	if sum.TornTail {
		t.Fatalf("clean close left a torn tail: %s", sum)
	}
	for gi := 0; gi < groups; gi++ {
		checkGroup(t, mustGroup(t, s2, fmt.Sprintf("q/c/%d", gi)), want[gi])
	}
}

// driveGroup runs a deterministic workload on one group and returns the
// log it should hold.
func driveGroup(s *Store, name string, seed, rounds int) ([]*raft.Log, error) {
	g, err := s.Group(name)
	if err != nil {
		return nil, err
	}
	var model []*raft.Log
	next, term := uint64(1), uint64(1)
	for r := 0; r < rounds; r++ {
		n := uint64(1 + (r+seed)%7)
		batch := entries(next, next+n-1, term, 20+(r*37+seed*11)%300)
		if err := g.StoreLogs(batch); err != nil {
			return model, err
		}
		model = append(model, batch...)
		next += n
		switch {
		case r%11 == 5 && len(model) > 4: // prefix compaction
			cut := model[len(model)/2].Index
			if err := g.DeleteRange(model[0].Index, cut); err != nil {
				return model, err
			}
			model = model[len(model)/2+1:]
		case r%7 == 3 && len(model) > 3: // conflict: truncate the last two, new term
			from := model[len(model)-2].Index
			if err := g.DeleteRange(from, from+10); err != nil {
				return model, err
			}
			model = model[:len(model)-2]
			next, term = from, term+1
		}
	}
	return model, nil
}
