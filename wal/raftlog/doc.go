// Package raftlog is one node's raft log store: a single group-committed,
// segmented log (package wal's files) that carries the entries of every
// raft group on the node, with a raft.LogStore and raft.StableStore (term
// and vote) per group (GroupLog).
//
// # What the package owns
//
// The segment files and the group registry file in Config.Dir; the
// durable order of every group's entries; one in-memory index per group
// (raft index -> record position); reclamation of segments nothing needs;
// and the positions of entry Data on disk, which an owner may keep using
// (Retain, EntryPos, ReadData) after raft has let the entries go.
//
// # What it must never do
//
//   - Answer a StoreLogs, DeleteRange or Set (term, vote) before what it
//     wrote is durable (unless Config.SyncMode is SyncNone, for tests and
//     benchmarks only).
//   - Skip a record it cannot decode. Damage before the torn tail of the
//     last segment, a gap inside a group's log, or a record of a group id
//     the registry never handed out is ErrCorrupt.
//   - Bring back, after any crash, an entry that a suffix truncation
//     removed (see "No resurrection" below).
//   - Interpret entry Data, know about queues, or hold entry bodies in
//     memory beyond one batch being written.
//   - Fail for good on a full disk: the write fails with ErrDiskFull, is
//     cut back, and the next write succeeds once space returns.
//
// # On-disk format
//
// Segments are package wal's segment files ("0000000001.seg", a 16-byte
// header, then records [length][crc32c][key][payload], CRC over all but
// the checksum). This package uses the record key for a store-wide write
// sequence, assigned in append order and never reused, and fills the
// payload with one of (integers little-endian):
//
//	entry:    [kind=1][group u32][index u64][term u64][type u8]
//	          [appendedAt unix ns i64, 0 = zero time][dataLen u32][extLen u32]
//	          [Data][Extensions]
//	truncate: [kind=2][group u32][keep u64]   entries above keep, written
//	                                          earlier, are gone
//	prefix:   [kind=3][group u32][first u64]  entries below first, written
//	                                          earlier, are gone
//	kept:     like entry, kind=4: an entry raft had already deleted, copied
//	          forward by compaction for a Retention; never part of a log
//	stable:   [kind=5][group u32][keyLen u8][valueLen u16][key][value]
//	          one key of the group's raft.StableStore (term, vote); the
//	          highest write sequence of a key holds its value
//
// An entry's Data starts EntryPos's dataOffset (54) bytes after the start
// of its record. Kinds are an append-only enum.
//
// The registry file "groups" maps group names (printable ASCII, at most
// 128 bytes, e.g. "q/orders/0") to small ids and records the next id; ids
// are never reused. It is a text file with a CRC line, replaced
// atomically on each change (temporary file, fsync, rename, directory
// fsync). A sidecar file rather than registry records in the log, because
// a group's id must outlive every segment that holds its records, and
// because dropping a group is then one atomic rename: a record whose id is
// below the next id but absent from the registry belongs to a dropped
// group and is dead, with no tombstone to keep alive.
//
// # Term and vote
//
// GroupLog is also the group's raft.StableStore: Set writes a stable
// record through the same writer as StoreLogs and returns once it is
// durable, so the votes of many groups share one fdatasync and no group
// needs a file of its own. Values live in memory (at most StableKeysMax
// keys of StableKeyBytesMax bytes, values of StableValueBytesMax bytes per
// group); recovery reads every stable record whole, checksum verified,
// and keeps the newest of each key. A superseded record is dead; the
// newest is live and moved by compaction like an entry. Stable records
// are not counted in the per-segment accounting of markers, which concern
// entries only.
//
// # Group commit
//
// One committer at a time owns all appends. Every StoreLogs, DeleteRange,
// DropGroup and Set call queues a request. If no commit is in progress,
// the caller commits the queue itself (at low load, a lone call then
// costs no hand-off to another goroutine and back, which on a small
// machine is a tenth of a synchronous round's latency and CPU);
// otherwise it wakes the writer goroutine and waits. The committer takes
// every request queued while the last commit ran (at most
// Config.BatchCallsMax calls and Config.BatchBytesMax bytes; a single
// larger call goes alone), validates
// each against the group's extent as the earlier requests of the batch
// leave it, appends all their records, and makes them durable with one
// flush and one fdatasync. Only then does it apply the batch to the
// indexes (under the store's lock, which readers share) and answer every
// caller. Stats reports batches, calls and syncs, so the batching factor
// can be measured (and CallerBatches, how many batches callers
// committed). Between batches the writer goroutine runs one bounded
// compaction step, when a record died or a segment was sealed since a
// step last found nothing to do.
//
// If an append or the sync fails, the committer cuts the log back to where
// the batch began (wal.RollbackTo: later segments deleted, the segment
// truncated and synced) and fails the batch's calls with ErrDiskFull
// (ENOSPC, EDQUOT) or ErrIO; nothing of the batch reached the indexes, so
// disk and memory agree, and the store takes the next write. Only if the
// cut itself fails does the store refuse writes (ErrFailed) until it is
// reopened. A write the disk failed part-way (a short write) leaves part of
// a record in the file; the cut truncates it, so no torn or duplicate
// record survives. In a chaosdisk build, internal/diskfault fails segment
// writes (whole or short) and fsyncs on purpose, to exercise this path.
// FreeBytes lets callers refuse large writes early.
//
// # Recovery
//
// Open lets the wal cut a torn tail off the last segment (reported in the
// RecoverySummary), then scans every record's header (the wal verifies
// whole-record checksums while scanning). For each group, an entry record
// survives unless a truncate or prefix marker with a higher write sequence
// removes it; of survivors with the same index the highest write sequence
// wins; the survivors must form one contiguous range, which becomes the
// index. Deciding by write sequence, not file order, is what lets
// compaction copy records forward. Everything else is marked dead. The
// torn-tail and rebuild code runs on every start.
//
// # No resurrection
//
// DeleteRange(min, max) with max at or beyond LastIndex is a suffix
// truncation: it writes a truncate marker (keep = min-1) and returns once
// the marker is durable; only then are the removed entries dropped from
// the index and marked dead. Recovery honours the marker, so a truncated
// entry cannot come back while the marker is on disk. The marker may be
// reclaimed only once nothing it removes can still be on disk:
//
//  1. Every record the marker removes was written before it (lower write
//     sequence), so it was appended to the marker's segment or an older
//     one. Compaction copies only records still needed at the time of the
//     copy; after the marker is applied the removed entries are dead and
//     never copied, so no copy of one lies beyond the marker's segment m
//     either. (A removed entry kept by a Retention is copied as kind
//     "kept", which recovery never puts in a log.)
//  2. The store counts, per segment, the records of each group, dead or
//     alive, until the segment file is deleted. A marker in segment m is
//     kept (it is live, so compaction copies it forward, keeping its write
//     sequence) as long as some segment older than m holds any record of
//     its group. Once none does, everything the marker could remove was
//     in segment m itself, and goes with it.
//  3. A copied marker sits in a newer segment m' > m; (1) still holds for
//     m', so the same rule applies to it.
//
// Prefix compaction (min at or below FirstIndex) writes a prefix marker
// under the same rule, except that only a group's newest prefix marker is
// kept: it covers what older ones covered. Entries below the first index
// coming back would be harmless (raft ignores entries older than its
// snapshot); the marker keeps the index small. DeleteRange strictly inside
// the log is ErrBadRange. GroupLog implements raft.MonotonicLogStore, so
// raft empties the log after installing a snapshot instead of storing
// entries after a gap; StoreLogs refuses a gap (ErrNotContiguous).
//
// # Reclamation
//
// A record dies when its entry is overwritten, truncated or compacted
// away, when its group is dropped, or when its marker protects nothing
// more; the wal deletes a sealed segment as soon as all of its bytes are
// dead. So that an idle group with a few old entries does not pin old
// segments, the writer compacts: when a sealed segment's live bytes fall
// below Config.CompactLiveRatio, it copies the live records (at most
// Config.CompactBytesMax per step) to the end of the log, syncs, points
// the indexes, markers and retentions at the copies, and marks the
// originals dead.
//
// # Bodies stay where they are
//
// EntryPos(index) gives an entry's record position and the offset of its
// Data in it; ReadData(pos, off, n) preads part of Data, checking the
// range against the entry header but not the record checksum (GetLog
// checks it; recovery checked every record). A Retention (GroupLog.Retain,
// or Store.RetainPos for positions re-registered after a restart with
// Config.HoldDeadAtOpen) keeps a record readable after raft deletes it;
// compaction moves retained records like live ones and calls the holder's
// moved callback (on the writer goroutine, after the copy is durable). The
// last release of a record raft no longer holds lets it die.
//
// # Bounds
//
// Entry Data plus Extensions: Config.EntryBytesMax. One write: one call,
// or Config.BatchBytesMax bytes of calls. Memory: 8 bytes per indexed
// entry (a slice per group over [first, last], reallocated when a prefix
// compaction leaves most of it unused), a few bytes per group per segment
// for accounting, a small list of live markers per group, the stable keys
// of each group (at most StableKeysMax, of StableKeyBytesMax and
// StableValueBytesMax bytes; raft keeps three of under 100 bytes), and
// during Open 32 bytes per entry record on disk until the indexes are
// built, plus one whole read per stable record.
//
// # Concurrency
//
// Every method of Store, GroupLog and Retention may be called from any
// goroutine. Reads (GetLog, FirstIndex, LastIndex, ReadData) share a lock
// with each other and wait only while the writer applies a batch to the
// indexes, never during its fdatasync.
package raftlog
