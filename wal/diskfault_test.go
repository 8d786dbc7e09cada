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

// checkScan fails the test unless the log holds exactly want, in order.
func checkScan(t *testing.T, l *Log, want []record) {
	t.Helper()
	var got []record
	if err := l.Scan(func(key uint64, pos Pos, _ int) error {
		got = append(got, record{key: key, pos: pos})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("log holds %d records, want %d", len(got), len(want))
	}
	for i, r := range want {
		if got[i].key != r.key || got[i].pos != r.pos {
			t.Fatalf("record %d: key %d at %v, want key %d at %v", i, got[i].key, got[i].pos, r.key, r.pos)
		}
		checkRead(t, l, r.pos, r.key, r.payload)
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
