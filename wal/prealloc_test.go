package wal

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/internal/tmpfs"
)

// preallocSegmentBytes is the segment size of the pre-written segment
// tests: large enough that a zero tail dwarfs the records.
// preallocSegmentBytes is the segment size of tests of rotation at half
// a segment: small enough never to be sealed early (2*earlySealBytes).
const preallocSegmentBytes = 2 * earlySealBytes

// preallocConfig returns a test config with PreallocateSegments on and
// no rate bound that a test's appends could pass.
func preallocConfig(dir string, segmentBytes int64) Config {
	cfg := testConfig(dir)
	cfg.SegmentBytesMax = segmentBytes
	cfg.RecordBytesMax = 4000
	cfg.PreallocateSegments = true
	cfg.PrewriteRateMaxBytesPerSecond = math.MaxInt64
	return cfg
}

// waitTimeout bounds every polled condition in the tests.
const waitTimeout = 10 * time.Second

// fileSize returns the size of path.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// fillPastHalf appends records of 1000 bytes until the active segment is
// at least half full, and returns them.
func fillPastHalf(t *testing.T, l *Log, firstKey uint64) []record {
	t.Helper()
	var recs []record
	for key := firstKey; l.Stats().TotalBytes-int64(segmentHeaderBytes)*int64(l.Stats().Segments) < l.cfg.SegmentBytesMax/2; key++ {
		recs = append(recs, appendMany(t, l, key, 1, func(int) int { return 1000 })...)
	}
	return recs
}

// rotateIntoSpare fills segment 1 past half, waits for the spare, and
// appends until a record lands in segment 2, which must be pre-written.
func rotateIntoSpare(t *testing.T, l *Log) []record {
	t.Helper()
	recs := fillPastHalf(t, l, 1)
	testwait.Until(t, waitTimeout, "the spare to be ready", func() bool { return l.Stats().SpareBytes == l.cfg.SegmentBytesMax })
	for key := uint64(len(recs) + 1); recs[len(recs)-1].pos.Segment == 1; key++ {
		recs = append(recs, appendMany(t, l, key, 1, func(int) int { return 1000 })...)
	}
	if got := fileSize(t, segmentPath(l.cfg.Dir, 2)); got != l.cfg.SegmentBytesMax {
		t.Fatalf("segment 2 is %d bytes, want a pre-written %d", got, l.cfg.SegmentBytesMax)
	}
	return recs
}

func TestWAL_PreallocRotationWithSpare(t *testing.T) {
	cfg := preallocConfig(t.TempDir(), preallocSegmentBytes)
	l, _ := openLog(t, cfg)
	recs := rotateIntoSpare(t, l)
	st := l.Stats()
	if st.ActiveSegment != 2 || st.SpareBytes != cfg.SegmentBytesMax-(segmentHeaderBytes+1016) {
		t.Fatalf("stats after rotation into the spare: %+v", st)
	}
	if got, want := fileSize(t, segmentPath(cfg.Dir, 1)), recs[len(recs)-2].pos.Offset+1016; got != int64(want) {
		t.Fatalf("sealed segment 1 is %d bytes, want it cut to its records (%d)", got, want)
	}
	if fileExists(filepath.Join(cfg.Dir, spareFileName)) {
		t.Fatal("the spare file still exists after rotation used it")
	}
	recs = append(recs, appendMany(t, l, 1000, 20, func(i int) int { return 10 * i })...)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		checkRead(t, l, r.pos, r.key, r.payload)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if got, want := fileSize(t, segmentPath(cfg.Dir, 2)), int64(last.pos.Offset)+recordBytes(len(last.payload)); got != want {
		t.Fatalf("segment 2 is %d bytes after Close, want its zeros cut to %d", got, want)
	}
	l2, sum := openLog(t, cfg)
	if sum.Truncated || sum.Records != len(recs) {
		t.Fatalf("reopen after a clean Close: %v", sum)
	}
	checkRecovered(t, l2, recs)
}

