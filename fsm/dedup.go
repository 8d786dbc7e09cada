package fsm

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// The dedup window's ids live in a dedupTable: a FIFO ring of (key, seq)
// entries in acceptance order, plus an open-addressing index from key to
// ring position. Neither holds a pointer per id, so the garbage collector
// never scans them, and an id costs 24 bytes in the ring plus 5 bytes per
// index slot: about 30-45 bytes where a Go map with a separate FIFO of keys
// took about 70. The index is rebuilt, in one step, only when the window
// outgrows 3/4 of its slots (it is then sized for twice the ids) or shrinks
// below 1/8 of them; a rebuild of a million ids takes a few hundred
// milliseconds.
//
// The ring's chunks are never written in place except to change an
// entry's seq (a redrive), which copies a chunk that a frozen snapshot
// shares first: a snapshot keeps the chunks instead of copying 24 bytes per
// id.

const (
	// dedupChunkLen is the number of entries per ring chunk.
	dedupChunkLen = 512
	// dedupIDsMax is the most ids the table holds, whatever the config:
	// index slots keep ring positions modulo 2^32. With DedupMaxIDs 0 ("no
	// cap") the oldest ids leave the window early beyond it, as under a
	// cap; reaching it would take over 100 GB of RAM.
	dedupIDsMax = math.MaxUint32
	// dedupIndexMin is the smallest index, in slots.
	dedupIndexMin = 16
)

// Index slot tags: a slot's tag is 0 when it is empty, otherwise 8 bits of
// the key's hash (1..255) that spare most key comparisons. Removal shifts
// later slots of the probe run back (no tombstones), so the index never
// needs rebuilding while the window slides at a steady size.
const tagEmpty = 0

// dedupEntry is one remembered id: its key and the seq it was accepted as.
type dedupEntry struct {
	key idKey
	seq uint64
}

// dedupChunk is a fixed block of ring entries. shared is set while a frozen
// snapshot may read the chunk; the table then copies it before changing an
// entry it holds.
type dedupChunk struct {
	entries [dedupChunkLen]dedupEntry
	shared  bool
}

// dedupTable maps the ids of the dedup window to seqs and keeps them in
// acceptance order. Keys are unique. Removal is oldest first (pop); seq may
// change in place (setSeq).
type dedupTable struct {
	chunks []*dedupChunk
	head   int    // index of the oldest entry in chunks[0]
	n      int    // entries in the ring
	first  uint64 // absolute position of the oldest entry (positions count every push)

	// The index: tags and slots are parallel arrays of a power-of-two
	// length; slots[i] is the absolute ring position (mod 2^32) of the
	// entry whose tag is tags[i]. Linear probing.
	tags  []uint8
	slots []uint32
	shift uint8 // 64 - log2(len(tags))

	// seedHi and seedLo are the index hash's secret, drawn per table
	// from the process's random source.
	seedHi, seedLo uint64
}

func newDedupTable() dedupTable { return dedupTable{seedHi: rand.Uint64(), seedLo: rand.Uint64()} }

// len returns the number of ids held.
func (t *dedupTable) len() int { return t.n }

// front returns the absolute position of the oldest entry.
func (t *dedupTable) front() uint64 { return t.first }

// at returns the i-th oldest entry.
func (t *dedupTable) at(i int) dedupEntry {
	i += t.head
	return t.chunks[i/dedupChunkLen].entries[i%dedupChunkLen]
}

// entryAt returns a pointer to the i-th oldest entry, for reading only.
func (t *dedupTable) entryAt(i int) *dedupEntry {
	i += t.head
	return &t.chunks[i/dedupChunkLen].entries[i%dedupChunkLen]
}

// hash returns the seeded hash of k: its top bits choose the home slot,
// its low byte gives the tag. A key is already uniform (SHA-256 bits), but
// anyone can compute it for an id of their choosing, so the slot must not
// follow from the key alone: ids crafted to share a home slot would build
// probe runs that make every insert and removal slow. Both halves are
// mixed with a secret seed and multiplied into 128 bits, folded to 64 (the
// mixing step of wyhash): a few cycles, where a general-purpose keyed hash
// of the 16 bytes cost ten times as much, and removal rehashes every key
// it moves.
func (t *dedupTable) hash(k idKey) uint64 {
	hi, lo := bits.Mul64(k.Hi^t.seedHi, k.Lo^t.seedLo)
	return hi ^ lo
}

