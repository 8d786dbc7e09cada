package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/ferrymq/ferry/internal/testwait"
)

var (
	keyTerm = []byte("CurrentTerm")
	keyCand = []byte("LastVoteCand")
)

// mustGetUint64 returns key's value in g, failing the test on error.
func mustGetUint64(t testing.TB, g *GroupLog, key []byte) uint64 {
	t.Helper()
	v, err := g.GetUint64(key)
	if err != nil {
		t.Fatalf("group %q GetUint64(%s): %v", g.Name(), key, err)
	}
	return v
}

// Term and vote are kept per group, survive a restart (the newest value
// of each key), and a key never set answers raft's "not found".
func TestStable_SetGetAcrossRestart(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	a, b := mustGroup(t, s, "a"), mustGroup(t, s, "b")
	if _, err := a.GetUint64(keyTerm); !errors.Is(err, ErrStableNotFound) || err.Error() != "not found" {
		t.Fatalf("GetUint64 of a key never set: %v, want exactly \"not found\"", err)
	}
	if v, err := a.GetUint64(keyTerm); v != 0 || err == nil {
		t.Fatalf("GetUint64 of a key never set: %d, %v", v, err)
	}
	for term := uint64(1); term <= 5; term++ {
		if err := a.SetUint64(keyTerm, term); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetUint64(keyTerm, 9); err != nil {
		t.Fatal(err)
	}
	cand := []byte("node-2:7001")
	if err := a.Set(keyCand, cand); err != nil {
		t.Fatal(err)
	}
	cand[0] = 'X' // the store keeps its own copy
	mustStore(t, a, entries(1, 3, 1, 40))
	mustClose(t, s)

	s, _ = openStore(t, cfg)
	a, b = mustGroup(t, s, "a"), mustGroup(t, s, "b")
	if got := mustGetUint64(t, a, keyTerm); got != 5 {
		t.Fatalf("a's term after restart %d, want 5", got)
	}
	if got := mustGetUint64(t, b, keyTerm); got != 9 {
		t.Fatalf("b's term after restart %d, want 9", got)
	}
	if got, err := a.Get(keyCand); err != nil || string(got) != "node-2:7001" {
		t.Fatalf("a's vote after restart %q, %v", got, err)
	}
	checkGroup(t, a, entries(1, 3, 1, 40))
	if _, err := a.GetUint64(keyCand); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetUint64 of an 11-byte value: %v, want ErrCorrupt", err)
	}
}

// Keys and values over their bounds, and keys beyond StableKeysMax, are
// refused and change nothing.
func TestStable_Bounds(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "g")
	before := s.Stats().CallsCommitted
	for _, c := range []struct {
		key, val []byte
	}{
		{nil, []byte("v")},
		{bytes.Repeat([]byte("k"), StableKeyBytesMax+1), nil},
		{[]byte("k"), make([]byte, StableValueBytesMax+1)},
	} {
		if err := g.Set(c.key, c.val); !errors.Is(err, ErrStableTooLarge) {
			t.Fatalf("Set(key %d bytes, value %d bytes): %v, want ErrStableTooLarge", len(c.key), len(c.val), err)
		}
	}
	if s.Stats().CallsCommitted != before {
		t.Fatal("a refused Set reached the writer")
	}
	if err := g.Set(bytes.Repeat([]byte("k"), StableKeyBytesMax), make([]byte, StableValueBytesMax)); err != nil {
		t.Fatalf("Set at the bounds: %v", err)
	}
	// Concurrent new keys in one batch are counted against the bound too.
	var wg sync.WaitGroup
	errs := make([]error, StableKeysMax+4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.SetUint64([]byte{'n', byte(i)}, uint64(i))
		}()
	}
	wg.Wait()
	refused := 0
	for _, err := range errs {
		if errors.Is(err, ErrStableTooLarge) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused != 5 { // one key was set above: StableKeysMax-1 new ones fit
		t.Fatalf("%d new keys refused, want 5", refused)
	}
	if err := g.SetUint64([]byte{'n', 0}, 1); err != nil && !errors.Is(err, ErrStableTooLarge) {
		t.Fatal(err)
	}
	mustClose(t, s)
	s, _ = openStore(t, cfg)
	g = mustGroup(t, s, "g")
	if n := len(g.stable); n != StableKeysMax {
		t.Fatalf("%d keys after restart, want %d", n, StableKeysMax)
	}
}

