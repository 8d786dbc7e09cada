package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"github.com/ferrymq/ferry/wal"
	"golang.org/x/sys/unix"
)

// Store is one node's raft log store: a single segmented log holding the
// entries of every group, written one batch at a time (by the first caller
// to find no commit in progress, or by the writer goroutine) so that the
// calls of all groups are group-committed. See the package documentation.
type Store struct {
	cfg    Config
	logger *slog.Logger
	log    *wal.Log

	// regSave serializes writes of the registry file (taken before
	// regMu); regMu guards the registry and the batch being gathered.
	// Groups created while a save runs share the next one (register.go).
	regSave    sync.Mutex
	regMu      sync.Mutex
	reg        *registry
	regNext    *regBatch
	regWaiting map[string]*regBatch // names being registered, by batch

	// The writer's queue. Callers append under qmu and wake the writer.
	qmu     sync.Mutex
	queue   []*request
	qclosed bool
	wake    chan struct{}
	closing chan struct{}
	done    chan struct{}

	// mu guards the in-memory state below. The writer takes it exclusively
	// to apply a durable batch; readers share it for a lookup plus pread.
	mu        sync.RWMutex
	closed    bool
	failed    error // a failed write could not be cut back
	groups    map[string]*GroupLog
	byID      map[uint32]*GroupLog
	segs      map[uint32]map[uint32]int32 // segment -> group id -> entry and marker records, dead or live
	retained  map[wal.Pos]*retainedRec
	holding   bool      // HoldDeadAtOpen until ReleaseDeadFromOpen
	heldDead  []wal.Pos // records found dead while holding
	nextRet   uint64
	noCompact map[uint32]bool // segments whose accounting found nothing to move
	// reapedAt is the log's SegmentsDeleted when reapLocked last ran to
	// the end; it starts at a value the count never takes, so the first
	// reap (at recovery) always runs.
	reapedAt uint64

	// commitMu is held by whoever commits a batch or runs a compaction
	// step: the writer goroutine, or a caller committing the queue itself
	// (commitQueued). It guards the committer-only fields below.
	commitMu sync.Mutex
	nextSeq  uint64
	scratch  []byte
	// compactSeen is what deadMarks and the active segment were when a
	// compaction step last found nothing to do; compaction is looked at
	// again only once either has moved.
	compactSeen compactState
	// deadMarks counts records marked dead (markDeadLocked): the only
	// way, with a segment being sealed, that a segment can become a
	// compaction candidate.
	deadMarks atomic.Uint64

	st counters
}

// counters are the monotonically increasing parts of Stats.
type counters struct {
	entriesAppended, entryBytesAppended       atomic.Uint64
	registrySaves                             atomic.Uint64
	batches, callsCommitted, syncs, bytesSync atomic.Uint64
	callerBatches                             atomic.Uint64
	segmentsDeleted                           atomic.Uint64
	recordsCompacted, bytesCompacted          atomic.Uint64
	writeErrors                               atomic.Uint64
	maxBatchCalls                             atomic.Int64
}

