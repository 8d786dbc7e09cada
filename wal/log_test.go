package wal

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

func TestWAL_RoundTrip(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentBytesMax = 1 << 20
	cfg.RecordBytesMax = writeBufferBytes + 1000
	l, _ := openLog(t, cfg)

	sizes := []int{0, 1, 7, 15, 16, 17, 255, 256, 4095, 4096, 65536,
		writeBufferBytes - recordHeaderBytes - 1, writeBufferBytes - recordHeaderBytes,
		writeBufferBytes, cfg.RecordBytesMax, 0, 3}
	var recs []record
	for i, n := range sizes {
		key := uint64(i) * 0x9E3779B97F4A7C15
		p := payloadFor(key, n)
		recs = append(recs, record{key: key, pos: mustAppend(t, l, key, p), payload: p})
	}
	for _, r := range recs {
		checkRead(t, l, r.pos, r.key, r.payload)
	}

	before := l.Stats()
	_, err := l.Append(1, make([]byte, cfg.RecordBytesMax+1))
	wantErr(t, err, ErrRecordTooLarge, "Append past RecordBytesMax")
	if after := l.Stats(); after != before {
		t.Fatalf("too-large Append changed stats:\n before %+v\n after  %+v", before, after)
	}

	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		checkRead(t, l, r.pos, r.key, r.payload)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, sum := openLog(t, cfg)
	if sum.Records != len(sizes) || sum.Truncated {
		t.Fatalf("reopen summary %v, want %d records and no truncation", sum, len(sizes))
	}
	for _, r := range recs {
		checkRead(t, l2, r.pos, r.key, r.payload)
	}
}

func TestWAL_ReadReturnsFreshSlice(t *testing.T) {
	l, _ := openLog(t, testConfig(t.TempDir()))
	pos := mustAppend(t, l, 1, []byte("hello"))
	_, a, err := l.Read(pos)
	if err != nil {
		t.Fatal(err)
	}
	a[0] = 'J'
	checkRead(t, l, pos, 1, []byte("hello"))
}

func TestWAL_RotationAtSizeBound(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	const payloadBytes = 1000 // 1016-byte records: four fill 4080 of 4096 bytes
	const perSegment = 4
	recs := appendMany(t, l, 1, 3*perSegment+1, func(int) int { return payloadBytes })
	for i, r := range recs {
		want := Pos{Segment: uint32(i/perSegment + 1), Offset: uint32(segmentHeaderBytes + (i%perSegment)*(recordHeaderBytes+payloadBytes))}
		if r.pos != want {
			t.Fatalf("record %d at %v, want %v", i, r.pos, want)
		}
	}
	// A largest record fills an empty segment exactly.
	big := payloadFor(99, cfg.RecordBytesMax)
	bigPos := mustAppend(t, l, 99, big)
	if bigPos != (Pos{Segment: 5, Offset: segmentHeaderBytes}) {
		t.Fatalf("largest record at %v, want seg 5 @ 16", bigPos)
	}
	small := mustAppend(t, l, 100, nil)
	if small.Segment != 6 {
		t.Fatalf("record after a full segment at %v, want segment 6", small)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, num := range segmentNumbers(t, cfg.Dir) {
		info, err := os.Stat(segmentPath(cfg.Dir, num))
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > cfg.SegmentBytesMax {
			t.Fatalf("segment %d is %d bytes, above SegmentBytesMax %d", num, info.Size(), cfg.SegmentBytesMax)
		}
	}
	for _, r := range recs {
		checkRead(t, l, r.pos, r.key, r.payload)
	}
	checkRead(t, l, bigPos, 99, big)
	checkRead(t, l, small, 100, []byte{})
	if st := l.Stats(); st.Segments != 6 || st.ActiveSegment != 6 || st.Records != len(recs)+2 {
		t.Fatalf("stats %+v, want 6 segments, active 6, %d records", st, len(recs)+2)
	}
}

func TestWAL_ReopenContinuesActiveSegment(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, sum := openLog(t, cfg)
	if sum.Segments != 1 || sum.Records != 0 {
		t.Fatalf("fresh summary %v", sum)
	}
	recs := appendMany(t, l, 1, 30, func(i int) int { return i * 37 % 500 })
	last := recs[len(recs)-1]
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, l.Close(), nil, "second Close")
	_, _, err := l.Read(last.pos)
	wantErr(t, err, ErrClosed, "Read after Close")
	_, err = l.Append(1, nil)
	wantErr(t, err, ErrClosed, "Append after Close")

	l2, sum := openLog(t, cfg)
	nums := segmentNumbers(t, cfg.Dir)
	if sum.Records != len(recs) || sum.Segments != len(nums) || sum.Truncated {
		t.Fatalf("reopen summary %v, want %d records in %d segments", sum, len(recs), len(nums))
	}
	for _, r := range recs {
		checkRead(t, l2, r.pos, r.key, r.payload)
	}
	next := mustAppend(t, l2, 1000, []byte("after reopen"))
	wantPos := Pos{Segment: last.pos.Segment, Offset: last.pos.Offset + uint32(recordBytes(len(last.payload)))}
	if next != wantPos {
		t.Fatalf("first append after reopen at %v, want %v (end of the old active segment)", next, wantPos)
	}
	more := appendMany(t, l2, 2000, 20, func(int) int { return 300 })
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	l3, _ := openLog(t, cfg)
	for _, r := range append(recs, more...) {
		checkRead(t, l3, r.pos, r.key, r.payload)
	}
	checkRead(t, l3, next, 1000, []byte("after reopen"))
}

