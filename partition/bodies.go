package partition

import (
	"fmt"
	"math"
	"sync"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wal"
	"github.com/ferrymq/ferry/wal/raftlog"
)

// replicaBodies is a replica's fsm.EntryBodyStore: where its messages'
// payloads live. A payload normally stays where it arrived, inside its send
// entry in the node's raft log (a Loc with A = the raft index, B the offset
// in the entry's data, C the length): the body is written once per
// replica. Payloads that arrived in a snapshot install, or were moved out
// of old entries so that the log can be reclaimed, are body records in the
// replica's own wal (a Loc with A = 0, as fsm.WALBodyStore writes it).
//
// The raft log keeps an entry while any live message, a running snapshot
// (a Pin) or the newest local snapshot (its adopted pin) refers to it:
// floor is the lowest such index, and flooredLog never lets raft's
// compaction delete from there on. Entry references are counted per raft
// index.
type replicaBodies struct {
	records fsm.WALBodyStore
	logs    *raftlog.GroupLog
	store   *raftlog.Store

	mu      sync.Mutex
	refs    map[uint64]int32  // raft index -> live references
	pins    map[uint64]uint64 // pin id -> floor when pinned
	nextPin uint64
	// retained collects the body records a local snapshot refers to, and
	// those appended, while it is restored at start; finishRestore marks
	// every other record dead.
	retained map[wal.Pos]struct{}
	// snapPin holds what the newest local snapshot refers to (its entries
	// and body records) until a newer one replaces it.
	snapPin func()
}

var (
	_ fsm.EntryBodyStore = (*replicaBodies)(nil)
	_ fsm.Retainer       = (*replicaBodies)(nil)
	_ fsm.BatchReader    = (*replicaBodies)(nil)
)

func newReplicaBodies(records *wal.Log, logs *raftlog.GroupLog, store *raftlog.Store) *replicaBodies {
	return &replicaBodies{
		records: fsm.WALBodyStore{Log: records}, logs: logs, store: store,
		refs: map[uint64]int32{}, pins: map[uint64]uint64{}, retained: map[wal.Pos]struct{}{},
	}
}

// Append writes a body record (a payload that is in no local entry).
//
// A failed append (a full disk) is cut back, so that the body records take
// the next append once space returns instead of failing for good. But the
// append runs while raft applies a command, and the FSM treats its failure
// as fatal (it panics rather than let the replica diverge): the cut only
// keeps the files clean for the restart. Only a send entry in the old
// encoding appends during apply (a redrive appends nothing), and sends are
// refused below the disk reserve so that a full disk does not get here; an I/O error is not
// recovered from in place, and the chaos suite injects none here.
func (b *replicaBodies) Append(key uint64, payload []byte) (fsm.Loc, error) {
	mark := b.records.End()
	loc, err := b.records.Append(key, payload)
	if err != nil {
		if rerr := b.records.RollbackTo(mark); rerr != nil {
			return fsm.Loc{}, fmt.Errorf("%w (and cutting it back failed: %w)", err, rerr)
		}
		return fsm.Loc{}, err
	}
	b.mu.Lock()
	if b.retained != nil {
		b.retained[wal.Pos{Segment: loc.B, Offset: loc.C}] = struct{}{}
	}
	b.mu.Unlock()
	return loc, nil
}

// Ref refers to a payload where its entry holds it.
func (b *replicaBodies) Ref(index uint64, off, n int, key uint64) (fsm.Loc, error) {
	if index == 0 || off < 0 || n < 0 || off > math.MaxUint32 || n > math.MaxUint32 {
		return fsm.Loc{}, fmt.Errorf("partition bodies: bad reference index %d off %d n %d", index, off, n)
	}
	b.mu.Lock()
	b.refs[index]++
	b.mu.Unlock()
	return fsm.Loc{A: index, B: uint32(off), C: uint32(n)}, nil
}

