// Package digest builds canonical SHA-256 digests of state machines: values
// are written in a fixed binary form (integers as 8 little-endian bytes,
// strings length-prefixed), so two states digest equally exactly when the
// same values were written in the same order. Callers must visit their
// state in a deterministic order (never a map's iteration order).
package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Writer accumulates a digest.
type Writer struct {
	h   hash.Hash
	buf [8]byte
}

// New returns an empty Writer.
func New() *Writer { return &Writer{h: sha256.New()} }

// Ints writes each value as 8 little-endian bytes.
func (w *Writer) Ints(vs ...int64) {
	for _, v := range vs {
		binary.LittleEndian.PutUint64(w.buf[:], uint64(v))
		w.h.Write(w.buf[:])
	}
}

// Str writes s prefixed by its length, so adjacent strings cannot run
// into each other.
func (w *Writer) Str(s string) {
	w.Ints(int64(len(s)))
	w.h.Write([]byte(s))
}

// Sum returns the digest of everything written.
func (w *Writer) Sum() [32]byte {
	var out [32]byte
	copy(out[:], w.h.Sum(nil))
	return out
}
