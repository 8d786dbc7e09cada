package raftlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/ferrymq/ferry/wal"
	"github.com/hashicorp/raft"
)

// Bounds of a group's stable store (raft's term and vote). raft keeps
// three keys of at most 12 bytes, and values of 8 bytes or a server's
// address or id.
const (
	// StableKeyBytesMax bounds a stable key.
	StableKeyBytesMax = 64
	// StableValueBytesMax bounds a stable value.
	StableValueBytesMax = 1024
	// StableKeysMax bounds the keys one group's stable store holds.
	StableKeysMax = 16
)

var _ raft.StableStore = (*GroupLog)(nil)

// stableValue is the newest record of one stable key of a group.
type stableValue struct {
	val []byte
	pos wal.Pos
	seq uint64
}

// Set stores key's value and returns once it is durable: the record is
// group-committed with the calls of every other group, so the votes of
// many groups share one fdatasync. A key of 1..StableKeyBytesMax bytes, a
// value of at most StableValueBytesMax bytes and at most StableKeysMax
// keys per group; beyond, ErrStableTooLarge and nothing is stored.
func (g *GroupLog) Set(key, val []byte) error {
	r, err := g.stableRequest(key, val)
	if err != nil {
		return err
	}
	return g.s.submit(r)
}

var _ raft.StableBatchStore = (*GroupLog)(nil)

// SetBatch stores every write as Set and SetUint64 would, in order, and
// returns once all are durable: they are queued together, so they share
// one fdatasync (or, past a batch's bounds, land in consecutive ones),
// and a crash keeps a prefix of them. raft stores an election's term and
// vote so. At most StableKeysMax writes; bounds as Set's, checked for
// every write before any is queued.
func (g *GroupLog) SetBatch(writes []raft.StableWrite) error {
	if len(writes) == 0 || len(writes) > StableKeysMax {
		return fmt.Errorf("%w: a batch of %d stable writes (1..%d)", ErrStableTooLarge, len(writes), StableKeysMax)
	}
	reqs := make([]*request, len(writes))
	for i, w := range writes {
		val := w.Val
		if w.IsUint64 {
			val = binary.LittleEndian.AppendUint64(nil, w.Uint64)
		}
		r, err := g.stableRequest(w.Key, val)
		if err != nil {
			return err
		}
		reqs[i] = r
	}
	return g.s.submitAll(reqs)
}

// stableRequest checks a stable write's bounds and makes its request.
func (g *GroupLog) stableRequest(key, val []byte) (*request, error) {
	if len(key) == 0 || len(key) > StableKeyBytesMax || len(val) > StableValueBytesMax {
		return nil, fmt.Errorf("%w: key of %d bytes (1..%d), value of %d bytes (at most %d)",
			ErrStableTooLarge, len(key), StableKeyBytesMax, len(val), StableValueBytesMax)
	}
	return &request{kind: reqStable, g: g, key: string(key), val: bytes.Clone(val),
		bytes: walRecordHeaderBytes + stableHeaderBytes + int64(len(key)+len(val))}, nil
}

// Get returns key's value; a key never set is ErrStableNotFound.
func (g *GroupLog) Get(key []byte) ([]byte, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if err := g.readable(); err != nil {
		return nil, err
	}
	v, ok := g.stable[string(key)]
	if !ok {
		return nil, ErrStableNotFound
	}
	return bytes.Clone(v.val), nil
}

// SetUint64 stores val under key, as Set.
func (g *GroupLog) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], val)
	return g.Set(key, b[:])
}

// GetUint64 returns the value SetUint64 stored under key; a key never set
// is ErrStableNotFound (with 0), a value of another length ErrCorrupt.
func (g *GroupLog) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: group %q stable key %q holds %d bytes, not a uint64", ErrCorrupt, g.name, key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}

// encodeStable appends the payload of a stable record.
func encodeStable(dst []byte, group uint32, key string, val []byte) []byte {
	var h [stableHeaderBytes]byte
	h[0] = kindStable
	binary.LittleEndian.PutUint32(h[1:5], group)
	h[5] = byte(len(key))
	binary.LittleEndian.PutUint16(h[6:8], uint16(len(val)))
	dst = append(dst, h[:]...)
	dst = append(dst, key...)
	return append(dst, val...)
}

