package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/procfd"
	"github.com/ferrymq/ferry/internal/testwait"
)

// newTestCache returns a FileCache, failing the test on error.
func newTestCache(t testing.TB, capacity int, idle time.Duration) *FileCache {
	t.Helper()
	c, err := NewFileCache(FileCacheConfig{Capacity: capacity, IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cachedConfig is testConfig with files opened through c.
func cachedConfig(dir string, c *FileCache) Config {
	cfg := testConfig(dir)
	cfg.Files = c
	return cfg
}

// openFDsUnder counts this process's open descriptors on files under dir
// (the directory itself is not counted).
func openFDsUnder(t testing.TB, dir string) int {
	t.Helper()
	n, err := procfd.Count(func(target string) bool { return strings.HasPrefix(target, dir+string(filepath.Separator)) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// reporting is cond as a condition for testwait.UntilNil: nil once cond
// holds, else an error saying report().
func reporting(cond func() bool, report func() string) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errors.New(report())
	}
}

// sweepArmed reports whether c's idle sweep timer is armed.
func sweepArmed(c *FileCache) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sweepArmed
}

// copyDir copies the regular files of src into a new directory, as a
// crash would leave them on disk (nothing buffered in the Log).
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestFileCache_ConfigBounds(t *testing.T) {
	for _, capacity := range []int{-1, FileCacheCapacityMax + 1} {
		_, err := NewFileCache(FileCacheConfig{Capacity: capacity})
		wantErr(t, err, ErrInvalidConfig, "NewFileCache with a bad capacity")
	}
	c := newTestCache(t, 0, 0)
	if st := c.Stats(); st.Capacity != DefaultFileCacheCapacity || c.idle != DefaultFileIdleTimeout {
		t.Fatalf("defaults: capacity %d, idle %v", st.Capacity, c.idle)
	}
	if c := newTestCache(t, 1, -1); c.idle != 0 {
		t.Fatalf("a negative IdleTimeout left the sweep on (%v)", c.idle)
	}
}

// A log left idle writes and syncs its buffered records and closes every
// file: no descriptor points into its directory, the sweep's timer stops,
// and a copy of the directory taken then (a crash) holds every record.
// Reading again opens a file, which closes again once idle.
func TestFileCache_IdleLogHoldsNoFiles(t *testing.T) {
	// Long enough that the checks right after the appends see them
	// buffered and open; the sweep needs two of these without an append.
	const idle = 250 * time.Millisecond
	c := newTestCache(t, 8, idle)
	dir := t.TempDir()
	l, _ := openLog(t, cachedConfig(dir, c))
	recs := appendMany(t, l, 1, 60, func(int) int { return 150 }) // several segments
	for _, r := range recs[:20] {
		checkRead(t, l, r.pos, r.key, r.payload)
	}
	if st := l.Stats(); st.OpenFiles == 0 || st.UnflushedBytes == 0 || st.Segments < 2 {
		t.Fatalf("before idling: %d open files, %d unflushed bytes, %d segments; want some of each",
			st.OpenFiles, st.UnflushedBytes, st.Segments)
	}
	idleClosed := func() bool {
		st := l.Stats()
		return st.OpenFiles == 0 && st.UnflushedBytes == 0 && openFDsUnder(t, dir) == 0 && !sweepArmed(c)
	}
	report := func() string {
		st := l.Stats()
		return fmt.Sprintf("%d open files, %d descriptors in the directory, %d unflushed bytes, sweep armed %v",
			st.OpenFiles, openFDsUnder(t, dir), st.UnflushedBytes, sweepArmed(c))
	}
	testwait.UntilNil(t, 5*time.Second, "the idle log's files flushed and closed", reporting(idleClosed, report))
	if st := c.Stats(); st.Open != 0 || st.IdleFlushes == 0 || st.IdleCloses == 0 {
		t.Fatalf("cache after idling: %+v", st)
	}

	crashed := copyDir(t, dir)
	l2, sum := openLog(t, testConfig(crashed))
	if sum.Records != len(recs) || sum.Truncated {
		t.Fatalf("copy of an idle log: %s, want %d records", sum, len(recs))
	}
	for _, r := range recs {
		checkRead(t, l2, r.pos, r.key, r.payload)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}

	checkRead(t, l, recs[0].pos, recs[0].key, recs[0].payload)
	if n := l.Stats().OpenFiles; n != 1 {
		t.Fatalf("after a read of an idle log: %d open files, want 1", n)
	}
	testwait.UntilNil(t, 5*time.Second, "the idle log's files flushed and closed", reporting(idleClosed, report))
}

// segFDsUnder counts this process's open descriptors on segment files
// under root.
func segFDsUnder(root string) int {
	n, err := procfd.Count(func(target string) bool {
		return strings.HasPrefix(target, root+string(filepath.Separator)) && strings.HasSuffix(target, segmentFileSuffix)
	})
	if err != nil {
		return -1
	}
	return n
}

// readBack returns an error unless every record reads back intact.
func readBack(l *Log, recs []record) error {
	for _, r := range recs {
		key, payload, err := l.Read(r.pos)
		if err != nil {
			return fmt.Errorf("Read(%v): %w", r.pos, err)
		}
		if key != r.key || string(payload) != string(r.payload) {
			return fmt.Errorf("Read(%v) = key %d, %d bytes; want key %d, %d bytes", r.pos, key, len(payload), r.key, len(r.payload))
		}
	}
	return nil
}

// churnLog opens a log in dir on c and appends perLog records, reading
// earlier ones back and syncing as it goes; it returns the records.
// appended is called once the first record is appended (the log and its
// segment file open).
func churnLog(dir string, c *FileCache, perLog int, seed uint64, appended func()) ([]record, error) {
	l, _, err := Open(cachedConfig(dir, c))
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var recs []record
	for i := range perLog {
		key := seed*1000 + uint64(i)
		p := payloadFor(key, 50+rng.IntN(250))
		pos, err := l.Append(key, p)
		if err != nil {
			return nil, errors.Join(err, l.Close())
		}
		recs = append(recs, record{key: key, pos: pos, payload: p})
		if i == 0 {
			appended()
		}
		if err := readBack(l, []record{recs[rng.IntN(len(recs))]}); err != nil {
			return nil, errors.Join(err, l.Close())
		}
		if i%10 == 9 {
			if err := l.Sync(); err != nil {
				return nil, errors.Join(err, l.Close())
			}
		}
	}
	err = readBack(l, recs)
	return recs, errors.Join(err, l.Close())
}

// 200 logs sharing a cache of 16 files append, read and sync at the same
// time: never more than 16 segment files are open (by the cache's count
// and by /proc/self/fd), files are evicted, and every record reads back
// intact, before and after reopening.
func TestFileCache_ManyLogsStayWithinBound(t *testing.T) {
	const logs, capacity, perLog = 200, 16, 40
	c := newTestCache(t, capacity, -1)
	root := t.TempDir()
	var maxFDs atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if n := int64(segFDsUnder(root)); n > maxFDs.Load() {
				maxFDs.Store(n)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	all := make([][]record, logs)
	var wg, started sync.WaitGroup
	// Every log appends once before any goes on, so that 200 segment files
	// are in use together and the cache must evict however the goroutines
	// are scheduled (one after another on a loaded machine, no log would
	// need a 17th file while the others are closed).
	started.Add(logs)
	for i := range logs {
		wg.Go(func() {
			done := sync.OnceFunc(started.Done)
			defer done() // a log that fails before its first append does not hold the others
			recs, err := churnLog(filepath.Join(root, fmt.Sprint(i)), c, perLog, uint64(i+1),
				func() { done(); started.Wait() })
			if err != nil {
				t.Errorf("log %d: %v", i, err)
			}
			all[i] = recs
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	if t.Failed() {
		return
	}
	st := c.Stats()
	// The /proc sample is not atomic: it lists the descriptors, then reads
	// each one's target, so a number freed and taken again by the next
	// open while it reads can be seen on both files, once per such reuse
	// during the listing (one over the bound seen in a full-suite run, two
	// in another). The cache's own count is exact; the sample only
	// catches descriptors the cache does not know of, which without the
	// bound would be far more (200 logs).
	if st.OpenMax > capacity || maxFDs.Load() > capacity+capacity/4 {
		t.Fatalf("%d files open at once by the cache's count, %d descriptors seen; the bound is %d", st.OpenMax, maxFDs.Load(), capacity)
	}
	if st.Evictions == 0 || st.Open != 0 {
		t.Fatalf("cache after all logs closed: %+v; want evictions and nothing open", st)
	}
	for i := range logs {
		wg.Go(func() {
			l, sum, err := Open(cachedConfig(filepath.Join(root, fmt.Sprint(i)), c))
			if err != nil {
				t.Errorf("reopen log %d: %v", i, err)
				return
			}
			if sum.Records != perLog || sum.Truncated {
				t.Errorf("reopen log %d: %s, want %d records", i, sum, perLog)
			}
			if err := errors.Join(readBack(l, all[i]), l.Close()); err != nil {
				t.Errorf("log %d after reopen: %v", i, err)
			}
		})
	}
	wg.Wait()
	if st := c.Stats(); st.OpenMax > capacity {
		t.Fatalf("%d files open at once while reopening; the bound is %d", st.OpenMax, capacity)
	}
}

// A log whose active segment's file the cache closes (for another log)
// keeps appending at the segment's end after reopening it; the cache
// fsyncs a written file before closing it; and recovery, from a copy of
// the directory taken without closing (a crash) and from the directory
// after Close, finds every synced record where it was written.
func TestFileCache_EvictedActiveAppendsAtEnd(t *testing.T) {
	c := newTestCache(t, 1, -1)
	dirA := t.TempDir()
	a, _ := openLog(t, cachedConfig(dirA, c))
	b, _ := openLog(t, cachedConfig(t.TempDir(), c))
	evictA := func() { t.Helper(); evictVia(t, a, b) }
	size := func(int) int { return 100 }
	recs := appendMany(t, a, 1, 5, size)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	// Rotation writes the new segment's header: a written, unsynced file.
	recs = append(recs, appendMany(t, a, 10, 40, size)...)
	if a.Stats().ActiveSegment < 2 {
		t.Fatal("no rotation")
	}
	evictA()
	if need, err := a.active.h.syncNeeded(); need || err != nil {
		t.Fatalf("the cache closed a written file without fsyncing it (need %v, %v)", need, err)
	}
	if a.Stats().UnflushedBytes == 0 {
		t.Fatal("log a's buffer is empty; the test wants buffered records across the eviction")
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	evictA()
	end := a.End().Pos()
	more := appendMany(t, a, 100, 20, size)
	if more[0].pos != end {
		t.Fatalf("first append after reopening at %v, want the segment's end %v", more[0].pos, end)
	}
	recs = append(recs, more...)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	evictA()
	checkScan(t, a, recs)

	crashed := copyDir(t, dirA)
	l2, sum := openLog(t, testConfig(crashed))
	if sum.Records != len(recs) || sum.Truncated {
		t.Fatalf("crash copy: %s, want %d records and no torn tail", sum, len(recs))
	}
	checkScan(t, l2, recs)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2, sum := openLog(t, cachedConfig(dirA, c))
	if sum.Records != len(recs) || sum.Truncated {
		t.Fatalf("reopen: %s, want %d records", sum, len(recs))
	}
	checkScan(t, a2, recs)
	last := mustAppend(t, a2, 999, []byte("after reopen"))
	if last != end.add(more) {
		t.Fatalf("append after reopen at %v, want %v", last, end.add(more))
	}
}

// add returns the position after recs, appended in one segment from p.
func (p Pos) add(recs []record) Pos {
	for _, r := range recs {
		p.Offset += uint32(recordBytes(len(r.payload)))
	}
	return p
}

// Readers of sealed segments, a scan and Stats run on one log while
// another log's appends and reads make a two-file cache close the first
// log's files between and around their reads: every read returns the
// record intact (run with -race).
func TestFileCache_EvictionDuringConcurrentReads(t *testing.T) {
	c := newTestCache(t, 2, -1)
	a, _ := openLog(t, cachedConfig(t.TempDir(), c))
	b, _ := openLog(t, cachedConfig(t.TempDir(), c))
	recs := appendMany(t, a, 1, 120, func(i int) int { return 60 + i%200 })
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	if a.Stats().Segments < 4 {
		t.Fatal("want several sealed segments")
	}
	bRecs := appendMany(t, b, 1, 120, func(i int) int { return 60 + i%200 })
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() { // log b's owner: reads of its own segments, appends, a sync now and then
		rng := rand.New(rand.NewPCG(99, 7))
		for i := uint64(1000); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := readBack(b, []record{bRecs[rng.IntN(len(bRecs))]})
			if err == nil && i%8 == 0 {
				_, err = b.Append(i, payloadFor(i, 300))
			}
			if err == nil && i%64 == 0 {
				err = b.Sync()
			}
			if err != nil {
				t.Errorf("log b: %v", err)
				return
			}
		}
	})
	var readers sync.WaitGroup
	for g := range 6 {
		readers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 1000 {
				if err := readBack(a, []record{recs[rng.IntN(len(recs))]}); err != nil {
					t.Errorf("reader %d: %v", g, err)
					return
				}
			}
		})
	}
	readers.Go(func() {
		for range 5 {
			n := 0
			if err := a.Scan(func(uint64, Pos, int) error { n++; return nil }); err != nil || n != len(recs) {
				t.Errorf("scan: %d records, %v; want %d", n, err, len(recs))
				return
			}
			_ = a.Stats()
		}
	})
	readers.Wait()
	close(stop)
	churn.Wait()
	if st := c.Stats(); st.OpenMax > 2 || st.Evictions == 0 {
		t.Fatalf("cache: %+v; want at most 2 open and some evictions", st)
	}
}

// A closed segment file that cannot be opened again fails the read, or
// the sync, with ErrReopen wrapping the cause, and fails nothing else:
// once the file is back the same calls succeed and nothing is lost.
func TestFileCache_ReopenFailure(t *testing.T) {
	c := newTestCache(t, 1, -1)
	dir := t.TempDir()
	a, _ := openLog(t, cachedConfig(dir, c))
	b, _ := openLog(t, cachedConfig(t.TempDir(), c))
	evictA := func() { t.Helper(); evictVia(t, a, b) }
	recs := appendMany(t, a, 1, 60, func(int) int { return 150 })
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	evictA()
	moveAway := func(num uint32) (restore func()) {
		t.Helper()
		away := filepath.Join(t.TempDir(), "moved")
		if err := os.Rename(segmentPath(dir, num), away); err != nil {
			t.Fatal(err)
		}
		return func() {
			t.Helper()
			if err := os.Rename(away, segmentPath(dir, num)); err != nil {
				t.Fatal(err)
			}
		}
	}
	restore := moveAway(recs[0].pos.Segment)
	_, _, err := a.Read(recs[0].pos)
	if !errors.Is(err, ErrReopen) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read of a sealed segment that cannot be reopened: %v, want ErrReopen wrapping ErrNotExist", err)
	}
	restore()
	checkRead(t, a, recs[0].pos, recs[0].key, recs[0].payload)

	recs = append(recs, appendMany(t, a, 100, 3, func(int) int { return 150 })...)
	evictA()
	restore = moveAway(a.Stats().ActiveSegment)
	if err := a.Sync(); !errors.Is(err, ErrReopen) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("sync of an active segment that cannot be reopened: %v, want ErrReopen wrapping ErrNotExist", err)
	}
	recs = append(recs, appendMany(t, a, 200, 2, func(int) int { return 150 })...)
	restore()
	if err := a.Sync(); err != nil {
		t.Fatalf("sync once the file is back: %v", err)
	}
	checkScan(t, a, recs)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2, sum := openLog(t, cachedConfig(dir, c))
	if sum.Records != len(recs) || sum.Truncated {
		t.Fatalf("reopen: %s, want %d records", sum, len(recs))
	}
	checkScan(t, a2, recs)
}

// With a two-file cache, deleting an entirely dead segment closes its
// file first, compaction moves records out of segments whose files come
// and go, and after RollbackTo deletes segments the next rotations
// create files of the same numbers that are read, not the deleted ones.
func TestFileCache_DeletionCompactionRollback(t *testing.T) {
	c := newTestCache(t, 2, -1)
	dir := t.TempDir()
	l, _ := openLog(t, cachedConfig(dir, c))
	other, _ := openLog(t, cachedConfig(t.TempDir(), c))
	recs := appendMany(t, l, 1, 100, func(int) int { return 150 })
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	first := recs[0].pos.Segment
	live := map[uint64]record{}
	for _, r := range recs {
		switch {
		case r.pos.Segment == first, r.pos.Segment <= first+2 && r.key%4 != 0:
			if err := l.MarkDead(r.pos, len(r.payload)); err != nil {
				t.Fatal(err)
			}
		default:
			live[r.key] = r
		}
	}
	if fileExists(segmentPath(dir, first)) {
		t.Fatal("entirely dead segment not deleted")
	}
	mustAppend(t, other, 1, []byte("evict"))
	if err := other.Sync(); err != nil {
		t.Fatal(err)
	}
	st, err := l.Compact(func(key uint64, pos Pos) bool { return live[key].pos == pos },
		func(key uint64, _, to Pos) { r := live[key]; r.pos = to; live[key] = r })
	if err != nil || st.SegmentsCompacted == 0 {
		t.Fatalf("Compact: %+v, %v", st, err)
	}
	for _, r := range live {
		checkRead(t, l, r.pos, r.key, r.payload)
	}

	mark := l.End()
	gone := appendMany(t, l, 1000, 60, func(int) int { return 150 })
	checkRead(t, l, gone[len(gone)-1].pos, gone[len(gone)-1].key, gone[len(gone)-1].payload)
	if err := l.RollbackTo(mark); err != nil {
		t.Fatal(err)
	}
	again := appendMany(t, l, 2000, 60, func(int) int { return 150 })
	if again[len(again)-1].pos != gone[len(gone)-1].pos {
		t.Fatalf("the new records end at %v, the deleted ones at %v", again[len(again)-1].pos, gone[len(gone)-1].pos)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := readBack(l, again); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.OpenMax > 2 {
		t.Fatalf("%d files open at once; the bound is 2", st.OpenMax)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := openLog(t, cachedConfig(dir, c))
	for _, r := range live {
		checkRead(t, l2, r.pos, r.key, r.payload)
	}
	if err := readBack(l2, again); err != nil {
		t.Fatal(err)
	}
}

// With pre-written segments a ready spare waits closed: rotation opens it
// through the cache, and once the log is idle no descriptor points into
// its directory, spare included.
func TestFileCache_SpareWaitsClosed(t *testing.T) {
	const idle = 50 * time.Millisecond
	c := newTestCache(t, 4, idle)
	dir := t.TempDir()
	cfg := cachedConfig(dir, c)
	cfg.PreallocateSegments = true
	cfg.PrewriteRateMaxBytesPerSecond = 1 << 40
	l, _ := openLog(t, cfg)
	spareReady := func() bool {
		l.mu.RLock()
		defer l.mu.RUnlock()
		return l.spare.ready
	}
	var recs []record
	key := uint64(1)
	add := func() {
		recs = append(recs, appendMany(t, l, key, 1, func(int) int { return 150 })...)
		key++
	}
	for round := uint32(1); ; round++ {
		// Fill the active segment past half, then wait for the spare.
		for l.active.sizeBytes < smallSegmentBytes/2+200 {
			add()
		}
		testwait.Until(t, 10*time.Second, fmt.Sprintf("round %d: the spare to be ready", round), spareReady)
		if l.Stats().ActiveSegment != round {
			t.Fatalf("round %d: active segment %d", round, l.Stats().ActiveSegment)
		}
		if round == 3 {
			break
		}
		for l.Stats().ActiveSegment == round {
			add()
		}
		if !l.Stats().ActivePrewritten {
			t.Fatalf("round %d: rotation did not use the spare", round)
		}
	}
	if !fileExists(filepath.Join(dir, spareFileName)) {
		t.Fatal("no spare file")
	}
	testwait.UntilNil(t, 5*time.Second, "the log's files closed", reporting(func() bool { return openFDsUnder(t, dir) == 0 && l.Stats().OpenFiles == 0 },
		func() string { return fmt.Sprintf("%d descriptors in the directory", openFDsUnder(t, dir)) }))
	checkScan(t, l, recs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, sum := openLog(t, cachedConfig(dir, c))
	if sum.Records != len(recs) {
		t.Fatalf("reopen: %s, want %d records", sum, len(recs))
	}
	checkScan(t, l2, recs)
}

// Logs sharing a cache start no goroutine each: a hundred of them, all
// written, run on no more goroutines than before, and once idle hold no
// file and no timer.
func TestFileCache_NoGoroutinePerLog(t *testing.T) {
	const logs, idle = 100, 50 * time.Millisecond
	c := newTestCache(t, 16, idle)
	root := t.TempDir()
	before := runtime.NumGoroutine()
	for i := range logs {
		l, _ := openLog(t, cachedConfig(filepath.Join(root, fmt.Sprint(i)), c))
		appendMany(t, l, 1, 3, func(int) int { return 100 })
	}
	// One more at most: the cache's sweep while it runs.
	testwait.UntilNil(t, 5*time.Second, "the logs' goroutines to end", reporting(func() bool { return runtime.NumGoroutine() <= before+1 },
		func() string { return fmt.Sprintf("%d goroutines, %d before the logs", runtime.NumGoroutine(), before) }))
	testwait.UntilNil(t, 5*time.Second, "the cache to close every file and disarm its sweep", reporting(func() bool { return c.Stats().Open == 0 && segFDsUnder(root) == 0 && !sweepArmed(c) },
		func() string { return fmt.Sprintf("cache %+v, %d descriptors", c.Stats(), segFDsUnder(root)) }))
	if st := c.Stats(); st.IdleFlushes < logs {
		t.Fatalf("%d idle flushes, want one per log (%d)", st.IdleFlushes, logs)
	}
}

// evictVia has log b, sharing a's one-file cache, take the cache's only
// slot, and checks that a holds no file after it.
func evictVia(t *testing.T, a, b *Log) {
	t.Helper()
	mustAppend(t, b, 1, []byte("other log"))
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := a.Stats().OpenFiles; n != 0 {
		t.Fatalf("log a holds %d open files after log b used the cache's only slot", n)
	}
}
