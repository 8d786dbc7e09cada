package wal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writtenLog appends records to a fresh log in dir and closes it.
func writtenLog(t *testing.T, dir string, n int, sizeOf func(i int) int) []record {
	t.Helper()
	l, _ := openLog(t, testConfig(dir))
	recs := appendMany(t, l, 1, n, sizeOf)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// readSegments returns the contents of every segment file in dir.
func readSegments(t *testing.T, dir string) map[uint32][]byte {
	t.Helper()
	files := map[uint32][]byte{}
	for _, num := range segmentNumbers(t, dir) {
		b, err := os.ReadFile(segmentPath(dir, num))
		if err != nil {
			t.Fatal(err)
		}
		files[num] = b
	}
	return files
}

// writeSegments writes files into dir, creating it.
func writeSegments(t *testing.T, dir string, files map[uint32][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for num, b := range files {
		if err := os.WriteFile(segmentPath(dir, num), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// patchFile applies fn to the contents of path.
func patchFile(t *testing.T, path string, fn func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fn(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantCorrupt opens dir and expects ErrCorrupt naming segment and offset.
func wantCorrupt(t *testing.T, dir string, num uint32, offset int64) {
	t.Helper()
	l, _, err := Open(testConfig(dir))
	if err == nil {
		_ = l.Close()
		t.Fatalf("Open succeeded, want ErrCorrupt at segment %d offset %d", num, offset)
	}
	wantErr(t, err, ErrCorrupt, "Open")
	if want := fmt.Sprintf("segment %d offset %d:", num, offset); !strings.Contains(err.Error(), want) {
		t.Fatalf("Open error %q does not name %q", err, want)
	}
}

// checkRecovered verifies the records and that the log takes appends.
func checkRecovered(t *testing.T, l *Log, recs []record) {
	t.Helper()
	for _, r := range recs {
		checkRead(t, l, r.pos, r.key, r.payload)
	}
	pos := mustAppend(t, l, 777, []byte("after recovery"))
	checkRead(t, l, pos, 777, []byte("after recovery"))
}

func TestWAL_CrashAtEveryOffsetOfLastRecord(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	recs := writtenLog(t, src, 30, func(i int) int { return 150 + i })
	files := readSegments(t, src)
	last := recs[len(recs)-1]
	if last.pos.Segment < 2 {
		t.Fatalf("want the last record past the first segment, got %v", last.pos)
	}
	start := int64(last.pos.Offset)
	end := start + recordBytes(len(last.payload))
	if got := int64(len(files[last.pos.Segment])); got != end {
		t.Fatalf("last segment is %d bytes, want %d", got, end)
	}
	for cut := start; cut < end; cut++ {
		dir := filepath.Join(base, fmt.Sprint(cut))
		torn := map[uint32][]byte{}
		for num, b := range files {
			torn[num] = b
		}
		torn[last.pos.Segment] = files[last.pos.Segment][:cut]
		writeSegments(t, dir, torn)

		l, sum := openLog(t, testConfig(dir))
		if sum.Records != len(recs)-1 {
			t.Fatalf("cut %d: recovered %d records, want %d", cut, sum.Records, len(recs)-1)
		}
		wantTruncated := cut > start // a cut exactly at a record boundary leaves nothing torn
		if sum.Truncated != wantTruncated {
			t.Fatalf("cut %d: summary %v, want Truncated=%v", cut, sum, wantTruncated)
		}
		if wantTruncated && (sum.TruncatedSegment != last.pos.Segment || sum.TruncatedAtOffset != start || sum.TruncatedBytes != cut-start) {
			t.Fatalf("cut %d: summary %v, want segment %d offset %d, %d bytes", cut, sum, last.pos.Segment, start, cut-start)
		}
		checkRecovered(t, l, recs[:len(recs)-1])
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWAL_TornSegmentHeader(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	recs := writtenLog(t, src, 5, func(int) int { return 100 })
	files := readSegments(t, src)
	hdr := encodeSegmentHeader(2)
	files[2] = hdr[:]
	lengths := []int{0, 1, 8, 15, smallSegmentBytes}
	for _, n := range lengths {
		dir := filepath.Join(base, fmt.Sprint(n))
		torn := map[uint32][]byte{1: files[1], 2: files[2][:min(n, segmentHeaderBytes)]}
		if n > segmentHeaderBytes {
			torn[2] = make([]byte, n) // size extended, data never written
		}
		writeSegments(t, dir, torn)
		l, sum := openLog(t, testConfig(dir))
		if !sum.Truncated || sum.TruncatedSegment != 2 || sum.TruncatedBytes != int64(n) || sum.Records != len(recs) {
			t.Fatalf("header torn at %d: summary %v", n, sum)
		}
		checkRecovered(t, l, recs)
		if pos := mustAppend(t, l, 1, nil); pos.Segment != 2 {
			t.Fatalf("append went to %v, want segment 2", pos)
		}
	}

	// A full-length header that is wrong and not all zeros is corruption.
	dir := filepath.Join(base, "badmagic")
	bad := append([]byte("XXXXWAL!"), files[2][8:]...)
	writeSegments(t, dir, map[uint32][]byte{1: files[1], 2: bad})
	wantCorrupt(t, dir, 2, 0)
}

func TestWAL_GarbageAfterLastRecordIsTruncated(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	recs := writtenLog(t, src, 12, func(i int) int { return 20 * i })
	files := readSegments(t, src)
	last := recs[len(recs)-1].pos.Segment
	rng := rand.New(rand.NewPCG(1, 2))
	cases := map[string][]byte{}
	for _, n := range []int{1, 15, 16, 17, 100, 1000, 3000} {
		random := make([]byte, n)
		for i := range random {
			random[i] = byte(rng.Uint32())
		}
		cases[fmt.Sprintf("random%d", n)] = random
		cases[fmt.Sprintf("zeros%d", n)] = make([]byte, n)
	}
	cases["ones"] = bytes.Repeat([]byte{0xFF}, 64)
	for name, garbage := range cases {
		dir := filepath.Join(base, name)
		dirty := map[uint32][]byte{}
		for num, b := range files {
			dirty[num] = b
		}
		dirty[last] = append(append([]byte(nil), files[last]...), garbage...)
		writeSegments(t, dir, dirty)
		l, sum := openLog(t, testConfig(dir))
		if !sum.Truncated || sum.TruncatedAtOffset != int64(len(files[last])) || sum.TruncatedBytes != int64(len(garbage)) {
			t.Fatalf("%s: summary %v, want %d bytes cut at %d", name, sum, len(garbage), len(files[last]))
		}
		if !strings.Contains(sum.String(), "torn tail cut from segment") {
			t.Fatalf("%s: summary string %q", name, sum)
		}
		checkRecovered(t, l, recs)
	}
}

func TestWAL_CorruptSealedSegment(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	recs := writtenLog(t, src, 20, func(int) int { return 300 })
	files := readSegments(t, src)
	victim := recs[1]
	if victim.pos.Segment != 1 || len(files) < 2 {
		t.Fatalf("setup: victim at %v, %d segments", victim.pos, len(files))
	}
	cases := []struct {
		name   string
		offset int64
		patch  func([]byte) []byte
	}{
		{"payload", int64(victim.pos.Offset), func(b []byte) []byte { b[victim.pos.Offset+recordHeaderBytes+5] ^= 1; return b }},
		{"length", int64(victim.pos.Offset), func(b []byte) []byte { b[victim.pos.Offset] ^= 4; return b }},
		{"key", int64(victim.pos.Offset), func(b []byte) []byte { b[victim.pos.Offset+9] ^= 0x80; return b }},
		{"magic", 0, func(b []byte) []byte { b[0] = 'X'; return b }},
		{"tail", int64(recs[len(recs)-1].pos.Offset), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(base, c.name)
			writeSegments(t, dir, files)
			num := uint32(1)
			if c.patch != nil {
				patchFile(t, segmentPath(dir, 1), c.patch)
			} else {
				// A sealed segment that lost its tail is corrupt, not torn.
				lastSealed := segmentNumbers(t, dir)[len(files)-2]
				patchFile(t, segmentPath(dir, lastSealed), func(b []byte) []byte { return b[:len(b)-10] })
				num = lastSealed
				c.offset = lastRecordOffset(recs, lastSealed)
			}
			wantCorrupt(t, dir, num, c.offset)
		})
	}
}

// lastRecordOffset is the offset of the last record in segment num.
func lastRecordOffset(recs []record, num uint32) int64 {
	var off int64
	for _, r := range recs {
		if r.pos.Segment == num {
			off = int64(r.pos.Offset)
		}
	}
	return off
}

func TestWAL_CorruptActiveSegmentFollowedByValidRecords(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	recs := writtenLog(t, src, 10, func(i int) int { return 50 + i })
	files := readSegments(t, src)
	victim := recs[2]
	patches := map[string]func([]byte) []byte{
		"payload":    func(b []byte) []byte { b[victim.pos.Offset+recordHeaderBytes+3] ^= 0x10; return b },
		"checksum":   func(b []byte) []byte { b[victim.pos.Offset+4] ^= 0x01; return b },
		"huge-len":   func(b []byte) []byte { b[victim.pos.Offset+3] = 0xFF; return b },
		"short-len":  func(b []byte) []byte { b[victim.pos.Offset]--; return b },
		"zeroed-rec": func(b []byte) []byte { clear(b[victim.pos.Offset : victim.pos.Offset+20]); return b },
	}
	for name, patch := range patches {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(base, name)
			writeSegments(t, dir, files)
			patchFile(t, segmentPath(dir, 1), patch)
			wantCorrupt(t, dir, 1, int64(victim.pos.Offset))
		})
	}

	// Damage to the last record alone is indistinguishable from a torn
	// write, and is truncated.
	dir := filepath.Join(base, "last")
	writeSegments(t, dir, files)
	lastRec := recs[len(recs)-1]
	patchFile(t, segmentPath(dir, 1), func(b []byte) []byte { b[lastRec.pos.Offset+recordHeaderBytes] ^= 1; return b })
	l, sum := openLog(t, testConfig(dir))
	if !sum.Truncated || sum.TruncatedAtOffset != int64(lastRec.pos.Offset) || sum.Records != len(recs)-1 {
		t.Fatalf("summary %v", sum)
	}
	checkRecovered(t, l, recs[:len(recs)-1])
}

func TestWAL_CorruptionDetectedOnRead(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	recs := appendMany(t, l, 1, 5, func(int) int { return 64 })
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(segmentPath(cfg.Dir, 1), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xAB}, int64(recs[2].pos.Offset)+recordHeaderBytes+10); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err = l.Read(recs[2].pos)
	wantErr(t, err, ErrCorrupt, "Read of damaged record")
	if want := fmt.Sprintf("segment 1 offset %d", recs[2].pos.Offset); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
	checkRead(t, l, recs[3].pos, recs[3].key, recs[3].payload)
	// A position in the middle of a record parses as garbage.
	_, _, err = l.Read(Pos{Segment: 1, Offset: recs[1].pos.Offset + 4})
	wantErr(t, err, ErrCorrupt, "Read of a position inside a record")
}
