package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testConfig returns a config in dir with small segments and batches, so
// that rotation, reclamation and compaction are cheap to reach, and a
// silent logger.
func testConfig(dir string) Config {
	cfg := DefaultConfig(dir)
	cfg.SegmentBytesMax = 16 << 10
	cfg.EntryBytesMax = 8 << 10
	cfg.BatchBytesMax = 16 << 10
	cfg.CompactBytesMax = 16 << 10
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

// openStore opens cfg, failing the test on error; the store is closed at
// the end of the test.
func openStore(t testing.TB, cfg Config) (*Store, RecoverySummary) {
	t.Helper()
	s, sum, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", cfg.Dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, sum
}

// mustClose closes s, failing the test on error.
func mustClose(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// mustGroup returns the named group of s.
func mustGroup(t testing.TB, s *Store, name string) *GroupLog {
	t.Helper()
	g, err := s.Group(name)
	if err != nil {
		t.Fatalf("Group(%q): %v", name, err)
	}
	return g
}

// entry builds a deterministic entry: its Data depends on index, term and
// size; every third entry carries Extensions.
func entry(index, term uint64, size int) *raft.Log {
	r := rand.New(rand.NewPCG(index, term))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	l := &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: data,
		AppendedAt: time.Unix(1700000000, int64(index)*1000)}
	if index%3 == 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d-%d", index, term))
	}
	return l
}

// entries builds entries lo..hi of term.
func entries(lo, hi, term uint64, size int) []*raft.Log {
	var out []*raft.Log
	for i := lo; i <= hi; i++ {
		out = append(out, entry(i, term, size))
	}
	return out
}

// mustStore stores logs in g.
func mustStore(t testing.TB, g *GroupLog, logs []*raft.Log) {
	t.Helper()
	if err := g.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs(%q, %d..): %v", g.Name(), logs[0].Index, err)
	}
}

// mustDelete deletes min..max from g.
func mustDelete(t testing.TB, g *GroupLog, min, max uint64) {
	t.Helper()
	if err := g.DeleteRange(min, max); err != nil {
		t.Fatalf("DeleteRange(%q, %d, %d): %v", g.Name(), min, max, err)
	}
}

// sameLog reports how got differs from want, or "".
func sameLog(got, want *raft.Log) string {
	switch {
	case got.Index != want.Index || got.Term != want.Term || got.Type != want.Type:
		return fmt.Sprintf("index/term/type %d/%d/%d, want %d/%d/%d", got.Index, got.Term, got.Type, want.Index, want.Term, want.Type)
	case !bytes.Equal(got.Data, want.Data):
		return fmt.Sprintf("data of %d bytes differs from the %d bytes stored", len(got.Data), len(want.Data))
	case !bytes.Equal(got.Extensions, want.Extensions):
		return fmt.Sprintf("extensions %q, want %q", got.Extensions, want.Extensions)
	case !got.AppendedAt.Equal(want.AppendedAt):
		return fmt.Sprintf("appended at %v, want %v", got.AppendedAt, want.AppendedAt)
	}
	return ""
}

// checkGroup verifies that g holds exactly want (consecutive entries; an
// empty want means an empty log).
func checkGroup(t testing.TB, g *GroupLog, want []*raft.Log) {
	t.Helper()
	first, err1 := g.FirstIndex()
	last, err2 := g.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("group %q: %v", g.Name(), err)
	}
	var wantFirst, wantLast uint64
	if len(want) > 0 {
		wantFirst, wantLast = want[0].Index, want[len(want)-1].Index
	}
	if first != wantFirst || last != wantLast {
		t.Fatalf("group %q holds %d..%d, want %d..%d", g.Name(), first, last, wantFirst, wantLast)
	}
	for _, w := range want {
		var got raft.Log
		if err := g.GetLog(w.Index, &got); err != nil {
			t.Fatalf("group %q GetLog(%d): %v", g.Name(), w.Index, err)
		}
		if d := sameLog(&got, w); d != "" {
			t.Fatalf("group %q entry %d: %s", g.Name(), w.Index, d)
		}
	}
	var l raft.Log
	for _, idx := range []uint64{wantFirst - 1, wantLast + 1} {
		if idx == 0 {
			continue
		}
		if err := g.GetLog(idx, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("group %q GetLog(%d) outside the log: %v, want ErrLogNotFound", g.Name(), idx, err)
		}
	}
}

// waitTimeout bounds every polled condition in the tests.
const waitTimeout = 10 * time.Second
