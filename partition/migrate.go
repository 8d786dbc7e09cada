package partition

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// migrateChunk is how many entries one StoreLogs of the migration carries.
const migrateChunk = 64

// migrateLogs moves the raft entries an older version kept in the
// replica's raft.db (beside term and vote) into the group's log, once: it
// runs only while the group's log is empty, copies every entry in order,
// and deletes them from raft.db only after the copy is durable. A crash in
// between leaves the entries in both, and the next start, finding the
// group's log no longer empty, deletes them from raft.db.
func migrateLogs(old raft.LogStore, to raft.LogStore) error {
	first, err := old.FirstIndex()
	if err != nil {
		return err
	}
	last, err := old.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	have, err := to.LastIndex()
	if err != nil {
		return err
	}
	if have == 0 {
		if err := copyLogs(old, to, first, last); err != nil {
			return err
		}
	}
	return old.DeleteRange(first, last)
}

func copyLogs(old, to raft.LogStore, first, last uint64) error {
	batch := make([]*raft.Log, 0, migrateChunk)
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err := old.GetLog(i, l); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		batch = append(batch, l)
		if len(batch) == migrateChunk || i == last {
			if err := to.StoreLogs(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}
