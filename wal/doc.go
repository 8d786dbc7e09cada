// Package wal is an append-only, segmented log of opaque records. It keeps
// message bodies out of RAM: the owner appends a record, keeps the returned
// Pos in memory, reads the record back when it needs the bytes, and marks it
// dead when it no longer does.
//
// # What the package owns
//
// The segment files in Config.Dir, their format, crash recovery of those
// files, and space reclamation: deleting sealed segments that are entirely
// dead and compacting sealed segments that are mostly dead. A record is a
// uint64 key chosen by the owner plus an opaque payload; the package never
// interprets either.
//
// It also owns the descriptors of those files, and bounds them. A segment
// file is opened when an operation needs it (a read of flushed bytes, a
// flush of the write buffer, a sync, recovery), not at Open, and
// appending into the write buffer needs none. Logs given the same
// FileCache (Config.Files) share its bound: at most Capacity segment
// files (DefaultFileCacheCapacity, 64, unless configured) are open at
// once across all of them; opening one more first closes the least
// recently used file no operation is using, and waits if every open file
// is in use. The cache's sweep, on one timer per cache armed only while
// it has something to close, writes and syncs the buffer of a Log that
// appended nothing for IdleTimeout (DefaultFileIdleTimeout, 10 s) and
// closes files unused for as long, so an idle Log holds no descriptor,
// no buffered record, and no goroutine or timer of its own. Without
// Config.Files a Log's files, once opened, stay open until the segment
// is deleted or the Log closed. A spare segment being filled
// (Config.PreallocateSegments) holds one descriptor outside the bound
// until it is ready; a ready spare waits closed.
//
// # What it must never do
//
//   - Know about queues, messages, Raft or networks. It stores bytes.
//   - Fsync on every Append by default. The owner's durability comes from the
//     Raft log and the log is rebuilt from Raft on start, so Append only
//     buffers; Sync (or Config.SyncOnAppend) makes data durable on request.
//   - Silently skip corruption. A record that fails its checksum or framing
//     anywhere other than the torn tail of the active segment is reported
//     as ErrCorrupt naming the segment and offset.
//
// # On-disk format
//
// Segment files are named by their number, zero-padded to ten digits so
// that every uint32 fits: "0000000001.seg". Numbers start at 1 and increase
// by one on every rotation; they are never reused while the directory
// exists, except that RollbackTo deletes the segments created after its
// Mark, whose numbers the next rotations take again. Segment numbers
// therefore always follow the order in which the surviving records were
// written.
// All integers are little-endian.
//
// A segment starts with a 16-byte header:
//
//	[magic "FERRYWAL" 8 bytes][format version uint32 = 1][segment number uint32]
//
// followed by records, back to back:
//
//	[payload length uint32][crc32c uint32][key uint64][payload]
//
// The checksum is CRC-32C (Castagnoli) over the length field, the key and
// the payload, in that order (every byte of the record except the checksum
// itself). Zero-length payloads are allowed. A Pos is the segment number
// and the byte offset of the record's first byte within the file.
//
// A record never spans segments. When appending a record would take the
// active segment past Config.SegmentBytesMax, the active segment is flushed,
// fsynced and sealed, and a new one is created. The fsync at rotation (one
// per segment, not per record) makes every sealed segment whole after any
// crash, which is what lets recovery treat damage in a sealed segment as
// corruption rather than as a torn write.
//
// # Recovery
//
// Open scans every segment. Sealed segments must parse completely. In the
// last (active) segment a damaged record is a torn tail, and is truncated
// away and reported in the RecoverySummary, only if no valid record can be
// found anywhere after its start; otherwise it is ErrCorrupt. (That search
// reads the rest of the segment into memory and gives up, reporting
// ErrCorrupt, if ruling out valid records would take checksumming more than
// a fixed budget of bytes; it never truncates on a guess.) A last
// segment that is shorter than its header, or whose bytes are all zero, was
// torn while being created and gets a fresh header.
//
// With Config.PreallocateSegments a segment may be pre-written: its file
// was filled with zeros to SegmentBytesMax before rotation renamed it into
// place, and records overwrite those zeros. After a crash such an active
// segment ends in zeros. Recovery locates the last non-zero byte with
// bounded reads from the file end: a damaged record followed only by zeros
// is a torn tail and is cut off; the search for valid records after damage
// reads only up to the last non-zero byte, counting the zeros after it
// without reading them. An active segment that was not pre-written is
// sealed early, once it holds 256 KiB and a spare is ready.
// Sealed segments are cut to their last record before
// the next segment appears, and Close cuts the active one.
//
// Records are written with positional writes at the Log's own idea of
// each segment's size, never at the file's offset, so a file the
// FileCache closed and the Log opens again is written on at the segment's
// end. Closing a file loses nothing: buffered records live in the Log,
// not in the file, and a file written since its last fsync is fsynced
// before the cache closes it (a failure of that fsync fails the owner's
// next sync, as any failed sync does). A file named
// "spare.seg.tmp" is a spare being prepared and is deleted by Open.
//
// After Open every recovered record counts as live: dead-byte accounting is
// held in memory only, so the owner marks records dead again (Scan lists
// them) or resets the directory with Remove and appends afresh.
//
// # Concurrency
//
// Append, MarkDead, MarkDeadAt, Compact, Sync, SyncData, End, RollbackTo
// and Close are meant to be called by one owner goroutine. Read, ReadRange,
// Scan, ScanPrefix, ScanSegmentPrefix, Segments, Stats, Pin and the release
// functions Pin returns may be called from any goroutine at the same time.
//
// Locks are taken in one order: a Log's mutex, then its FileCache's. The
// cache takes no Log's mutex while holding its own (it opens, fsyncs and
// closes files with its mutex released, and its sweep calls into idle
// Logs holding no cache lock), and no operation holds two segment files
// at once, so an operation waiting for a file in a full cache always
// gets one once another operation's read, write or sync ends.
//
// # Durable use
//
// An owner that keeps durable data in the log (rather than rebuilding it)
// appends a batch, calls SyncData (flush plus fdatasync, without blocking
// readers during the device flush), and on any write or sync error calls
// RollbackTo with the End it took before the batch: the partial batch is
// cut off, the cut is made durable, and the log takes writes again, which
// is how a full disk becomes a retryable error rather than a failed log.
// A write the disk failed part-way (a short write) leaves bytes in the file
// beyond the log's end; RollbackTo truncates the file there, so no torn or
// duplicate record survives. In a chaosdisk build, internal/diskfault can
// fail segment writes (whole or short) and fsyncs on purpose.
package wal
