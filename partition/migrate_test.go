package partition

import (
	"fmt"
	"path/filepath"
	"testing"

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
	store, _, err := raftlog.Open(raftlog.DefaultConfig(filepath.Join(dir, "log")))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	g, err := store.Group("q-0")
	if err != nil {
		t.Fatal(err)
	}
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
