//go:build chaosdisk

package raftlog

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ferrymq/ferry/internal/diskfault"
	"github.com/hashicorp/raft"
)

// An injected write failure, short write or fsync failure fails the
// batch's calls with ErrIO and is cut back: the group keeps exactly the
// entries confirmed before, the same call succeeds once the fault is
// spent, and a reopen finds exactly the confirmed entries and no torn tail.
func TestRaftlog_InjectedFaultsCutBack(t *testing.T) {
	for _, kind := range []diskfault.Kind{diskfault.Write, diskfault.ShortWrite, diskfault.Sync} {
		t.Run(kind.String(), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			s, _ := openStore(t, cfg)
			g := mustGroup(t, s, "q/fault/0")
			model := entries(1, 10, 1, 1000)
			mustStore(t, g, model)

			defer diskfault.Arm("", 0)
			if err := diskfault.ArmKind(kind, dir, 2); err != nil {
				t.Fatal(err)
			}
			// Three entries of 6000 bytes cross a 16 KiB segment boundary.
			failed := entries(11, 13, 1, 6000)
			for i := range 2 {
				if err := g.StoreLogs(failed); !errors.Is(err, ErrIO) {
					t.Fatalf("StoreLogs %d with an injected %s: %v, want ErrIO", i, kind, err)
				}
				checkGroup(t, g, model)
			}
			if diskfault.Remaining() != 0 {
				t.Fatal("the armed faults did not all fire")
			}
			mustStore(t, g, failed)
			model = append(model, failed...)
			more := entries(14, 20, 1, 500)
			mustStore(t, g, more)
			model = append(model, more...)
			checkGroup(t, g, model)
			if st := s.Stats(); st.WriteErrors != 2 {
				t.Fatalf("write errors counted: %d, want 2", st.WriteErrors)
			}
			mustClose(t, s)

			s2, sum := openStore(t, cfg)
			if sum.TornTail {
				t.Fatalf("reopen after cut-back writes found a torn tail: %s", sum)
			}
			checkGroup(t, mustGroup(t, s2, "q/fault/0"), model)
		})
	}
}

// Concurrent callers share group-commit batches: when a write of a batch
// fails, every call of that batch fails with ErrIO and none of its entries
// is kept, while the calls of other batches are confirmed. Each caller
// retries until it succeeds; the groups then hold exactly their entries.
func TestRaftlog_InjectedWriteFailsWholeBatch(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	s, _ := openStore(t, cfg)
	const groups, rounds = 4, 20
	defer diskfault.Arm("", 0)
	if err := diskfault.ArmKind(diskfault.ShortWrite, dir, 5); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	models := make([][]*raft.Log, groups)
	var failures sync.Map
	for gi := range groups {
		g := mustGroup(t, s, fmt.Sprintf("q/batch/%d", gi))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(1); i <= rounds; i++ {
				batch := entries(i, i, 1, 700)
				for {
					err := g.StoreLogs(batch)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrIO) {
						errs <- fmt.Errorf("group %d entry %d: %w", gi, i, err)
						return
					}
					failures.Store(fmt.Sprintf("%d/%d", gi, i), true)
					var l raft.Log
					if err := g.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
						errs <- fmt.Errorf("group %d: entry %d of a failed batch is readable (%v)", gi, i, err)
						return
					}
				}
				models[gi] = append(models[gi], batch...)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if diskfault.Remaining() != 0 {
		t.Fatalf("%d armed short writes did not fire", diskfault.Remaining())
	}
	n := 0
	failures.Range(func(any, any) bool { n++; return true })
	if n == 0 {
		t.Fatal("no call failed")
	}
	for gi := range groups {
		checkGroup(t, mustGroup(t, s, fmt.Sprintf("q/batch/%d", gi)), models[gi])
	}
	mustClose(t, s)
	s2, sum := openStore(t, cfg)
	if sum.TornTail {
		t.Fatalf("reopen found a torn tail: %s", sum)
	}
	for gi := range groups {
		checkGroup(t, mustGroup(t, s2, fmt.Sprintf("q/batch/%d", gi)), models[gi])
	}
}