// decodeStableHeader range-checks a stable record's lengths; dataLen holds
// the key's length and extLen the value's.
func decodeStableHeader(h recHeader, prefix []byte, payloadBytes int) (recHeader, error) {
	if len(prefix) < stableHeaderBytes || payloadBytes < stableHeaderBytes {
		return h, fmt.Errorf("stable payload is %d bytes, shorter than its %d-byte header", payloadBytes, stableHeaderBytes)
	}
	h.dataLen = uint32(prefix[5])
	h.extLen = uint32(binary.LittleEndian.Uint16(prefix[6:8]))
	switch {
	case h.dataLen == 0 || h.dataLen > StableKeyBytesMax:
		return h, fmt.Errorf("stable key of %d bytes (want 1..%d)", h.dataLen, StableKeyBytesMax)
	case h.extLen > StableValueBytesMax:
		return h, fmt.Errorf("stable value of %d bytes (at most %d)", h.extLen, StableValueBytesMax)
	case stableHeaderBytes+int(h.dataLen)+int(h.extLen) != payloadBytes:
		return h, fmt.Errorf("stable lengths (key %d, value %d) disagree with the %d-byte payload", h.dataLen, h.extLen, payloadBytes)
	}
	return h, nil
}

// decodeStable decodes a whole stable payload. The value aliases payload.
func decodeStable(payload []byte) (recHeader, string, []byte, error) {
	h, err := decodeHeader(payload, len(payload))
	if err == nil && h.kind != kindStable {
		err = fmt.Errorf("record kind %d is not a stable record", h.kind)
	}
	if err != nil {
		return h, "", nil, err
	}
	key := string(payload[stableHeaderBytes : stableHeaderBytes+h.dataLen])
	return h, key, payload[stableHeaderBytes+h.dataLen:], nil
}

// stageStable appends the record of a Set call. A new key beyond
// StableKeysMax is refused; v.newKeys counts the new keys staged earlier
// in the batch.
func (s *Store) stageStable(r *request, v *groupView) error {
	if _, ok := r.g.stable[r.key]; !ok {
		if v.newKeys == nil {
			v.newKeys = make(map[string]bool)
		}
		if !v.newKeys[r.key] && len(r.g.stable)+len(v.newKeys) >= StableKeysMax {
			r.err = fmt.Errorf("%w: group %q holds %d stable keys (StableKeysMax)", ErrStableTooLarge, r.g.name, StableKeysMax)
			return nil
		}
		v.newKeys[r.key] = true
	}
	s.scratch = encodeStable(s.scratch[:0], r.g.id, r.key, r.val)
	pos, err := s.log.Append(s.nextSeq, s.scratch)
	if err != nil {
		return err
	}
	r.mk = marker{kind: kindStable, seq: s.nextSeq, pos: pos}
	s.nextSeq++
	return nil
}

// applyStableLocked makes a durable Set visible; the key's older record
// dies.
func (s *Store) applyStableLocked(r *request) {
	g := r.g
	if g.stable == nil {
		g.stable = make(map[string]stableValue)
	}
	if old, ok := g.stable[r.key]; ok {
		s.killLocked(old.pos)
	}
	g.stable[r.key] = stableValue{val: r.val, pos: r.mk.pos, seq: r.mk.seq}
}

// stableKeyAtLocked returns the key whose newest record of g lies at pos.
func stableKeyAtLocked(g *GroupLog, pos wal.Pos) (string, bool) {
	for k, v := range g.stable {
		if v.pos == pos {
			return k, true
		}
	}
	return "", false
}

// scannedStable is a stable record found by recovery.
type scannedStable struct {
	group uint32
	seq   uint64
	pos   wal.Pos
}

// recoverStable reads every stable record recovery found (checksums
// verified again), keeps the newest of each group's keys and returns the
// positions of the others. A record that does not decode, or a group with
// more than StableKeysMax keys, is ErrCorrupt.
func (s *Store) recoverStable(found []scannedStable) (dead []wal.Pos, err error) {
	sort.Slice(found, func(i, j int) bool { return found[i].seq < found[j].seq })
	for _, f := range found {
		_, payload, err := s.log.Read(f.pos)
		if err != nil {
			return nil, fmt.Errorf("%w: stable record at %v: %w", ErrCorrupt, f.pos, err)
		}
		h, key, val, err := decodeStable(payload)
		if err == nil && h.group != f.group {
			err = fmt.Errorf("record names group %d, its scan %d", h.group, f.group)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: stable record at %v: %v", ErrCorrupt, f.pos, err)
		}
		g := s.byID[f.group]
		if g.stable == nil {
			g.stable = make(map[string]stableValue)
		}
		if old, ok := g.stable[key]; ok {
			dead = append(dead, old.pos)
		} else if len(g.stable) >= StableKeysMax {
			return nil, fmt.Errorf("%w: group %q has more than %d stable keys", ErrCorrupt, g.name, StableKeysMax)
		}
		g.stable[key] = stableValue{val: bytes.Clone(val), pos: f.pos, seq: f.seq}
	}
	return dead, nil
}