// stableRecordEnd returns the segment file and end offset of key's newest
// record in g.
func stableRecordEnd(t testing.TB, s *Store, g *GroupLog, key []byte) (string, int64, int64) {
	t.Helper()
	s.mu.RLock()
	v, ok := g.stable[string(key)]
	s.mu.RUnlock()
	if !ok {
		t.Fatalf("no record of %s", key)
	}
	size := int64(walRecordHeaderBytes + stableHeaderBytes + len(key) + len(v.val))
	name := filepath.Join(s.cfg.Dir, segmentName(v.pos.Segment))
	return name, int64(v.pos.Offset), int64(v.pos.Offset) + size
}

// segmentName is the file name of segment num.
func segmentName(num uint32) string {
	return fmt.Sprintf("%010d.seg", num)
}

// A crash part-way through the last Set (a torn tail) leaves the value of
// the Set before it, at every cut offset.
func TestStable_TornTailKeepsPreviousTerm(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "g")
	mustStore(t, g, entries(1, 2, 1, 40))
	if err := g.SetUint64(keyTerm, 7); err != nil {
		t.Fatal(err)
	}
	if err := g.SetUint64(keyTerm, 8); err != nil {
		t.Fatal(err)
	}
	file, start, end := stableRecordEnd(t, s, g, keyTerm)
	mustClose(t, s)
	if fi, err := os.Stat(file); err != nil || fi.Size() != end {
		t.Fatalf("segment %s: %v bytes, want the last Set to end it at %d (%v)", file, fi.Size(), end, err)
	}
	for cut := start; cut < end; cut++ {
		dir := copyDir(t, cfg.Dir)
		if err := os.Truncate(filepath.Join(dir, filepath.Base(file)), cut); err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Dir = dir
		s2, sum := openStore(t, c)
		if cut > start && !sum.TornTail {
			t.Fatalf("cut at %d: no torn tail reported", cut)
		}
		g2 := mustGroup(t, s2, "g")
		if got := mustGetUint64(t, g2, keyTerm); got != 7 {
			t.Fatalf("cut at %d: term %d, want 7", cut, got)
		}
		checkGroup(t, g2, entries(1, 2, 1, 40))
		// The store takes the next Set and keeps it.
		if err := g2.SetUint64(keyTerm, 9); err != nil {
			t.Fatal(err)
		}
		mustClose(t, s2)
		s3, _ := openStore(t, c)
		if got := mustGetUint64(t, mustGroup(t, s3, "g"), keyTerm); got != 9 {
			t.Fatalf("cut at %d: term %d after the next Set and a restart, want 9", cut, got)
		}
		mustClose(t, s3)
	}
}

// A damaged stable record that is not the torn tail fails Open with
// ErrCorrupt: it is never skipped (which would bring back an older term).
func TestStable_CorruptRecordIsDetected(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "g")
	if err := g.SetUint64(keyTerm, 3); err != nil {
		t.Fatal(err)
	}
	if err := g.SetUint64(keyTerm, 4); err != nil {
		t.Fatal(err)
	}
	file, _, end := stableRecordEnd(t, s, g, keyTerm)
	mustStore(t, g, entries(1, 4, 1, 40)) // records after it: not a torn tail
	mustClose(t, s)
	for _, at := range []int64{end - 1, end - 8 - int64(len(keyTerm)) - 3} { // in the value; in the header
		dir := copyDir(t, cfg.Dir)
		path := filepath.Join(dir, filepath.Base(file))
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, at); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x40
		if _, err := f.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		c := cfg
		c.Dir = dir
		if s2, _, err := Open(c); !errors.Is(err, ErrCorrupt) {
			if s2 != nil {
				_ = s2.Close()
			}
			t.Fatalf("byte %d flipped: Open = %v, want ErrCorrupt", at, err)
		}
	}
}