func TestWAL_ReadBadPosition(t *testing.T) {
	l, _ := openLog(t, testConfig(t.TempDir()))
	pos := mustAppend(t, l, 1, []byte("x"))
	for _, bad := range []Pos{
		{},
		{Segment: 2, Offset: segmentHeaderBytes},
		{Segment: 1, Offset: 0},
		{Segment: 1, Offset: segmentHeaderBytes - 1},
		{Segment: 1, Offset: pos.Offset + 17},
		{Segment: 1, Offset: 1 << 31},
	} {
		_, _, err := l.Read(bad)
		wantErr(t, err, ErrBadPosition, "Read("+bad.String()+")")
	}
	if got := (Pos{Segment: 3, Offset: 4096}).String(); got != "seg 3 @ 4096" {
		t.Fatalf("Pos.String = %q", got)
	}
	if !(Pos{}).IsZero() || pos.IsZero() {
		t.Fatal("IsZero wrong")
	}
}

func TestWAL_UnflushedAndSyncOnAppend(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	pos := mustAppend(t, l, 7, []byte("buffered"))
	if st := l.Stats(); st.UnflushedBytes == 0 {
		t.Fatalf("expected buffered bytes, stats %+v", st)
	}
	checkRead(t, l, pos, 7, []byte("buffered"))
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.UnflushedBytes != 0 {
		t.Fatalf("unflushed after Sync: %+v", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.SyncOnAppend = true
	l2, _ := openLog(t, cfg)
	pos2 := mustAppend(t, l2, 8, []byte("synced"))
	info, err := os.Stat(segmentPath(cfg.Dir, pos2.Segment))
	if err != nil {
		t.Fatal(err)
	}
	if st := l2.Stats(); st.UnflushedBytes != 0 || info.Size() != st.TotalBytes {
		t.Fatalf("SyncOnAppend left %d bytes buffered; file %d bytes, stats %+v", st.UnflushedBytes, info.Size(), st)
	}
}

// concurrentIndex is the owner's key -> record map shared with readers.
// Readers hold mu shared across l.Read, so a position they found cannot be
// marked dead and deleted under them.
type concurrentIndex struct {
	l     *Log
	mu    sync.RWMutex
	index map[uint64]record
	done  chan struct{}
	errs  chan error
}

func (c *concurrentIndex) report(err error) {
	select {
	case c.errs <- err:
	default:
	}
}

func (c *concurrentIndex) stopped() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// reader reads the current record of rotating keys.
func (c *concurrentIndex) reader(seed uint64) {
	for i := seed; !c.stopped(); i++ {
		c.mu.RLock()
		if r, ok := c.index[i%64]; ok {
			if k, p, err := c.l.Read(r.pos); err != nil || k != r.key || string(p) != string(r.payload) {
				c.report(fmt.Errorf("Read(%v) key %d: err %v", r.pos, r.key, err))
			}
		}
		c.mu.RUnlock()
	}
}

// snapshotter pins, captures every position, then reads them all while
// the owner keeps deleting and compacting.
func (c *concurrentIndex) snapshotter() {
	for !c.stopped() {
		c.mu.RLock()
		release := c.l.Pin()
		captured := make([]record, 0, len(c.index))
		for _, r := range c.index {
			captured = append(captured, r)
		}
		c.mu.RUnlock()
		for _, r := range captured {
			if k, p, err := c.l.Read(r.pos); err != nil || k != r.key || string(p) != string(r.payload) {
				c.report(fmt.Errorf("pinned Read(%v) key %d: err %v", r.pos, r.key, err))
			}
		}
		release()
		release()
	}
}

func TestWAL_ConcurrentReadDuringAppendAndCompact(t *testing.T) {
	l, _ := openLog(t, testConfig(t.TempDir()))
	c := &concurrentIndex{l: l, index: map[uint64]record{}, done: make(chan struct{}), errs: make(chan error, 8)}
	var wg sync.WaitGroup
	wg.Go(func() { c.reader(0) })
	wg.Go(func() { c.reader(31) })
	wg.Go(c.snapshotter)

	runOwner(t, l, &c.mu, c.index)
	close(c.done)
	wg.Wait()
	close(c.errs)
	for err := range c.errs {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Pins != 0 {
		t.Fatalf("pins left: %+v", st)
	}
}

// runOwner appends, replaces and compacts records in index.
func runOwner(t *testing.T, l *Log, mu *sync.RWMutex, index map[uint64]record) {
	for i := range 1500 {
		key := uint64(i % 64)
		p := payloadFor(uint64(i), 100+i%300)
		pos := mustAppend(t, l, key, p)
		mu.Lock()
		old, had := index[key]
		index[key] = record{key: key, pos: pos, payload: p}
		mu.Unlock()
		if had {
			if err := l.MarkDead(old.pos, len(old.payload)); err != nil {
				t.Fatal(err)
			}
		}
		if i%100 == 99 {
			_, err := l.Compact(func(k uint64, at Pos) bool {
				mu.RLock()
				defer mu.RUnlock()
				return index[k].pos == at
			}, func(k uint64, from, to Pos) {
				mu.Lock()
				r := index[k]
				r.pos = to
				index[k] = r
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