// Retain counts a reference restored from a local snapshot and returns the
// key the payload is held under: seq for an entry reference (entries are
// never reported to compaction by key), the record's own key for a body
// record (an older seq when the body was redriven to seq).
func (b *replicaBodies) Retain(seq uint64, loc fsm.Loc) (uint64, error) {
	if loc.A != 0 {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, _, ok := b.logs.EntryPos(loc.A); !ok {
			return 0, fmt.Errorf("partition bodies: restored %v names raft entry %d, which the log no longer holds", loc, loc.A)
		}
		b.refs[loc.A]++
		return seq, nil
	}
	key, err := b.records.Retain(seq, loc)
	if err != nil {
		return 0, fmt.Errorf("partition bodies: restored %v: %w", loc, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retained == nil {
		return 0, fmt.Errorf("partition bodies: %v restored after start-up", loc)
	}
	b.retained[wal.Pos{Segment: loc.B, Offset: loc.C}] = struct{}{}
	return key, nil
}

// finishRestore marks dead every body record that no restored message
// refers to: records are durable across restarts (a local snapshot names
// them), so after a restore the ones it does not name are garbage.
//
// It runs once, at start-up: after it, Retain of a body record is refused
// (a local snapshot is restored only at start-up).
func (b *replicaBodies) finishRestore() error {
	b.mu.Lock()
	retained := b.retained
	b.retained = nil
	b.mu.Unlock()
	if retained == nil {
		return nil
	}
	type rec struct {
		pos wal.Pos
		n   int
	}
	var dead []rec
	err := b.records.Scan(func(_ uint64, pos wal.Pos, n int) error {
		if _, ok := retained[pos]; !ok {
			dead = append(dead, rec{pos, n})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range dead {
		if err := b.records.Log.MarkDead(r.pos, r.n); err != nil {
			return err
		}
	}
	return nil
}

// Read returns a payload from its entry or its body record.
func (b *replicaBodies) Read(loc fsm.Loc) (uint64, []byte, error) {
	if loc.A == 0 {
		return b.records.Read(loc)
	}
	pos, _, ok := b.logs.EntryPos(loc.A)
	if !ok {
		return 0, nil, fmt.Errorf("partition bodies: raft entry %d of %v is gone", loc.A, loc)
	}
	payload, err := b.store.ReadData(pos, int(loc.B), int(loc.C))
	return 0, payload, err
}

// Bounds of the spans ReadBatch reads at once: at most spanBytesMax, and
// at most twice the payload bytes asked of it plus spanSlackBytes (so a
// span never reads mostly bytes nobody asked for).
const (
	spanBytesMax   = 1 << 20
	spanSlackBytes = 4 << 10
)

// ReadBatch implements fsm.BatchReader: payloads in one raft entry that
// sit close together (messages sent together and delivered together) come
// in one read of their span, sharing its buffer; the others are read one
// by one.
func (b *replicaBodies) ReadBatch(locs []fsm.Loc, out [][]byte) error {
	if len(out) != len(locs) {
		return fmt.Errorf("partition bodies: %d locations, %d payloads", len(locs), len(out))
	}
	for i := 0; i < len(locs); {
		end, lo, hi := spanRun(locs, i)
		if end == i+1 {
			_, p, err := b.Read(locs[i])
			if err != nil {
				return err
			}
			out[i] = p
			i++
			continue
		}
		pos, _, ok := b.logs.EntryPos(locs[i].A)
		if !ok {
			return fmt.Errorf("partition bodies: raft entry %d of %v is gone", locs[i].A, locs[i])
		}
		span, err := b.store.ReadData(pos, int(lo), int(hi-lo))
		if err != nil {
			return err
		}
		for k := i; k < end; k++ {
			from := uint64(locs[k].B) - lo
			to := from + uint64(locs[k].C)
			out[k] = span[from:to:to]
		}
		i = end
	}
	return nil
}

// spanRun returns the end of the run of locs from i that one read serves
// (locs of one raft entry whose span stays within spanBytesMax and is
// mostly asked-for bytes) and the run's span [lo, hi) in the entry's data.
// A run of one is read alone.
func spanRun(locs []fsm.Loc, i int) (end int, lo, hi uint64) {
	first := locs[i]
	lo, hi = uint64(first.B), uint64(first.B)+uint64(first.C)
	asked := uint64(first.C)
	end = i + 1
	if first.A == 0 {
		return end, lo, hi
	}
	for ; end < len(locs) && locs[end].A == first.A; end++ {
		l := locs[end]
		nlo, nhi := min(lo, uint64(l.B)), max(hi, uint64(l.B)+uint64(l.C))
		nasked := asked + uint64(l.C)
		if nhi-nlo > spanBytesMax || nhi-nlo > 2*nasked+spanSlackBytes {
			break
		}
		lo, hi, asked = nlo, nhi, nasked
	}
	return end, lo, hi
}

// MarkDead drops one reference.
func (b *replicaBodies) MarkDead(loc fsm.Loc, payloadBytes int) error {
	if loc.A == 0 {
		return b.records.MarkDead(loc, payloadBytes)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.refs[loc.A]
	if !ok || n <= 0 {
		return fmt.Errorf("partition bodies: %v released more often than referenced", loc)
	}
	if n == 1 {
		delete(b.refs, loc.A)
	} else {
		b.refs[loc.A] = n - 1
	}
	return nil
}

// Pin keeps every payload readable until release: body records through
// the wal's pin, entries by holding the floor where it is now.
func (b *replicaBodies) Pin() func() {
	release := b.records.Pin()
	b.mu.Lock()
	id := b.nextPin
	b.nextPin++
	b.pins[id] = b.lowestRefLocked()
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.pins, id)
			b.mu.Unlock()
			release()
		})
	}
}

// adoptSnapshotPin makes pin (taken when the newest local snapshot was
// frozen, or right after it was restored) the one that keeps that
// snapshot's entries and body records, and releases the previous one.
func (b *replicaBodies) adoptSnapshotPin(pin func()) {
	b.mu.Lock()
	old := b.snapPin
	b.snapPin = pin
	b.mu.Unlock()
	if old != nil {
		old()
	}
}

// floor returns the lowest raft index still needed for a payload, or 0
// when none is.
func (b *replicaBodies) floor() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.floorLocked()
}

func (b *replicaBodies) floorLocked() uint64 {
	low := b.lowestRefLocked()
	for _, f := range b.pins {
		if f != 0 && (low == 0 || f < low) {
			low = f
		}
	}
	return low
}

// lowestRefLocked is the lowest raft index a live message refers to, or
// 0. A pin records it, not the floor: what other pins hold they release
// on their own, and a snapshot's pin inheriting its predecessor's floor
// would keep the floor from ever rising.
func (b *replicaBodies) lowestRefLocked() uint64 {
	var low uint64
	for i := range b.refs {
		if low == 0 || i < low {
			low = i
		}
	}
	return low
}

// flooredLog is the group's raft log as raft sees it, except that a prefix
// compaction stops below the lowest entry whose payloads are still needed
// (replicaBodies.floor): raft considers those entries compacted, the log
// keeps them. Raft copes with a first index lower than it expects (it just
// has more log to replicate from). A deletion that reaches the last entry
// (a conflict's suffix, or the whole log after a snapshot install) is
// passed on as it is: committed entries are never in a conflicting suffix,
// and an install replaces every message.
type flooredLog struct {
	*raftlog.GroupLog
	bodies *replicaBodies
}

// DeleteRange deletes [minIndex, maxIndex], keeping needed entries.
func (l *flooredLog) DeleteRange(minIndex, maxIndex uint64) error {
	last, err := l.GroupLog.LastIndex()
	if err != nil {
		return err
	}
	if maxIndex < last {
		if floor := l.bodies.floor(); floor != 0 && maxIndex >= floor {
			maxIndex = floor - 1
		}
		if maxIndex < minIndex {
			return nil
		}
	}
	return l.GroupLog.DeleteRange(minIndex, maxIndex)
}

// Compact compacts the body records (entries are reclaimed by the log
// store once raft and the floor let them go).
func (b *replicaBodies) Compact(live func(key uint64, loc fsm.Loc) bool, moved func(key uint64, from, to fsm.Loc)) (wal.CompactStats, error) {
	return b.records.Compact(live, moved)
}

// sparseBelow reports whether the entries below cut that still hold live
// payloads are few compared with the log they keep: fewer than half of the
// raft indexes from the lowest of them up to cut. Copying those payloads out
// then frees more log than it writes.
func (b *replicaBodies) sparseBelow(cut uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	var held, lowest uint64
	for i := range b.refs {
		if i < cut {
			held++
			if lowest == 0 || i < lowest {
				lowest = i
			}
		}
	}
	return held > 0 && held*2 < cut-lowest
}
