package fsm

// bodyKeys remembers which messages own a body stored under another
// message's seq. A store keys every payload it holds (a body record, or a
// reference into a log entry) by the seq of the message that stored it, and
// reports that key to compaction (Compactor's live and moved callbacks). A
// redrive gives the dead letter's stored payload to the new message instead
// of writing a copy, so that applying it never writes: the new message has
// a new seq, while the store keeps reporting the old one. bodyKeys maps
// between the two, for those messages only (usually few), so that
// compaction still finds the owner of a redriven body and never drops it.
//
// The alternative, a map from location to message, would have to be
// rebuilt at restore for every message whose body may have been inherited,
// and which those are is not in the snapshot; the key a location is stored
// under is in the store, which hands it back to Retain at restore.
//
// An entry exists only while the message's key differs from its seq: a
// payload copied again (RelocateBodies, or a full snapshot restore) is
// stored under the message's own seq and needs none. Like locations, the
// keys are local to a replica and never part of a digest.
type bodyKeys struct {
	keyBySeq   map[uint64]uint64 // owner seq -> the key its body is stored under
	ownerByKey map[uint64]uint64 // the inverse
}

// key returns the key seq's body is stored under.
func (k *bodyKeys) key(seq uint64) uint64 {
	if key, ok := k.keyBySeq[seq]; ok {
		return key
	}
	return seq
}

// owner returns the seq of the message whose body is stored under key.
func (k *bodyKeys) owner(key uint64) uint64 {
	if seq, ok := k.ownerByKey[key]; ok {
		return seq
	}
	return key
}

// set records that seq's body is stored under key (key == seq forgets it).
func (k *bodyKeys) set(seq, key uint64) {
	k.drop(seq)
	if key == seq {
		return
	}
	if k.keyBySeq == nil {
		k.keyBySeq, k.ownerByKey = map[uint64]uint64{}, map[uint64]uint64{}
	}
	k.keyBySeq[seq] = key
	k.ownerByKey[key] = seq
}

// drop forgets seq's entry, if any.
func (k *bodyKeys) drop(seq uint64) {
	if key, ok := k.keyBySeq[seq]; ok {
		delete(k.keyBySeq, seq)
		delete(k.ownerByKey, key)
	}
}

// len returns how many messages own a body stored under another key.
func (k *bodyKeys) len() int { return len(k.keyBySeq) }

// reset forgets every entry.
func (k *bodyKeys) reset() { k.keyBySeq, k.ownerByKey = nil, nil }
