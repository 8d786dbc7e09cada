package fsm

import (
	"crypto/sha256"
	"encoding/binary"
)

// idKey is what the dedup window remembers of a message id: the first 128
// bits of its SHA-256. A fixed-size key without pointers keeps the dedup
// table out of the garbage collector's scans and lets an acked message's id
// string be freed while its key stays remembered. A cryptographic hash is
// used so that nobody can craft an id that collides with another
// producer's and so have that producer's message refused as a duplicate.
type idKey struct {
	Hi uint64 `msgpack:"hi"`
	Lo uint64 `msgpack:"lo"`
}

func keyOf(id string) idKey {
	sum := sha256.Sum256([]byte(id))
	return idKey{Hi: binary.BigEndian.Uint64(sum[:8]), Lo: binary.BigEndian.Uint64(sum[8:16])}
}

// putKey writes k into b (16 bytes), high half first.
func putKey(b []byte, k idKey) {
	binary.BigEndian.PutUint64(b[:8], k.Hi)
	binary.BigEndian.PutUint64(b[8:16], k.Lo)
}

// keyFrom reads what putKey wrote.
func keyFrom(b []byte) idKey {
	return idKey{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:16])}
}