func tagOf(h uint64) uint8 {
	if tag := uint8(h); tag != tagEmpty {
		return tag
	}
	return uint8(h>>8) | 1 // any live tag
}

// find returns the index slot of k, or -1.
func (t *dedupTable) find(k idKey) int {
	if t.n == 0 {
		return -1
	}
	h := t.hash(k)
	tag, mask := tagOf(h), len(t.tags)-1
	for i := t.home(h); ; i = (i + 1) & mask {
		switch t.tags[i] {
		case tagEmpty:
			return -1
		case tag:
			if t.entryAt(int(t.slots[i]-uint32(t.first))).key == k {
				return i
			}
		}
	}
}

// home returns the first slot to probe for hash h.
func (t *dedupTable) home(h uint64) int { return int(h >> t.shift) }

// get returns the seq k was accepted as, if k is in the window.
func (t *dedupTable) get(k idKey) (uint64, bool) {
	if i := t.find(k); i >= 0 {
		return t.entryAt(int(t.slots[i] - uint32(t.first))).seq, true
	}
	return 0, false
}

// push appends k, accepted as seq, as the newest entry. k must not be in
// the table, and the table must hold fewer than dedupIDsMax ids.
func (t *dedupTable) push(k idKey, seq uint64) {
	if t.n >= dedupIDsMax {
		panic("fsm: dedup table full")
	}
	end := t.head + t.n
	if end == len(t.chunks)*dedupChunkLen {
		t.chunks = append(t.chunks, new(dedupChunk))
	}
	// A shared last chunk needs no copy: no snapshot reads past its end.
	t.chunks[end/dedupChunkLen].entries[end%dedupChunkLen] = dedupEntry{key: k, seq: seq}
	t.n++
	if 4*t.n > 3*len(t.tags) {
		t.rebuild()
		return // rebuild indexed the new entry
	}
	t.insertSlot(k, uint32(t.first+uint64(t.n-1)))
}

// insertSlot puts position pos of key k into the first free slot of its
// probe sequence.
func (t *dedupTable) insertSlot(k idKey, pos uint32) {
	h := t.hash(k)
	mask := len(t.tags) - 1
	i := t.home(h)
	for t.tags[i] != tagEmpty {
		i = (i + 1) & mask
	}
	t.tags[i], t.slots[i] = tagOf(h), pos
}

// removeSlot empties slot i and moves back the later slots of its probe
// run that may take its place, so that every remaining key is still
// reached from its home slot without passing an empty one.
func (t *dedupTable) removeSlot(i int) {
	mask := len(t.tags) - 1
	for j := (i + 1) & mask; t.tags[j] != tagEmpty; j = (j + 1) & mask {
		home := t.home(t.hash(t.entryAt(int(t.slots[j] - uint32(t.first))).key))
		// The key at j may move to i unless its home lies cyclically in
		// (i, j]: then i comes before it on its probe sequence.
		if (j-home)&mask >= (j-i)&mask {
			t.tags[i], t.slots[i] = t.tags[j], t.slots[j]
			i = j
		}
	}
	t.tags[i] = tagEmpty
}

// pop removes the oldest entry and returns its key.
func (t *dedupTable) pop() idKey {
	e := t.at(0)
	pos := uint32(t.first)
	h := t.hash(e.key)
	tag, mask := tagOf(h), len(t.tags)-1
	i := t.home(h)
	for t.tags[i] != tag || t.slots[i] != pos {
		if t.tags[i] == tagEmpty {
			panic("fsm: dedup entry missing from its index")
		}
		i = (i + 1) & mask
	}
	t.removeSlot(i)
	t.head++
	t.n--
	t.first++
	if t.n == 0 {
		t.chunks, t.head = nil, 0
		t.tags, t.slots = nil, nil
		return e.key
	}
	if t.head == dedupChunkLen {
		t.chunks[0] = nil
		t.chunks, t.head = t.chunks[1:], 0
	}
	if 8*t.n < len(t.tags) && len(t.tags) > dedupIndexMin {
		t.rebuild() // shrink
	}
	return e.key
}

