package raftlog

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hashicorp/raft"
)

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		_ = in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// segmentFiles lists the segment files of dir, oldest first.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	return paths
}

func TestRaftlog_CrashAtEveryOffsetOfLastRecord(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	a, b := mustGroup(t, s, "a"), mustGroup(t, s, "b")
	mustStore(t, a, entries(1, 6, 1, 40))
	mustStore(t, b, entries(1, 3, 1, 40))
	mustDelete(t, a, 5, 6)
	last := entry(5, 2, 70) // the last record: a's new entry 5
	mustStore(t, a, []*raft.Log{last})
	pos, dataOff, ok := a.EntryPos(5)
	if !ok {
		t.Fatal("EntryPos(5) not found")
	}
	recEnd := int64(pos.Offset) + int64(dataOff) + int64(len(last.Data)+len(last.Extensions))
	mustClose(t, s)
	segs := segmentFiles(t, cfg.Dir)
	tail := filepath.Base(segs[len(segs)-1])
	if fi, err := os.Stat(segs[len(segs)-1]); err != nil || fi.Size() != recEnd {
		t.Fatalf("last segment is %v bytes, expected the record to end it at %d (%v)", fi.Size(), recEnd, err)
	}

	for cut := int64(pos.Offset); cut < recEnd; cut++ {
		dir := copyDir(t, cfg.Dir)
		if err := os.Truncate(filepath.Join(dir, tail), cut); err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Dir = dir
		s2, sum, err := Open(c)
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		if wantTorn := cut > int64(pos.Offset); sum.TornTail != wantTorn {
			t.Fatalf("cut at %d: torn tail reported %v, want %v (%s)", cut, sum.TornTail, wantTorn, sum)
		}
		// The truncation of 5..6 is durable; the new 5 is gone.
		checkGroup(t, mustGroup(t, s2, "a"), entries(1, 4, 1, 40))
		checkGroup(t, mustGroup(t, s2, "b"), entries(1, 3, 1, 40))
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRaftlog_CorruptSealedSegmentIsErrCorrupt(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "g")
	for i := uint64(1); i <= 60; i += 10 {
		mustStore(t, g, entries(i, i+9, 1, 500))
	}
	mustClose(t, s)
	segs := segmentFiles(t, cfg.Dir)
	if len(segs) < 2 {
		t.Fatalf("want a sealed segment, have %d segments", len(segs))
	}
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xFF, 0xEE}, 200); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if _, _, err := Open(cfg); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a damaged sealed segment: %v, want ErrCorrupt", err)
	}
}

func TestRaftlog_CorruptRegistryIsErrCorrupt(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	mustGroup(t, s, "g")
	mustClose(t, s)
	path := filepath.Join(cfg.Dir, registryFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(registryMagic)+8] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(cfg); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a damaged registry: %v, want ErrCorrupt", err)
	}
}

func TestRaftlog_RecordOfUnknownGroupIsErrCorrupt(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	mustStore(t, mustGroup(t, s, "g"), entries(1, 2, 1, 10))
	mustClose(t, s)
	// A registry that never handed out the id the records carry.
	if err := os.WriteFile(filepath.Join(cfg.Dir, registryFileName), (&registry{nextID: 1, ids: map[string]uint32{}}).encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(cfg); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
}
