//go:build chaosdisk

package wal

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/ferrymq/ferry/internal/diskfault"
)

// An injected fsync failure fails Sync with EIO and stops writes until
// the log is rolled back to a mark; then it takes writes again.
func TestWAL_InjectedSyncFailureRollsBack(t *testing.T) {
	dir := t.TempDir()
	l, _ := openLog(t, testConfig(dir))
	if _, err := l.Append(1, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	mark := l.End()
	if _, err := l.Append(2, []byte("lost")); err != nil {
		t.Fatal(err)
	}
	defer diskfault.Arm("", 0)
	if err := diskfault.Arm(dir, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync with an injected failure: %v, want EIO", err)
	}
	if _, err := l.Append(3, []byte("refused")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after a failed sync: %v, want ErrFailed", err)
	}
	if err := l.RollbackTo(mark); err != nil {
		t.Fatal(err)
	}
	pos, err := l.Append(4, []byte("again"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if key, payload, err := l.Read(pos); err != nil || key != 4 || string(payload) != "again" {
		t.Fatalf("read after recovery: %d %q %v", key, payload, err)
	}
}

// An injected write failure or short write, on a buffered flush or on a
// large record's direct write, fails the write with EIO; RollbackTo cuts
// off what reached the file, the next appends succeed, and a reopen finds
// exactly the records written before and after, with no torn tail.
func TestWAL_InjectedWriteFailureCutBack(t *testing.T) {
	for _, kind := range []diskfault.Kind{diskfault.Write, diskfault.ShortWrite} {
		for _, large := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/large=%v", kind, large), func(t *testing.T) {
				testInjectedWriteFailure(t, kind, large)
			})
		}
	}
}

func testInjectedWriteFailure(t *testing.T, kind diskfault.Kind, large bool) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	size := func(int) int { return 300 }
	if large {
		// Records at least writeBufferBytes long bypass the buffer.
		cfg = DefaultConfig(dir)
		cfg.Logger = testConfig(dir).Logger
		size = func(int) int { return writeBufferBytes + 100 }
	}
	l, _ := openLog(t, cfg)
	kept := appendMany(t, l, 1, 5, size)
	if err := l.SyncData(); err != nil {
		t.Fatal(err)
	}
	mark := l.End()
	defer diskfault.Arm("", 0)
	if err := diskfault.ArmKind(kind, dir, 1); err != nil {
		t.Fatal(err)
	}
	var err error
	for key := uint64(100); err == nil && key < 110; key++ {
		if _, err = l.Append(key, payloadFor(key, size(0))); err == nil {
			err = l.SyncData()
		}
	}
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("writes with an injected %s: %v, want EIO", kind, err)
	}
	if diskfault.Remaining() != 0 {
		t.Fatal("the armed fault did not fire")
	}
	if _, err := l.Append(200, []byte("refused")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after a failed write: %v, want ErrFailed", err)
	}
	if fi, err := os.Stat(segmentPath(dir, mark.Pos().Segment)); err != nil {
		t.Fatal(err)
	} else if kind == diskfault.ShortWrite && fi.Size() <= int64(mark.Pos().Offset) {
		t.Fatalf("the short write left no bytes in the file (size %d, mark %v)", fi.Size(), mark.Pos())
	}
	if err := l.RollbackTo(mark); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, appendMany(t, l, 300, 3, size)...)
	if err := l.SyncData(); err != nil {
		t.Fatal(err)
	}
	checkScan(t, l, kept)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, sum := openLog(t, cfg)
	if sum.Truncated || sum.Records != len(kept) {
		t.Fatalf("reopen after a cut-back write: %s, want %d records and no torn tail", sum, len(kept))
	}
	checkScan(t, l2, kept)
}

// A FileCache fsyncs a written segment file before closing it for another
// log. An injected failure of that fsync fails the owner's next Sync with
// EIO and its writes until RollbackTo; then the log takes writes again
// and a reopen finds exactly the records kept.
func TestWAL_InjectedSyncFailureOnEviction(t *testing.T) {
	c := newTestCache(t, 1, -1)
	dir := t.TempDir()
	a, _ := openLog(t, cachedConfig(dir, c))
	b, _ := openLog(t, cachedConfig(t.TempDir(), c))
	size := func(int) int { return 300 }
	kept := appendMany(t, a, 1, 5, size)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	mark := a.End()
	appendMany(t, a, 100, 20, size) // rotates: the new segment's header is written, not synced
	if a.Stats().ActiveSegment == mark.Pos().Segment {
		t.Fatal("no rotation")
	}
	defer diskfault.Arm("", 0)
	if err := diskfault.Arm(dir, 1); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, 1, []byte("other log"))
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if diskfault.Remaining() != 0 || a.Stats().OpenFiles != 0 {
		t.Fatalf("closing log a's written file made no fsync (%d faults left, %d files open)", diskfault.Remaining(), a.Stats().OpenFiles)
	}
	if err := a.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync after a failed fsync at eviction: %v, want EIO", err)
	}
	if _, err := a.Append(3, []byte("refused")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after a failed fsync at eviction: %v, want ErrFailed", err)
	}
	if err := a.RollbackTo(mark); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, appendMany(t, a, 300, 3, size)...)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	checkScan(t, a, kept)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2, sum := openLog(t, cachedConfig(dir, c))
	if sum.Truncated || sum.Records != len(kept) {
		t.Fatalf("reopen: %s, want %d records and no torn tail", sum, len(kept))
	}
	checkScan(t, a2, kept)
}
