package wal

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// fillSegments appends 1000-byte records (four per small segment) until
// segments full segments are sealed, and returns the records.
func fillSegments(t *testing.T, l *Log, segments int) []record {
	t.Helper()
	return appendMany(t, l, 1, 4*segments, func(int) int { return 1000 })
}

// markDead marks every record of recs in segment num dead.
func markDead(t *testing.T, l *Log, recs []record, num uint32) {
	t.Helper()
	for _, r := range recs {
		if r.pos.Segment == num {
			if err := l.MarkDead(r.pos, len(r.payload)); err != nil {
				t.Fatalf("MarkDead(%v): %v", r.pos, err)
			}
		}
	}
}

func TestWAL_MarkDeadDeletesWholeSealedSegment(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	recs := fillSegments(t, l, 3)
	mustAppend(t, l, 99, []byte("keeps segment 3 sealed")) // opens segment 4

	// All but one record of segment 1 dead: the file stays.
	seg1 := recs[:4]
	markDead(t, l, seg1[:3], 1)
	if !fileExists(segmentPath(cfg.Dir, 1)) {
		t.Fatal("segment 1 deleted while a record is live")
	}
	checkRead(t, l, seg1[3].pos, seg1[3].key, seg1[3].payload)
	markDead(t, l, seg1[3:], 1)
	if fileExists(segmentPath(cfg.Dir, 1)) {
		t.Fatal("entirely dead segment 1 still on disk")
	}
	_, _, err := l.Read(seg1[0].pos)
	wantErr(t, err, ErrBadPosition, "Read in deleted segment")
	wantErr(t, l.MarkDead(seg1[0].pos, 1000), ErrBadPosition, "MarkDead in deleted segment")

	// The active segment is never deleted, even entirely dead.
	active := l.Stats().ActiveSegment
	if err := l.MarkDead(Pos{Segment: active, Offset: segmentHeaderBytes}, len("keeps segment 3 sealed")); err != nil {
		t.Fatal(err)
	}
	if !fileExists(segmentPath(cfg.Dir, active)) {
		t.Fatal("active segment deleted")
	}
	// Sealing it retires it.
	recs2 := appendMany(t, l, 500, 4, func(int) int { return cfg.RecordBytesMax })
	if fileExists(segmentPath(cfg.Dir, active)) {
		t.Fatal("entirely dead segment not deleted when sealed")
	}
	checkRead(t, l, recs2[3].pos, recs2[3].key, recs2[3].payload)
	if st := l.Stats(); st.SegmentsDeleted != 2 {
		t.Fatalf("stats %+v, want 2 deleted", st)
	}
}

func TestWAL_MarkDeadRejectsBadInput(t *testing.T) {
	l, _ := openLog(t, testConfig(t.TempDir()))
	pos := mustAppend(t, l, 1, make([]byte, 10))
	wantErr(t, l.MarkDead(pos, -1), ErrBadPosition, "negative size")
	wantErr(t, l.MarkDead(pos, 11), ErrBadPosition, "size past the end")
	wantErr(t, l.MarkDead(Pos{Segment: 1, Offset: 3}, 0), ErrBadPosition, "offset in header")
	if err := l.MarkDead(pos, 10); err != nil {
		t.Fatal(err)
	}
	wantErr(t, l.MarkDead(pos, 10), ErrBadPosition, "double mark")
	if st := l.Stats(); st.DeadBytes != 26 || st.LiveBytes != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, l.MarkDead(pos, 10), ErrClosed, "MarkDead after Close")
}

func TestWAL_PinDefersDeletion(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	recs := fillSegments(t, l, 2)
	mustAppend(t, l, 99, make([]byte, 100)) // seals segment 2

	release1 := l.Pin()
	release2 := l.Pin()
	markDead(t, l, recs, 1)
	if !fileExists(segmentPath(cfg.Dir, 1)) {
		t.Fatal("pinned segment deleted")
	}
	for _, r := range recs[:4] {
		checkRead(t, l, r.pos, r.key, r.payload)
	}
	if st := l.Stats(); st.SegmentsPendingDelete != 1 || st.Pins != 2 {
		t.Fatalf("stats %+v", st)
	}
	release1()
	release1() // idempotent: must not drop the second pin
	if !fileExists(segmentPath(cfg.Dir, 1)) {
		t.Fatal("segment deleted while the second pin is held")
	}
	release2()
	if fileExists(segmentPath(cfg.Dir, 1)) {
		t.Fatal("segment kept after every pin was released")
	}
	if st := l.Stats(); st.SegmentsPendingDelete != 0 || st.Pins != 0 {
		t.Fatalf("stats %+v", st)
	}

	// A pin does not cover segments created after it.
	release3 := l.Pin()
	more := appendMany(t, l, 100, 8, func(int) int { return 1000 })
	newSeg := more[len(more)-1].pos.Segment - 1
	markDead(t, l, more, newSeg)
	if fileExists(segmentPath(cfg.Dir, newSeg)) {
		t.Fatalf("segment %d, created after the pin, was kept", newSeg)
	}
	release3()
}