// Open opens or creates the store in cfg.Dir and recovers it: a torn tail
// is cut (and reported in the summary), every group's index is rebuilt,
// and records nothing needs any more are marked for reclamation.
func Open(cfg Config) (*Store, RecoverySummary, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, RecoverySummary{}, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, RecoverySummary{}, fmt.Errorf("raftlog: create directory %s: %w", cfg.Dir, err)
	}
	reg, err := loadRegistry(cfg.Dir)
	if err != nil {
		return nil, RecoverySummary{}, err
	}
	l, wsum, err := wal.Open(cfg.walConfig())
	if err != nil {
		if errors.Is(err, wal.ErrCorrupt) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return nil, RecoverySummary{WAL: wsum}, err
	}
	s := &Store{
		cfg: cfg, logger: cfg.Logger, log: l, reg: reg,
		wake:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		done:       make(chan struct{}),
		groups:     make(map[string]*GroupLog),
		byID:       make(map[uint32]*GroupLog),
		regWaiting: make(map[string]*regBatch),
		segs:       make(map[uint32]map[uint32]int32),
		retained:   make(map[wal.Pos]*retainedRec),
		holding:    cfg.HoldDeadAtOpen,
		noCompact:  make(map[uint32]bool),
		nextSeq:    1,
		reapedAt:   math.MaxUint64,
	}
	for name, id := range reg.ids {
		g := &GroupLog{s: s, name: name, id: id}
		s.groups[name], s.byID[id] = g, g
	}
	sum, err := s.recover()
	sum.WAL, sum.TornTail = wsum, wsum.Truncated
	if err != nil {
		_ = l.Close()
		return nil, sum, err
	}
	s.logger.Info("raftlog: opened", "dir", cfg.Dir, "summary", sum.String())
	go s.run()
	return s, sum, nil
}

// Close stops the writer after it has answered every queued call, and
// closes the files. Calls after Close return ErrClosed. Retentions end.
func (s *Store) Close() error {
	s.qmu.Lock()
	if s.qclosed {
		s.qmu.Unlock()
		<-s.done
		return nil
	}
	s.qclosed = true
	s.qmu.Unlock()
	close(s.closing)
	<-s.done
	s.mu.Lock()
	s.closed = true
	clear(s.retained)
	s.mu.Unlock()
	return s.log.Close()
}

// Group returns the log of the named group, creating the group (and
// recording its id durably) on first use. Names are 1..GroupNameBytesMax
// bytes of printable ASCII.
func (s *Store) Group(name string) (*GroupLog, error) {
	if err := checkGroupName(name); err != nil {
		return nil, err
	}
	s.mu.RLock()
	g, closed := s.groups[name], s.closed
	s.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if g != nil {
		return g, nil
	}
	return s.register(name)
}

// DropGroup forgets the named group for good: its GroupLog handles answer
// ErrGroupDropped, and its records become reclaimable (retained ones once
// released). The name may be used again later for a new, empty group.
// Dropping an unknown group is a no-op.
func (s *Store) DropGroup(name string) error {
	s.mu.RLock()
	g, closed := s.groups[name], s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if g == nil {
		return nil
	}
	return s.submit(&request{kind: reqDrop, g: g})
}

// Groups lists the names of the groups that exist.
func (s *Store) Groups() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.groups))
	for name := range s.groups {
		names = append(names, name)
	}
	return names
}