// Compaction moves a live stable record out of a mostly dead segment, and
// the moved copy is what a restart reads; dropping the group lets its
// records go, and a new group of the same name starts without a term.
func TestStable_CompactionMovesAndDropReleases(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	a, b := mustGroup(t, s, "a"), mustGroup(t, s, "b")
	if err := b.SetUint64(keyTerm, 11); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	firstSeg := b.stable[string(keyTerm)].pos.Segment
	s.mu.RUnlock()
	for i := uint64(1); i <= 400; i += 20 {
		mustStore(t, a, entries(i, i+19, 1, 200))
	}
	mustDelete(t, a, 1, 390)
	testwait.Until(t, waitTimeout, "b's term moved out of the first segment", func() bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return b.stable[string(keyTerm)].pos.Segment != firstSeg
	})
	testwait.Until(t, waitTimeout, "the first segment deleted", func() bool {
		_, err := os.Stat(filepath.Join(cfg.Dir, segmentName(firstSeg)))
		return os.IsNotExist(err)
	})
	mustClose(t, s)
	s, _ = openStore(t, cfg)
	b = mustGroup(t, s, "b")
	if got := mustGetUint64(t, b, keyTerm); got != 11 {
		t.Fatalf("b's term after compaction and restart %d, want 11", got)
	}
	if err := s.DropGroup("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetUint64(keyTerm); !errors.Is(err, ErrGroupDropped) {
		t.Fatalf("GetUint64 on a dropped group: %v", err)
	}
	if err := b.SetUint64(keyTerm, 12); !errors.Is(err, ErrGroupDropped) {
		t.Fatalf("SetUint64 on a dropped group: %v", err)
	}
	mustClose(t, s)
	s, _ = openStore(t, cfg)
	if _, err := mustGroup(t, s, "b").GetUint64(keyTerm); !errors.Is(err, ErrStableNotFound) {
		t.Fatalf("a new group named like a dropped one: %v, want ErrStableNotFound", err)
	}
}

// Votes of many groups cast at once share group-commit writes (one
// fdatasync per batch), and each group keeps its own newest term.
func TestStable_ConcurrentGroupsShareSyncs(t *testing.T) {
	const groups, rounds = 64, 20
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	inParallel(t, groups, func(gi int) error {
		g, err := s.Group(fmt.Sprintf("q/v/%d", gi))
		for r := 1; err == nil && r <= rounds; r++ {
			if err = g.SetUint64(keyTerm, uint64(gi*1000+r)); err == nil {
				err = g.Set(keyCand, []byte(fmt.Sprintf("n%d", r)))
			}
		}
		return err
	})
	st := s.Stats()
	if st.MaxBatchCalls < 2 || st.Syncs >= st.CallsCommitted {
		t.Fatalf("no group commit: %d syncs for %d calls, largest batch %d", st.Syncs, st.CallsCommitted, st.MaxBatchCalls)
	}
	t.Logf("%d Set calls in %d batches (largest %d), %d syncs", st.CallsCommitted, st.Batches, st.MaxBatchCalls, st.Syncs)
	mustClose(t, s)
	s, _ = openStore(t, cfg)
	for gi := range groups {
		g := mustGroup(t, s, fmt.Sprintf("q/v/%d", gi))
		if got := mustGetUint64(t, g, keyTerm); got != uint64(gi*1000+rounds) {
			t.Fatalf("group %d: term %d after restart, want %d", gi, got, gi*1000+rounds)
		}
		if v, err := g.Get(keyCand); err != nil || string(v) != fmt.Sprintf("n%d", rounds) {
			t.Fatalf("group %d: vote %q, %v", gi, v, err)
		}
	}
}

// SetBatch stores term and vote with one sync, as Set and SetUint64 would
// (the same values come back, across a restart), and a batch with one
// write over its bounds, or too many writes, stores nothing.
func TestStable_SetBatchIsOneSync(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "a")
	keyVoteTerm := []byte("LastVoteTerm")
	before := s.Stats().Syncs
	err := g.SetBatch([]raft.StableWrite{
		{Key: keyTerm, Uint64: 7, IsUint64: true},
		{Key: keyVoteTerm, Uint64: 7, IsUint64: true},
		{Key: keyCand, Val: []byte("node-2:7001")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Syncs - before; n != 1 {
		t.Fatalf("a batch of term and vote took %d syncs, want 1", n)
	}
	bad := [][]raft.StableWrite{
		{{Key: keyTerm, Uint64: 8, IsUint64: true}, {Key: keyCand, Val: bytes.Repeat([]byte("x"), StableValueBytesMax+1)}},
		make([]raft.StableWrite, StableKeysMax+1),
		nil,
	}
	for i, b := range bad {
		if err := g.SetBatch(b); !errors.Is(err, ErrStableTooLarge) {
			t.Fatalf("bad batch %d: %v, want ErrStableTooLarge", i, err)
		}
	}
	mustClose(t, s)
	s, _ = openStore(t, cfg)
	g = mustGroup(t, s, "a")
	if term, vote := mustGetUint64(t, g, keyTerm), mustGetUint64(t, g, keyVoteTerm); term != 7 || vote != 7 {
		t.Fatalf("after restart: term %d, vote term %d; want 7 and 7 (a refused batch stores nothing)", term, vote)
	}
	if v, err := g.Get(keyCand); err != nil || string(v) != "node-2:7001" {
		t.Fatalf("after restart: vote %q, %v", v, err)
	}
	mustClose(t, s)
}
