//go:build chaosdisk

package wal

import (
	"errors"
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