func TestWAL_CloseDeletesPendingSegments(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	recs := fillSegments(t, l, 2)
	mustAppend(t, l, 99, make([]byte, 100)) // seals segment 2
	release := l.Pin()
	markDead(t, l, recs, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	release()
	if fileExists(segmentPath(cfg.Dir, 1)) {
		t.Fatal("pending segment survived Close")
	}
}

// compactIndex is an owner's view: key -> live record.
type compactIndex map[uint64]record

func (ix compactIndex) live(key uint64, pos Pos) bool { return ix[key].pos == pos }

func (ix compactIndex) moved(t *testing.T, got *int) func(uint64, Pos, Pos) {
	return func(key uint64, from, to Pos) {
		r, ok := ix[key]
		if !ok || r.pos != from {
			t.Errorf("moved(%d, %v, %v) for a record that is not live", key, from, to)
		}
		r.pos = to
		ix[key] = r
		*got++
	}
}

func TestWAL_CompactionRandomPattern(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	recs := appendMany(t, l, 1, 400, func(int) int { return rng.IntN(600) })
	ix := compactIndex{}
	var dead []record
	for _, r := range recs {
		if rng.IntN(3) == 0 {
			ix[r.key] = r
			continue
		}
		dead = append(dead, r)
		if err := l.MarkDead(r.pos, len(r.payload)); err != nil {
			t.Fatal(err)
		}
	}
	before := l.Stats()
	movedCalls := 0
	st, err := l.Compact(ix.live, ix.moved(t, &movedCalls))
	if err != nil {
		t.Fatal(err)
	}
	after := l.Stats()
	if st.SegmentsCompacted == 0 || st.RecordsMoved != movedCalls || st.BytesReclaimed <= 0 {
		t.Fatalf("compact stats %+v (moved calls %d)", st, movedCalls)
	}
	if after.TotalBytes >= before.TotalBytes {
		t.Fatalf("no space reclaimed: before %d bytes, after %d", before.TotalBytes, after.TotalBytes)
	}
	for key, r := range ix {
		checkRead(t, l, r.pos, key, r.payload)
	}
	present := map[uint32]bool{}
	for _, num := range segmentNumbers(t, cfg.Dir) {
		present[num] = true
	}
	if len(present) != after.Segments {
		t.Fatalf("%d files, stats say %d segments", len(present), after.Segments)
	}
	for _, r := range dead {
		if !present[r.pos.Segment] {
			if _, _, err := l.Read(r.pos); !errors.Is(err, ErrBadPosition) {
				t.Fatalf("dead record %v in a removed segment: Read err %v", r.pos, err)
			}
		}
	}
	compactUntilStable(t, l, ix)
	for key, r := range ix {
		checkRead(t, l, r.pos, key, r.payload)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, sum := openLog(t, cfg)
	if sum.Truncated {
		t.Fatalf("reopen after compaction: %v", sum)
	}
	for key, r := range ix {
		checkRead(t, l2, r.pos, key, r.payload)
	}
}

// compactUntilStable repeats Compact until it finds nothing to do. A
// segment sealed during a pass (the old active one) waits for the next
// pass, so a few passes converge.
func compactUntilStable(t *testing.T, l *Log, ix compactIndex) {
	t.Helper()
	n := 0
	for pass := 2; ; pass++ {
		st, err := l.Compact(ix.live, ix.moved(t, &n))
		if err != nil {
			t.Fatal(err)
		}
		if st.SegmentsCompacted == 0 {
			return
		}
		if pass > 4 {
			t.Fatalf("compaction pass %d still compacting: %+v", pass, st)
		}
	}
}

func TestWAL_CompactionWhilePinned(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	recs := fillSegments(t, l, 3)
	mustAppend(t, l, 999, make([]byte, 100)) // seals segment 3
	ix := compactIndex{}
	for i, r := range recs {
		if i%4 == 0 {
			ix[r.key] = r
		} else if err := l.MarkDead(r.pos, len(r.payload)); err != nil {
			t.Fatal(err)
		}
	}
	release := l.Pin()
	n := 0
	st, err := l.Compact(ix.live, ix.moved(t, &n))
	if err != nil {
		t.Fatal(err)
	}
	if st.SegmentsCompacted != 3 || st.SegmentsDeferred != 3 || st.RecordsMoved != 3 || st.RecordsDropped != 9 {
		t.Fatalf("compact stats %+v", st)
	}
	for _, num := range []uint32{1, 2, 3} {
		if !fileExists(segmentPath(cfg.Dir, num)) {
			t.Fatalf("segment %d removed while pinned", num)
		}
	}
	for _, r := range recs { // old positions, live or dead, stay readable
		checkRead(t, l, r.pos, r.key, r.payload)
	}
	release()
	for _, num := range []uint32{1, 2, 3} {
		if fileExists(segmentPath(cfg.Dir, num)) {
			t.Fatalf("segment %d kept after release", num)
		}
	}
	for key, r := range ix {
		checkRead(t, l, r.pos, key, r.payload)
	}
	_, err = l.Compact(nil, nil)
	if err == nil {
		t.Fatal("Compact(nil, nil) succeeded")
	}
}

func TestWAL_ScanListsRecords(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	recs := appendMany(t, l, 1, 25, func(i int) int { return 90 * i })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := openLog(t, cfg)
	var got []record
	err := l2.Scan(func(key uint64, pos Pos, payloadBytes int) error {
		got = append(got, record{key: key, pos: pos, payload: make([]byte, payloadBytes)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("Scan saw %d records, want %d", len(got), len(recs))
	}
	for i, r := range recs {
		if got[i].key != r.key || got[i].pos != r.pos || len(got[i].payload) != len(r.payload) {
			t.Fatalf("Scan record %d = %+v, want key %d at %v", i, got[i], r.key, r.pos)
		}
	}
	stop := errors.New("stop")
	calls := 0
	if err := l2.Scan(func(uint64, Pos, int) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("Scan stop: err %v after %d calls", err, calls)
	}
}

func TestWAL_Remove(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	fillSegments(t, l, 2)
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if nums := segmentNumbers(t, cfg.Dir); len(nums) != 0 {
		t.Fatalf("segments left after Remove: %v", nums)
	}
	l2, sum := openLog(t, cfg)
	if sum.Records != 0 || sum.Segments != 1 {
		t.Fatalf("summary after Remove: %v", sum)
	}
	checkRecovered(t, l2, nil)
}
