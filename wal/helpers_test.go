package wal

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// smallSegmentBytes makes rotation cheap to reach in tests.
const smallSegmentBytes = 4096

// testConfig returns a config in dir with small segments and a silent
// logger.
func testConfig(dir string) Config {
	cfg := DefaultConfig(dir)
	cfg.SegmentBytesMax = smallSegmentBytes
	cfg.RecordBytesMax = smallSegmentBytes - segmentHeaderBytes - recordHeaderBytes
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

// openLog opens cfg, failing the test on error, and closes the log at the
// end of the test.
func openLog(t testing.TB, cfg Config) (*Log, RecoverySummary) {
	t.Helper()
	l, sum, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", cfg.Dir, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, sum
}

// payloadFor returns n deterministic pseudo-random bytes derived from key.
func payloadFor(key uint64, n int) []byte {
	r := rand.New(rand.NewPCG(key, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// mustAppend appends a record, failing the test on error.
func mustAppend(t testing.TB, l *Log, key uint64, payload []byte) Pos {
	t.Helper()
	pos, err := l.Append(key, payload)
	if err != nil {
		t.Fatalf("Append(key %d, %d bytes): %v", key, len(payload), err)
	}
	return pos
}

// checkRead reads pos and compares it with key and payload.
func checkRead(t testing.TB, l *Log, pos Pos, key uint64, payload []byte) {
	t.Helper()
	gotKey, got, err := l.Read(pos)
	if err != nil {
		t.Fatalf("Read(%v): %v", pos, err)
	}
	if gotKey != key || !bytes.Equal(got, payload) {
		t.Fatalf("Read(%v) = key %d, %d bytes; want key %d, %d bytes (equal=%v)",
			pos, gotKey, len(got), key, len(payload), bytes.Equal(got, payload))
	}
}

// wantErr fails the test unless err wraps target.
func wantErr(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// segmentPath returns the path of segment num in dir.
func segmentPath(dir string, num uint32) string {
	return filepath.Join(dir, segmentFileName(num))
}

// segmentNumbers lists the segment files present in dir.
func segmentNumbers(t testing.TB, dir string) []uint32 {
	t.Helper()
	nums, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	return nums
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// record is one appended record remembered by a test.
type record struct {
	key     uint64
	pos     Pos
	payload []byte
}

// appendMany appends n records with payload sizes drawn from sizeOf.
func appendMany(t testing.TB, l *Log, firstKey uint64, n int, sizeOf func(i int) int) []record {
	t.Helper()
	recs := make([]record, n)
	for i := range recs {
		key := firstKey + uint64(i)
		p := payloadFor(key, sizeOf(i))
		recs[i] = record{key: key, pos: mustAppend(t, l, key, p), payload: p}
	}
	return recs
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
