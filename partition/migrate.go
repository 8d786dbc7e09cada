package partition

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// migrateChunk is how many entries one StoreLogs of the migration carries.
const migrateChunk = 64

// boltFile is the file in which older versions kept a replica's term and
// vote (and before that its log).
const boltFile = "raft.db"

// raft's stable keys (unexported in raft): the current term, and the term
// and candidate of the last vote.
var (
	keyCurrentTerm  = []byte("CurrentTerm")
	keyLastVoteTerm = []byte("LastVoteTerm")
	keyLastVoteCand = []byte("LastVoteCand")
)

// migrateBolt moves what an older version kept in the replica's raft.db
// (entries, term and vote) into the group's log and stable store, then
// deletes raft.db, so that it is read once and never opened again. A crash
// part-way repeats the move on the next start: each step copies only
// while its destination is empty, and raft.db goes only after both copies
// are durable. The deletion itself needs no directory sync: a raft.db that
// a crash brings back holds no entries any more, and its term and vote
// are not copied over the shared store's, so the next start only deletes
// it again.
func migrateBolt(dir string, logs raft.LogStore, stable raft.StableStore) error {
	path := filepath.Join(dir, boltFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{NoFreelistSync: true, Timeout: time.Second},
	})
	if err != nil {
		return fmt.Errorf("open %s: %w", boltFile, err)
	}
	err = migrateLogs(bolt, logs)
	if err == nil {
		err = migrateStable(bolt, stable)
	}
	if cerr := bolt.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Remove(path)
}

// migrateStable copies term and vote from old into to, unless to already
// holds a term (an earlier start copied them: raft.db was not yet
// deleted). The term goes last, so a copy cut short is made again whole.
func migrateStable(old, to raft.StableStore) error {
	if _, err := to.GetUint64(keyCurrentTerm); err == nil {
		return nil
	} else if !isNotFound(err) {
		return err
	}
	for _, key := range [][]byte{keyLastVoteTerm, keyLastVoteCand, keyCurrentTerm} {
		if err := copyStableKey(old, to, key); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// copyStableKey copies one key, if old holds it. Terms are copied as
// numbers: each store has its own encoding of a uint64.
func copyStableKey(old, to raft.StableStore, key []byte) error {
	if bytes.Equal(key, keyLastVoteCand) {
		val, err := old.Get(key)
		if err != nil {
			return ignoreNotFound(err)
		}
		return to.Set(key, val)
	}
	n, err := old.GetUint64(key)
	if err != nil {
		return ignoreNotFound(err)
	}
	return to.SetUint64(key, n)
}

// ignoreNotFound returns err unless it is a missing key.
func ignoreNotFound(err error) error {
	if isNotFound(err) {
		return nil
	}
	return err
}

// isNotFound reports whether err is a stable store's missing key, which
// raft (and raft-boltdb) tell by its text.
func isNotFound(err error) bool {
	return err != nil && err.Error() == "not found"
}

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
