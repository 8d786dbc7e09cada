package wal

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

func TestWAL_RollbackToAcrossRotation(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	kept := appendMany(t, l, 1, 3, func(int) int { return 100 })
	if err := l.SyncData(); err != nil {
		t.Fatal(err)
	}
	mark := l.End()
	// Enough to rotate twice after the mark.
	appendMany(t, l, 100, 8, func(int) int { return 1500 })
	if got := len(segmentNumbers(t, cfg.Dir)); got < 3 {
		t.Fatalf("want at least 3 segments before rollback, have %d", got)
	}
	if err := l.RollbackTo(mark); err != nil {
		t.Fatal(err)
	}
	if got := segmentNumbers(t, cfg.Dir); len(got) != 1 || got[0] != mark.Pos().Segment {
		t.Fatalf("segments after rollback = %v, want only %d", got, mark.Pos().Segment)
	}
	if end := l.End().Pos(); end != mark.Pos() {
		t.Fatalf("end after rollback = %v, want %v", end, mark.Pos())
	}
	after := mustAppend(t, l, 999, []byte("after"))
	if after != mark.Pos() {
		t.Fatalf("next record at %v, want %v", after, mark.Pos())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, sum := openLog(t, cfg)
	if sum.Truncated || sum.Records != len(kept)+1 {
		t.Fatalf("reopen: %s", sum)
	}
	for _, r := range kept {
		checkRead(t, l2, r.pos, r.key, r.payload)
	}
	checkRead(t, l2, after, 999, []byte("after"))
}

func TestWAL_RollbackKeepsBufferedBytesBeforeMark(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	kept := appendMany(t, l, 1, 2, func(int) int { return 50 })
	mark := l.End() // the two records are still only buffered
	appendMany(t, l, 10, 2, func(int) int { return 50 })
	if err := l.RollbackTo(mark); err != nil {
		t.Fatal(err)
	}
	if err := l.SyncData(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Records != 2 {
		t.Fatalf("records after rollback = %d, want 2", st.Records)
	}
	for _, r := range kept {
		checkRead(t, l, r.pos, r.key, r.payload)
	}
}

func TestWAL_ScanPrefixMarkDeadAtReadRange(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	recs := appendMany(t, l, 1, 20, func(i int) int { return 10 + 37*i })
	i := 0
	err := l.ScanPrefix(8, func(key uint64, pos Pos, n int, prefix []byte) error {
		r := recs[i]
		i++
		want := r.payload[:min(8, len(r.payload))]
		if key != r.key || pos != r.pos || n != len(r.payload) || !bytes.Equal(prefix, want) {
			t.Fatalf("record %d: key %d pos %v n %d prefix %x", i, key, pos, n, prefix)
		}
		return nil
	})
	if err != nil || i != len(recs) {
		t.Fatalf("scan: %v after %d records", err, i)
	}
	r := recs[5]
	got := make([]byte, 7)
	if err := l.ReadRange(r.pos, 3, got); err != nil || !bytes.Equal(got, r.payload[3:10]) {
		t.Fatalf("ReadRange: %v %x", err, got)
	}
	if err := l.ReadRange(r.pos, int64(len(r.payload)-3), got); !errors.Is(err, ErrBadPosition) {
		t.Fatalf("ReadRange past the payload: %v", err)
	}
	segs := l.Segments()
	first := segs[0]
	for _, rec := range recs {
		if rec.pos.Segment == first.Number {
			if err := l.MarkDeadAt(rec.pos); err != nil {
				t.Fatal(err)
			}
		}
	}
	if first.Sealed && fileExists(segmentPath(cfg.Dir, first.Number)) {
		t.Fatalf("sealed segment %d entirely dead but still on disk", first.Number)
	}
}

func TestWAL_RollbackToRetiredSegment(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	recs := appendMany(t, l, 1, 2, func(int) int { return 1500 })
	for _, r := range recs {
		if err := l.MarkDead(r.pos, len(r.payload)); err != nil {
			t.Fatal(err)
		}
	}
	mark := l.End()
	// Does not fit: rotation seals segment 1, which is entirely dead and
	// is deleted at once.
	mustAppend(t, l, 10, payloadFor(10, 1500))
	if fileExists(segmentPath(cfg.Dir, mark.Pos().Segment)) {
		t.Fatal("setup: the dead segment was not retired at rotation")
	}
	if err := l.RollbackTo(mark); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Records != 0 || st.Segments != 1 {
		t.Fatalf("after rollback: %+v", st)
	}
	p := mustAppend(t, l, 11, []byte("x"))
	if p.Segment != mark.Pos().Segment+1 {
		t.Fatalf("next record in segment %d", p.Segment)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, sum := openLog(t, cfg)
	if sum.Truncated || sum.Records != 1 {
		t.Fatalf("reopen: %s", sum)
	}
	checkRead(t, l2, p, 11, []byte("x"))
}

// A write that failed part-way leaves part of a record in the file past
// the end of the log (as a failing disk's short write does); RollbackTo
// truncates it, so that later, shorter records cannot leave a torn tail
// behind them and a reopen finds exactly the records written.
func TestWAL_RollbackCutsPartialRecordInFile(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	l, _ := openLog(t, cfg)
	kept := appendMany(t, l, 1, 3, func(int) int { return 100 })
	if err := l.SyncData(); err != nil {
		t.Fatal(err)
	}
	mark := l.End()
	f, err := os.OpenFile(segmentPath(dir, mark.Pos().Segment), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := payloadFor(99, 2000)
	if _, err := f.WriteAt(torn, int64(mark.Pos().Offset)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	_ = l.fail(errors.New("short write"))
	l.mu.Unlock()
	if err := l.RollbackTo(mark); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, appendMany(t, l, 10, 2, func(int) int { return 50 })...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, sum := openLog(t, cfg)
	if sum.Truncated || sum.Records != len(kept) {
		t.Fatalf("reopen: %s, want %d records and no torn tail", sum, len(kept))
	}
	for _, r := range kept {
		checkRead(t, l2, r.pos, r.key, r.payload)
	}
}

func TestWAL_ReadHeadAndRange(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	cfg.Logger = testConfig("").Logger
	l, _ := openLog(t, cfg)
	// A small record (one read), a large one read near its start (one
	// read) and far into it (two reads); the last stays in the write
	// buffer, the others are flushed by the large one.
	recs := appendMany(t, l, 1, 3, func(i int) int { return []int{100, 200 << 10, 50}[i] })
	cases := []struct {
		rec       int
		headBytes int
		off, n    int64
	}{
		{0, 10, 20, 30}, {0, 10, 0, 100}, {1, 38, 38, 1000}, {1, 38, 150 << 10, 4096}, {2, 8, 8, 42},
	}
	for _, c := range cases {
		r := recs[c.rec]
		head, got := make([]byte, c.headBytes), make([]byte, c.n)
		if err := l.ReadHeadAndRange(r.pos, head, c.off, got); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if !bytes.Equal(head, r.payload[:c.headBytes]) || !bytes.Equal(got, r.payload[c.off:c.off+c.n]) {
			t.Fatalf("%+v: wrong bytes", c)
		}
	}
	for _, c := range []struct {
		headBytes int
		off, n    int64
	}{{10, 95, 10}, {10, -1, 5}, {101, 0, 5}, {10, 150 << 10, 10}} {
		head, got := make([]byte, c.headBytes), make([]byte, c.n)
		if err := l.ReadHeadAndRange(recs[0].pos, head, c.off, got); err == nil {
			t.Fatalf("%+v outside a 100-byte payload: no error", c)
		}
	}
	if err := l.ReadHeadAndRange(recs[1].pos, make([]byte, 38), 200<<10-10, make([]byte, 20)); !errors.Is(err, ErrBadPosition) {
		t.Fatalf("range past a large payload: %v", err)
	}
}