func TestWAL_PreallocRotationWithoutSpare(t *testing.T) {
	cfg := preallocConfig(t.TempDir(), 64<<10)
	l, _ := openLog(t, cfg)
	// A file in the spare's place makes preparing the spare fail.
	if err := os.WriteFile(filepath.Join(cfg.Dir, spareFileName), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	recs := fillPastHalf(t, l, 1)
	testwait.Until(t, waitTimeout, "the spare to fail", func() bool { return l.Stats().SpareFailures > 0 })
	recs = append(recs, appendMany(t, l, 500, 60, func(int) int { return 1000 })...)
	if st := l.Stats(); st.ActiveSegment < 2 || st.SpareBytes != 0 {
		t.Fatalf("stats: %+v", st)
	}
	if got := fileSize(t, segmentPath(cfg.Dir, 2)); got >= cfg.SegmentBytesMax {
		t.Fatalf("segment 2 is %d bytes: it should have been created empty", got)
	}
	for _, r := range recs {
		checkRead(t, l, r.pos, r.key, r.payload)
	}
}

// crashImage returns the segment files of a log whose segment 2 is
// pre-written and holds some synced records, as a crash would leave them,
// and the records of segment 2.
func crashImage(t *testing.T) (files map[uint32][]byte, all, inSpare []record) {
	t.Helper()
	cfg := preallocConfig(t.TempDir(), preallocSegmentBytes)
	l, _ := openLog(t, cfg)
	all = rotateIntoSpare(t, l)
	all = append(all, appendMany(t, l, 5000, 9, func(i int) int { return 50 + 37*i })...)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	files = readSegments(t, cfg.Dir)
	for _, r := range all {
		if r.pos.Segment == 2 {
			inSpare = append(inSpare, r)
		}
	}
	return files, all, inSpare
}

func TestWAL_PreallocRecoveryOfPrewrittenActiveSegment(t *testing.T) {
	files, all, inSpare := crashImage(t)
	sealed := all[:len(all)-len(inSpare)]
	base := t.TempDir()
	seg2 := files[2]
	if int64(len(seg2)) != preallocSegmentBytes {
		t.Fatalf("segment 2 image is %d bytes", len(seg2))
	}
	// A crash after each record: the records, then zeros.
	for k := range inSpare {
		end := int64(inSpare[k].pos.Offset) + recordBytes(len(inSpare[k].payload))
		img := bytes.Clone(seg2)
		clear(img[end:])
		dir := filepath.Join(base, fmt.Sprintf("after%d", k))
		writeSegments(t, dir, map[uint32][]byte{1: files[1], 2: img})
		l, sum := openLog(t, preallocConfig(dir, preallocSegmentBytes))
		if !sum.Truncated || sum.TruncatedAtOffset != end || sum.TruncatedBytes != preallocSegmentBytes-end ||
			sum.TruncatedReason != zeroTailReason || sum.Records != len(sealed)+k+1 {
			t.Fatalf("crash after record %d: %v", k, sum)
		}
		checkRecovered(t, l, all[:len(sealed)+k+1])
	}
}

func TestWAL_PreallocTornRecordThenZeros(t *testing.T) {
	files, all, inSpare := crashImage(t)
	last := inSpare[len(inSpare)-1]
	base := t.TempDir()
	// The last record written only in part: its first n bytes, then zeros.
	for _, n := range []int64{1, 8, 15, 16, 17, 40} {
		img := bytes.Clone(files[2])
		clear(img[int64(last.pos.Offset)+n:])
		dir := filepath.Join(base, fmt.Sprintf("torn%d", n))
		writeSegments(t, dir, map[uint32][]byte{1: files[1], 2: img})
		l, sum := openLog(t, preallocConfig(dir, preallocSegmentBytes))
		if !sum.Truncated || sum.TruncatedAtOffset != int64(last.pos.Offset) || sum.Records != len(all)-1 {
			t.Fatalf("record torn after %d bytes: %v", n, sum)
		}
		checkRecovered(t, l, all[:len(all)-1])
	}
}

func TestWAL_PreallocDamageBeforeValidRecordThenZerosIsCorrupt(t *testing.T) {
	files, _, inSpare := crashImage(t)
	victim := inSpare[3]
	for name, patch := range map[string]func([]byte){
		"payload":    func(b []byte) { b[victim.pos.Offset+recordHeaderBytes+3] ^= 0x10 },
		"zeroed-rec": func(b []byte) { clear(b[victim.pos.Offset : victim.pos.Offset+20]) },
		"huge-len":   func(b []byte) { b[victim.pos.Offset+3] = 0xFF },
	} {
		t.Run(name, func(t *testing.T) {
			img := bytes.Clone(files[2])
			patch(img)
			dir := t.TempDir()
			writeSegments(t, dir, map[uint32][]byte{1: files[1], 2: img})
			l, _, err := Open(preallocConfig(dir, preallocSegmentBytes))
			if err == nil {
				_ = l.Close()
				t.Fatal("Open succeeded, want ErrCorrupt")
			}
			wantErr(t, err, ErrCorrupt, "Open")
			if want := fmt.Sprintf("segment 2 offset %d:", victim.pos.Offset); !strings.Contains(err.Error(), want) {
				t.Fatalf("Open error %q does not name %q", err, want)
			}
		})
	}
}

func TestWAL_PreallocZeroTailCostsNoSearchBudget(t *testing.T) {
	// Zeros after a torn record must not exhaust the search: findValidRecord
	// over the same bytes agrees, and the zero-tail variant finds records
	// that run into the zeros.
	data := []byte{1}
	if p, ex := findValidRecordZeroTail(data, 60<<20, 60<<20, 1); p != -1 || ex {
		t.Fatalf("zero tail search: %d %v", p, ex)
	}
	payload := make([]byte, 300)
	payload[0] = 9
	rec := encodeRecord(nil, 42, payload)
	trimmed := append([]byte{1, 2, 3}, rec[:recordHeaderBytes+1]...)
	zeros := int64(len(rec)-recordHeaderBytes-1) + 1000
	if p, ex := findValidRecordZeroTail(trimmed, zeros, 4000, tailSearchBudgetBytes); p != 3 || ex {
		t.Fatalf("record running into the zeros: found at %d (exhausted %v), want 3", p, ex)
	}
	full := append(bytes.Clone(trimmed), make([]byte, zeros)...)
	if p, _ := findValidRecord(full, 4000, tailSearchBudgetBytes); p != 3 {
		t.Fatalf("findValidRecord disagrees: %d", p)
	}
	if p, _ := findValidRecord(make([]byte, 64), 4000, tailSearchBudgetBytes); p != -1 {
		t.Fatal("an all-zero record header passed its checksum")
	}
}

func TestWAL_PreallocStaleSpareRemovedAtOpen(t *testing.T) {
	cfg := preallocConfig(t.TempDir(), preallocSegmentBytes)
	l, _ := openLog(t, cfg)
	recs := appendMany(t, l, 1, 5, func(int) int { return 100 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(cfg.Dir, spareFileName)
	if err := os.WriteFile(stale, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	l2, sum := openLog(t, cfg)
	if fileExists(stale) || sum.Truncated || sum.Segments != 1 {
		t.Fatalf("stale spare left or recovery disturbed: exists %v, %v", fileExists(stale), sum)
	}
	checkRecovered(t, l2, recs)
}

func TestWAL_PreallocCloseInterruptsFill(t *testing.T) {
	cfg := preallocConfig(t.TempDir(), SegmentBytesLimit)
	l, _ := openLog(t, cfg)
	recs := appendMany(t, l, 1, 5, func(int) int { return 100 })
	// Start a 1 GiB fill now rather than after 512 MiB of records.
	l.mu.Lock()
	l.spare.preparing = true
	l.spare.stop, l.spare.done = make(chan struct{}), make(chan struct{})
	go l.prepareSpare(l.spare.stop, l.spare.done)
	l.mu.Unlock()
	spare := filepath.Join(cfg.Dir, spareFileName)
	testwait.Until(t, waitTimeout, "the fill to start", func() bool {
		info, err := os.Stat(spare)
		return err == nil && info.Size() >= spareFillChunkBytes
	})
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %v while the spare was filling", took)
	}
	if fileExists(spare) {
		t.Fatal("Close left the partial spare behind")
	}
	l2, sum := openLog(t, cfg)
	if sum.Truncated || sum.Records != len(recs) {
		t.Fatalf("reopen after Close during the fill: %v", sum)
	}
	checkRecovered(t, l2, recs)
}

func TestWAL_PreallocDiskFullNeverFailsAppends(t *testing.T) {
	dir := tmpfs.Mount(t, "6m")
	cfg := preallocConfig(dir, 4<<20)
	l, _ := openLog(t, cfg)
	recs := fillPastHalf(t, l, 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, waitTimeout, "the spare to fail for want of space", func() bool { return l.Stats().SpareFailures > 0 })
	if fileExists(filepath.Join(dir, spareFileName)) {
		t.Fatal("the failed spare was left behind")
	}
	// The space the failed spare took is back: appends go on, through a
	// rotation.
	for key := uint64(len(recs) + 1); recs[len(recs)-1].pos.Segment == 1; key++ {
		recs = append(recs, appendMany(t, l, key, 1, func(int) int { return 1000 })...)
	}
	if err := l.Sync(); err != nil {
		t.Fatalf("Sync after a failed spare: %v", err)
	}
	for _, r := range recs {
		checkRead(t, l, r.pos, r.key, r.payload)
	}
}

func TestWAL_PreallocSealsUnwrittenSegmentEarly(t *testing.T) {
	cfg := preallocConfig(t.TempDir(), 16<<20)
	l, _ := openLog(t, cfg)
	var recs []record
	for key := uint64(1); l.Stats().TotalBytes < earlySealBytes; key++ {
		recs = append(recs, appendMany(t, l, key, 1, func(int) int { return 3000 })...)
	}
	testwait.Until(t, waitTimeout, "the spare to be ready", func() bool { return l.Stats().SpareBytes == cfg.SegmentBytesMax })
	recs = append(recs, appendMany(t, l, 100000, 3, func(int) int { return 100 })...)
	if got := recs[len(recs)-3].pos.Segment; got != 2 {
		t.Fatalf("the append after the spare was ready went to segment %d, want 2", got)
	}
	if got := fileSize(t, segmentPath(cfg.Dir, 2)); got != cfg.SegmentBytesMax {
		t.Fatalf("segment 2 is %d bytes, want a pre-written %d", got, cfg.SegmentBytesMax)
	}
	if got := fileSize(t, segmentPath(cfg.Dir, 1)); got >= cfg.SegmentBytesMax/2 {
		t.Fatalf("segment 1 is %d bytes: it should have been sealed early", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, sum := openLog(t, cfg)
	if sum.Truncated || sum.Records != len(recs) {
		t.Fatalf("reopen: %v", sum)
	}
	checkRecovered(t, l2, recs)
}

// TestWAL_PreallocSkipsFastSegments: a segment appended to faster than
// PrewriteRateMaxBytesPerSecond gets no spare, is counted in
// SparesSkipped, and rotation makes an ordinary segment; the next segment
// is judged again.
func TestWAL_PreallocSkipsFastSegments(t *testing.T) {
	cfg := preallocConfig(t.TempDir(), preallocSegmentBytes)
	cfg.PrewriteRateMaxBytesPerSecond = 1 // every append rate is too high
	l, _ := openLog(t, cfg)
	fillPastHalf(t, l, 1)
	st := l.Stats()
	if st.SparesSkipped != 1 || st.SpareBytes != 0 || fileExists(filepath.Join(cfg.Dir, spareFileName)) {
		t.Fatalf("a fast segment should get no spare: %+v", st)
	}
	var recs []record
	for key := uint64(10_000); len(recs) == 0 || recs[len(recs)-1].pos.Segment < 2; key++ {
		recs = append(recs, appendMany(t, l, key, 1, func(int) int { return 1000 })...)
	}
	if st := l.Stats(); st.ActivePrewritten || st.SpareBytes != 0 {
		t.Fatalf("segment 2 should be an ordinary segment: %+v", st)
	}
	if got := fileSize(t, segmentPath(cfg.Dir, 2)); got >= cfg.SegmentBytesMax {
		t.Fatalf("segment 2 is %d bytes: pre-written", got)
	}
	for key := uint64(20_000); l.Stats().SparesSkipped < 2; key++ {
		if l.Stats().ActiveSegment > 2 {
			t.Fatalf("segment 2 was never judged: %+v", l.Stats())
		}
		appendMany(t, l, key, 1, func(int) int { return 1000 })
	}
}

// TestWAL_PreallocRateIsMeasuredSinceActivation checks the rate judgement
// against a fixed clock: bytes written since the segment became active
// over the time since then.
func TestWAL_PreallocRateIsMeasuredSinceActivation(t *testing.T) {
	cfg := preallocConfig(t.TempDir(), preallocSegmentBytes)
	cfg.PrewriteRateMaxBytesPerSecond = 1 << 20
	l, _ := openLog(t, cfg)
	l.mu.Lock()
	defer l.mu.Unlock()
	t0 := time.Unix(1000, 0)
	l.active.activeSince, l.active.activeBaseBytes = t0, 4096
	l.active.sizeBytes = 4096 + 1<<20 // 1 MiB since activation
	cases := []struct {
		after time.Duration
		high  bool
	}{
		{0, true},
		{500 * time.Millisecond, true},
		{1100 * time.Millisecond, false},
		{time.Minute, false},
	}
	for _, c := range cases {
		if got := l.activeRateTooHighLocked(t0.Add(c.after)); got != c.high {
			t.Errorf("1 MiB in %v: too high = %v, want %v", c.after, got, c.high)
		}
	}
	l.active.sizeBytes = 4096 // nothing written yet
	if l.activeRateTooHighLocked(t0) {
		t.Error("no bytes written should never be too fast")
	}
}

// TestWAL_PreallocPauseStops: the pause between fill chunks ends at once
// when the fill is stopped.
func TestWAL_PreallocPauseStops(t *testing.T) {
	stop := make(chan struct{})
	close(stop)
	start := time.Now()
	if pauseFill(time.Hour, stop) {
		t.Fatal("a stopped pause should report false")
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a stopped pause took %v", took)
	}
	if !pauseFill(time.Millisecond, make(chan struct{})) {
		t.Fatal("an unstopped pause should report true")
	}
}