// FreeBytes returns the bytes available to this process on the file
// system holding Config.Dir, so callers can refuse large writes early.
func (s *Store) FreeBytes() (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(s.cfg.Dir, &st); err != nil {
		return 0, fmt.Errorf("raftlog: statfs %s: %w", s.cfg.Dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Stats is a point-in-time view of a Store. Counters count since Open.
type Stats struct {
	// Groups is the number of groups.
	Groups int
	// IndexEntries is the number of entries held by all group indexes;
	// the indexes take 8 bytes per entry.
	IndexEntries int
	// EntriesAppended and EntryBytesAppended (Data plus Extensions) count
	// entries made durable by StoreLogs.
	EntriesAppended, EntryBytesAppended uint64
	// Batches counts group-commit writes; CallsCommitted the StoreLogs,
	// DeleteRange and DropGroup calls they answered. CallsCommitted /
	// Batches is the average batching factor; MaxBatchCalls the largest.
	// CallerBatches counts the batches a caller committed itself, the
	// writer being idle (the rest were the writer goroutine's).
	Batches, CallsCommitted uint64
	CallerBatches           uint64
	MaxBatchCalls           int
	// Syncs counts fdatasync calls for batches and compaction steps;
	// BytesSynced the record bytes they made durable.
	Syncs, BytesSynced uint64
	// RegistrySaves counts writes of the group registry file: groups
	// created at once share one.
	RegistrySaves uint64
	// SegmentsLive is the number of segment files; SegmentsDeleted counts
	// those deleted since Open.
	SegmentsLive    int
	SegmentsDeleted uint64
	// DiskBytes is the size of all segment files, SpareBytes included.
	DiskBytes int64
	// SpareBytes is disk written ahead of records by PreallocateSegments:
	// the spare segment file and the zeros after the active segment's end.
	SpareBytes int64
	// LiveBytes is the record bytes not yet reclaimable.
	LiveBytes int64
	// RecordsCompacted and BytesCompacted count records copied forward.
	RecordsCompacted, BytesCompacted uint64
	// Retained is the number of records kept by Retentions.
	Retained int
	// WriteErrors counts batches that failed and were cut back.
	WriteErrors uint64
}

// Stats returns current sizes and counters.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	st := Stats{Groups: len(s.groups), Retained: len(s.retained)}
	for _, g := range s.groups {
		st.IndexEntries += len(g.pos)
	}
	s.mu.RUnlock()
	ws := s.log.Stats()
	st.SegmentsLive, st.LiveBytes = ws.Segments, ws.LiveBytes
	st.DiskBytes, st.SpareBytes = ws.TotalBytes+ws.SpareBytes, ws.SpareBytes
	st.EntriesAppended = s.st.entriesAppended.Load()
	st.EntryBytesAppended = s.st.entryBytesAppended.Load()
	st.Batches = s.st.batches.Load()
	st.CallsCommitted = s.st.callsCommitted.Load()
	st.CallerBatches = s.st.callerBatches.Load()
	st.MaxBatchCalls = int(s.st.maxBatchCalls.Load())
	st.Syncs = s.st.syncs.Load()
	st.BytesSynced = s.st.bytesSync.Load()
	st.SegmentsDeleted = s.st.segmentsDeleted.Load()
	st.RecordsCompacted = s.st.recordsCompacted.Load()
	st.BytesCompacted = s.st.bytesCompacted.Load()
	st.WriteErrors = s.st.writeErrors.Load()
	st.RegistrySaves = s.st.registrySaves.Load()
	return st
}

// ReadData reads n bytes of the Data of the entry record at pos, starting
// off bytes into Data: the position comes from EntryPos or a Retention.
// The range is checked against the entry's header; the record checksum is
// not verified (that would read the whole record): GetLog verifies it, and
// recovery verified every record at Open. n is at most
// Config.EntryBytesMax.
func (s *Store) ReadData(pos wal.Pos, off, n int) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.readDataLocked(pos, off, n)
}

// readDataLocked is ReadData with mu held.
func (s *Store) readDataLocked(pos wal.Pos, off, n int) ([]byte, error) {
	if off < 0 || n < 0 || n > s.cfg.EntryBytesMax {
		return nil, fmt.Errorf("%w: range of %d bytes at %d", ErrBadPosition, n, off)
	}
	var hb [entryHeaderBytes]byte
	buf := make([]byte, n)
	// The entry header and the range come in one read when they are close
	// (a body in a small entry), in two otherwise.
	if err := s.log.ReadHeadAndRange(pos, hb[:], int64(entryDataOffset+off), buf); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPosition, err)
	}
	if !isEntryKind(hb[0]) {
		return nil, fmt.Errorf("%w: %v holds a record of kind %d, not an entry", ErrBadPosition, pos, hb[0])
	}
	dataLen := binary.LittleEndian.Uint32(hb[30:34])
	if int64(off)+int64(n) > int64(dataLen) {
		return nil, fmt.Errorf("%w: range [%d,%d) outside the %d-byte Data at %v", ErrBadPosition, off, off+n, dataLen, pos)
	}
	return buf, nil
}

// checkOpenLocked returns ErrClosed after Close.
func (s *Store) checkOpenLocked() error {
	if s.closed {
		return ErrClosed
	}
	return nil
}
