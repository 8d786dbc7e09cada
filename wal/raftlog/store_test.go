package raftlog

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

func TestRaftlog_EmptyGroup(t *testing.T) {
	s, _ := openStore(t, testConfig(t.TempDir()))
	g := mustGroup(t, s, "q/orders/0")
	checkGroup(t, g, nil)
	var l raft.Log
	if err := g.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty: %v", err)
	}
	if err := g.DeleteRange(1, 10); err != nil {
		t.Fatalf("DeleteRange on empty: %v", err)
	}
	if g2 := mustGroup(t, s, "q/orders/0"); g2 != g {
		t.Fatal("Group returned a second handle for the same name")
	}
}

func TestRaftlog_StoreGetDeleteReopen(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "g")
	if err := g.StoreLog(entry(1, 1, 10)); err != nil {
		t.Fatal(err)
	}
	mustStore(t, g, entries(2, 10, 1, 100))
	want := append([]*raft.Log{entry(1, 1, 10)}, entries(2, 10, 1, 100)...)
	checkGroup(t, g, want)

	mustDelete(t, g, 1, 3) // prefix
	checkGroup(t, g, want[3:])
	mustDelete(t, g, 8, 20) // suffix
	checkGroup(t, g, want[3:7])
	mustStore(t, g, entries(8, 9, 2, 50))
	want = append(want[3:7], entries(8, 9, 2, 50)...)
	checkGroup(t, g, want)

	mustClose(t, s)
	s2, sum := openStore(t, cfg)
	if sum.TornTail || sum.Groups != 1 || sum.Entries != len(want) {
		t.Fatalf("reopen summary: %s", sum)
	}
	checkGroup(t, mustGroup(t, s2, "g"), want)
}

func TestRaftlog_OverwriteInPlace(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "g")
	mustStore(t, g, entries(1, 5, 1, 20))
	mustStore(t, g, entries(3, 4, 2, 30))
	want := append(append(entries(1, 2, 1, 20), entries(3, 4, 2, 30)...), entry(5, 1, 20))
	checkGroup(t, g, want)
	mustClose(t, s)
	s2, _ := openStore(t, cfg)
	checkGroup(t, mustGroup(t, s2, "g"), want)
}

func TestRaftlog_DeleteEverythingThenRestartElsewhere(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "g")
	mustStore(t, g, entries(1, 20, 1, 20))
	mustDelete(t, g, 1, 10)
	mustDelete(t, g, 11, 20)
	checkGroup(t, g, nil)
	mustStore(t, g, entries(100, 105, 3, 20))
	checkGroup(t, g, entries(100, 105, 3, 20))
	mustClose(t, s)
	s2, _ := openStore(t, cfg)
	checkGroup(t, mustGroup(t, s2, "g"), entries(100, 105, 3, 20))
}

func TestRaftlog_RefusedCallsChangeNothing(t *testing.T) {
	s, _ := openStore(t, testConfig(t.TempDir()))
	g := mustGroup(t, s, "g")
	mustStore(t, g, entries(5, 10, 1, 10))
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"gap after last", g.StoreLogs(entries(12, 13, 1, 10)), ErrNotContiguous},
		{"below first", g.StoreLogs(entries(3, 4, 1, 10)), ErrNotContiguous},
		{"not consecutive", g.StoreLogs([]*raft.Log{entry(11, 1, 1), entry(13, 1, 1)}), ErrNotContiguous},
		{"index zero", g.StoreLog(entry(0, 1, 1)), ErrNotContiguous},
		{"too large", g.StoreLogs([]*raft.Log{entry(11, 1, 1), entry(12, 1, s.cfg.EntryBytesMax+1)}), ErrEntryTooLarge},
		{"hole in the middle", g.DeleteRange(7, 8), ErrBadRange},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
	}
	checkGroup(t, g, entries(5, 10, 1, 10))
}

func TestRaftlog_GroupNamesAndDrop(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s, _ := openStore(t, cfg)
	for _, bad := range []string{"", strings.Repeat("x", GroupNameBytesMax+1), "tab\there", "é"} {
		if _, err := s.Group(bad); !errors.Is(err, ErrBadGroupName) {
			t.Errorf("Group(%q): %v, want ErrBadGroupName", bad, err)
		}
	}
	a := mustGroup(t, s, "q/a/0")
	b := mustGroup(t, s, "q/b 1/"+strings.Repeat("z", 100))
	mustStore(t, a, entries(1, 50, 1, 200))
	mustStore(t, b, entries(1, 3, 1, 10))
	if err := s.DropGroup("q/a/0"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LastIndex(); !errors.Is(err, ErrGroupDropped) {
		t.Fatalf("dropped group LastIndex: %v", err)
	}
	if err := a.StoreLog(entry(51, 1, 1)); !errors.Is(err, ErrGroupDropped) {
		t.Fatalf("dropped group StoreLog: %v", err)
	}
	a2 := mustGroup(t, s, "q/a/0")
	checkGroup(t, a2, nil)
	mustStore(t, a2, entries(7, 8, 2, 10))
	mustClose(t, s)

	s2, sum := openStore(t, cfg)
	if sum.Groups != 2 {
		t.Fatalf("groups after reopen: %s", sum)
	}
	checkGroup(t, mustGroup(t, s2, "q/a/0"), entries(7, 8, 2, 10))
	checkGroup(t, mustGroup(t, s2, "q/b 1/"+strings.Repeat("z", 100)), entries(1, 3, 1, 10))
}

func TestRaftlog_ConfigValidateNamesField(t *testing.T) {
	cases := map[string]func(*Config){
		"Dir":                           func(c *Config) { c.Dir = "" },
		"SegmentBytesMax":               func(c *Config) { c.SegmentBytesMax = 10 },
		"EntryBytesMax":                 func(c *Config) { c.EntryBytesMax = int(c.SegmentBytesMax) },
		"BatchBytesMax":                 func(c *Config) { c.BatchBytesMax = 1 },
		"BatchCallsMax":                 func(c *Config) { c.BatchCallsMax = BatchCallsLimit + 1 },
		"CompactLiveRatio":              func(c *Config) { c.CompactLiveRatio = 1.5 },
		"CompactBytesMax":               func(c *Config) { c.CompactBytesMax = -1 },
		"GroupsMax":                     func(c *Config) { c.GroupsMax = -2 },
		"SyncMode":                      func(c *Config) { c.SyncMode = 7 },
		"PrewriteRateMaxBytesPerSecond": func(c *Config) { c.PrewriteRateMaxBytesPerSecond = -1 },
	}
	for field, mutate := range cases {
		cfg := DefaultConfig(t.TempDir())
		mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Config."+field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	if err := DefaultConfig("x").Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
}
