package partition

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wal/raftlog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Entries an older version kept in raft.db move into the group's log once,
// in order, and leave raft.db.
func TestPartition_MigrateLogsMovesBoltEntriesOnce(t *testing.T) {
	dir := t.TempDir()
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	var logs []*raft.Log
	for i := uint64(5); i <= 140; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: fmt.Appendf(nil, "e%d", i)})
	}
	if err := bolt.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	g := openTestGroup(t, filepath.Join(dir, "log"), "q-0")
	if err := migrateLogs(bolt, g); err != nil {
		t.Fatal(err)
	}
	first, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	if first != 5 || last != 140 {
		t.Fatalf("migrated range %d..%d, want 5..140", first, last)
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := g.GetLog(i, &l); err != nil || string(l.Data) != fmt.Sprintf("e%d", i) || l.Term != 2 {
			t.Fatalf("entry %d: %v %+v", i, err, l)
		}
	}
	if n, _ := bolt.LastIndex(); n != 0 {
		t.Fatalf("raft.db still holds entries up to %d", n)
	}
	if err := migrateLogs(bolt, g); err != nil { // nothing left: a no-op
		t.Fatal(err)
	}
}

// writeOldBolt writes a raft.db as an older version left it: term and
// vote, and entries (the first holding the configuration peers).
func writeOldBolt(t *testing.T, dir string, term uint64, cand string, peers []raft.Server) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(dir, boltFile))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	for _, kv := range []struct {
		key []byte
		val uint64
	}{{keyCurrentTerm, term}, {keyLastVoteTerm, term}} {
		if err := bolt.SetUint64(kv.key, kv.val); err != nil {
			t.Fatal(err)
		}
	}
	if err := bolt.Set(keyLastVoteCand, []byte(cand)); err != nil {
		t.Fatal(err)
	}
	if peers != nil {
		conf := raft.EncodeConfiguration(raft.Configuration{Servers: peers})
		if err := bolt.StoreLogs([]*raft.Log{{Index: 1, Term: term, Type: raft.LogConfiguration, Data: conf}}); err != nil {
			t.Fatal(err)
		}
	}
}

// Term and vote an older version kept in raft.db move into the shared
// store once; raft.db is then deleted. A start that finds both (a crash
// after the copy) keeps the shared store's values and deletes raft.db.
func TestPartition_MigrateBoltMovesTermAndVoteOnce(t *testing.T) {
	dir := t.TempDir()
	writeOldBolt(t, dir, 7, "n2", nil)
	g := openTestGroup(t, filepath.Join(dir, "log"), "q-0")
	if err := migrateBolt(dir, g, g); err != nil {
		t.Fatal(err)
	}
	for _, key := range [][]byte{keyCurrentTerm, keyLastVoteTerm} {
		if v, err := g.GetUint64(key); err != nil || v != 7 {
			t.Fatalf("%s after the move: %d, %v; want 7", key, v, err)
		}
	}
	if v, err := g.Get(keyLastVoteCand); err != nil || string(v) != "n2" {
		t.Fatalf("vote after the move: %q, %v", v, err)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFile)); !os.IsNotExist(err) {
		t.Fatalf("raft.db still there after the move: %v", err)
	}
	if err := migrateBolt(dir, g, g); err != nil { // nothing to move: a no-op
		t.Fatal(err)
	}
	// raft went on to term 9 in the shared store; a raft.db left behind by
	// a crash before its deletion must not bring term 7 back.
	if err := g.SetUint64(keyCurrentTerm, 9); err != nil {
		t.Fatal(err)
	}
	writeOldBolt(t, dir, 7, "n3", nil)
	if err := migrateBolt(dir, g, g); err != nil {
		t.Fatal(err)
	}
	if v, _ := g.GetUint64(keyCurrentTerm); v != 9 {
		t.Fatalf("term %d after a repeated move, want 9 (the shared store's)", v)
	}
	if v, _ := g.Get(keyLastVoteCand); string(v) != "n2" {
		t.Fatalf("vote %q after a repeated move, want n2", v)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFile)); !os.IsNotExist(err) {
		t.Fatalf("raft.db still there after the repeated move: %v", err)
	}
}

// A replica upgraded from a version that kept term and vote in raft.db
// starts with that term (its next election is in a later one, never in a
// term it already used) and never opens raft.db again.
func TestPartition_UpgradedReplicaKeepsItsTerm(t *testing.T) {
	const oldTerm = 7
	upgraded := false
	c := newTestCluster(t, 1, func(cfg *Config) {
		if !upgraded {
			upgraded = true
			writeOldBolt(t, cfg.Dir, oldTerm, cfg.NodeID, cfg.Peers)
		}
	})
	c.leader()
	term := func() uint64 {
		n, err := strconv.ParseUint(c.reps[0].RaftStats()["term"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := term(); got <= oldTerm {
		t.Fatalf("leader in term %d, want a term after the %d kept in raft.db", got, oldTerm)
	}
	send(t, c.reps[0], "a", 2)
	if _, err := os.Stat(filepath.Join(c.dirs[0], boltFile)); !os.IsNotExist(err) {
		t.Fatalf("raft.db still there: %v", err)
	}
	before := term()
	c.stop(0)
	c.start(0)
	c.leader()
	if got := term(); got <= before {
		t.Fatalf("term %d after a restart, want above %d", got, before)
	}
	if _, err := os.Stat(filepath.Join(c.dirs[0], boltFile)); !os.IsNotExist(err) {
		t.Fatalf("raft.db came back after a restart: %v", err)
	}
	testwait.Until(t, 10*time.Second, "both messages back after the restart", func() bool {
		return c.reps[0].Stats().Ready == 2
	})
}

// openTestGroup opens group name in a store of its own in dir, closed at
// the end of the test.
func openTestGroup(t *testing.T, dir, name string) *raftlog.GroupLog {
	t.Helper()
	store, _, err := raftlog.Open(raftlog.DefaultConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	g, err := store.Group(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