// setSeq changes the seq of k from old to seq, if k is in the window with
// seq old (a redriven message takes its id's place).
func (t *dedupTable) setSeq(k idKey, old, seq uint64) {
	i := t.find(k)
	if i < 0 {
		return
	}
	r := int(t.slots[i]-uint32(t.first)) + t.head
	c := t.chunks[r/dedupChunkLen]
	if c.entries[r%dedupChunkLen].seq != old {
		return
	}
	if c.shared {
		cp := &dedupChunk{entries: c.entries}
		t.chunks[r/dedupChunkLen] = cp
		c = cp
	}
	c.entries[r%dedupChunkLen].seq = seq
}

// rebuild sizes the index for twice the entries (at least dedupIndexMin
// slots) and indexes every entry again, dropping deleted slots.
func (t *dedupTable) rebuild() {
	size := dedupIndexMin
	for size < 2*t.n {
		size *= 2
	}
	t.tags, t.slots = make([]uint8, size), make([]uint32, size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	for i := range t.n {
		t.insertSlot(t.entryAt(i).key, uint32(t.first+uint64(i)))
	}
}

// frozenDedupRing is the ring of a dedupTable at freeze time. It shares the
// table's chunks, which the table copies before changing (see setSeq).
type frozenDedupRing struct {
	chunks []*dedupChunk
	head   int
	n      int
}

// freeze returns the ring as it is now and marks its chunks shared.
func (t *dedupTable) freeze() frozenDedupRing {
	for _, c := range t.chunks {
		c.shared = true
	}
	return frozenDedupRing{chunks: slices.Clone(t.chunks), head: t.head, n: t.n}
}

// at returns the i-th oldest entry of the frozen ring.
func (r *frozenDedupRing) at(i int) dedupEntry {
	i += r.head
	return r.chunks[i/dedupChunkLen].entries[i%dedupChunkLen]
}

// check verifies that the index holds exactly the ring's entries, each
// once, under its own tag; for the invariant checks of tests.
func (t *dedupTable) check() error {
	live := 0
	for i, tag := range t.tags {
		if tag == tagEmpty {
			continue
		}
		live++
		rel := int(t.slots[i] - uint32(t.first))
		if rel >= t.n {
			return fmt.Errorf("fsm invariant: dedup slot %d names position %d of %d", i, rel, t.n)
		}
		if want := tagOf(t.hash(t.entryAt(rel).key)); tag != want {
			return fmt.Errorf("fsm invariant: dedup slot %d has tag %d, want %d", i, tag, want)
		}
	}
	if live != t.n {
		return fmt.Errorf("fsm invariant: %d dedup slots for %d ids", live, t.n)
	}
	for i := range t.n {
		if j := t.find(t.entryAt(i).key); j < 0 || int(t.slots[j]-uint32(t.first)) != i {
			return fmt.Errorf("fsm invariant: dedup entry %d not found at its own position", i)
		}
	}
	return nil
}

var (
	errDedupDuplicate = errors.New("id key listed twice")
	errDedupTime      = errors.New("acceptance time before the previous entry's")
	errDedupFull      = errors.New("more ids than the dedup table holds")
)

// restoreDedup adds one decoded dedup entry of a snapshot, after checking
// that it can belong to a window: a key not yet listed, a time not before
// the previous entry's.
func (f *FSM) restoreDedup(d *snapDedup) error {
	switch {
	case f.dedup.len() >= dedupIDsMax:
		return errDedupFull
	case f.marks.len() > 0 && d.At < f.lastMark:
		return errDedupTime
	}
	if _, dup := f.dedup.get(d.ID); dup {
		return errDedupDuplicate
	}
	f.rememberAt(d.ID, d.Seq, d.At)
	return nil
}
