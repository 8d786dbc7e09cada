package wal

import (
	"errors"
	"testing"
)

// KeyAt answers a record's key from its header, for flushed and unflushed
// records alike, and refuses positions that name no record.
func TestLog_KeyAtReadsTheHeaderKey(t *testing.T) {
	l, _ := openLog(t, testConfig(t.TempDir()))
	var pos []Pos
	for key := uint64(1); key <= 20; key++ {
		p, err := l.Append(key*7, payloadFor(key, 300))
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	for i, p := range pos {
		key, err := l.KeyAt(p)
		if err != nil || key != uint64(i+1)*7 {
			t.Fatalf("KeyAt(%v) = %d, %v; want %d", p, key, err, (i+1)*7)
		}
	}
	if _, err := l.KeyAt(Pos{Segment: 999, Offset: 32}); !errors.Is(err, ErrBadPosition) {
		t.Fatalf("KeyAt of a missing segment: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.KeyAt(pos[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("KeyAt on a closed log: %v", err)
	}
}
