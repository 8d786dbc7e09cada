package raftlog

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestRaftlog_LoneCallerCommitsItself checks that calls made one after
// another are each committed alone and nearly all on the caller's
// goroutine (no hand-off to the writer and back), and that what they
// wrote is durable across a reopen. Not all: after a commit that makes
// compaction worth a look the writer holds commitMu briefly, and a call
// arriving then is handed to it, as designed.
func TestRaftlog_LoneCallerCommitsItself(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "lone")
	before := s.Stats()
	const calls = 40
	for i := uint64(1); i <= calls; i++ {
		mustStore(t, g, entries(i, i, 1, 100))
	}
	st := s.Stats()
	batches, byCaller := st.Batches-before.Batches, st.CallerBatches-before.CallerBatches
	if batches != calls || byCaller < calls*3/4 {
		t.Fatalf("%d calls one after another: %d batches, %d committed by their caller; want %d batches, at least %d by callers",
			calls, batches, byCaller, calls, calls*3/4)
	}
	mustClose(t, s)
	s2, _ := openStore(t, cfg)
	checkGroup(t, mustGroup(t, s2, "lone"), entries(1, calls, 1, 100))
}

// TestRaftlog_CallersAndWriterShareCommits has 8 goroutines store into
// their own groups at once, so that callers commit some batches and the
// writer the others, then checks that every call was answered once, that
// calls were batched, and that every group reads back whole after a
// reopen.
func TestRaftlog_CallersAndWriterShareCommits(t *testing.T) {
	const groups, calls = 8, 150
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	inParallel(t, groups, func(gi int) error {
		g, err := s.Group(fmt.Sprintf("g%d", gi))
		if err != nil {
			return err
		}
		for i := uint64(1); i <= calls; i++ {
			if err := g.StoreLogs(entries(i, i, 1, 50+gi)); err != nil {
				return fmt.Errorf("group %d call %d: %w", gi, i, err)
			}
		}
		return nil
	})
	st := s.Stats()
	if st.CallsCommitted < groups*calls {
		t.Fatalf("%d calls committed, want at least %d", st.CallsCommitted, groups*calls)
	}
	if st.CallerBatches == 0 || st.CallerBatches > st.Batches {
		t.Fatalf("%d of %d batches committed by callers", st.CallerBatches, st.Batches)
	}
	t.Logf("%d calls in %d batches, %d by callers, largest %d", st.CallsCommitted, st.Batches, st.CallerBatches, st.MaxBatchCalls)
	mustClose(t, s)
	s2, _ := openStore(t, cfg)
	for gi := range groups {
		checkGroup(t, mustGroup(t, s2, fmt.Sprintf("g%d", gi)), entries(1, calls, 1, 50+gi))
	}
}

// TestRaftlog_CloseWhileCallersCommit closes the store while goroutines
// keep storing: every call either succeeds, and its entries survive a
// reopen, or fails with ErrClosed; none writes after the log is closed.
func TestRaftlog_CloseWhileCallersCommit(t *testing.T) {
	const groups = 6
	cfg := testConfig(t.TempDir())
	s, _, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stored := make([]uint64, groups) // the last index each group stored
	var wg sync.WaitGroup
	started := make(chan struct{}, groups)
	for gi := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			signal := sync.OnceFunc(func() { started <- struct{}{} })
			defer signal() // also when the goroutine ends early
			g, err := s.Group(fmt.Sprintf("c%d", gi))
			if err != nil {
				t.Errorf("Group: %v", err)
				return
			}
			for i := uint64(1); ; i++ {
				err := g.StoreLogs(entries(i, i, 1, 80))
				if i == 5 {
					signal()
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("group %d call %d: %v", gi, i, err)
					return
				}
				stored[gi] = i
			}
		}()
	}
	for range groups {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	s2, sum := openStore(t, cfg)
	if sum.TornTail {
		t.Fatalf("close with callers committing left a torn tail: %s", sum)
	}
	for gi := range groups {
		g := mustGroup(t, s2, fmt.Sprintf("c%d", gi))
		last, err := g.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		if last < stored[gi] {
			t.Fatalf("group %d: last index %d after reopen, but %d was stored", gi, last, stored[gi])
		}
		checkGroup(t, g, entries(1, last, 1, 80))
	}
}
