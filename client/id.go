package client

import (
	crand "crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

// idGen makes message ids in the ULID layout: 26 characters of Crockford
// base32 holding a 48-bit millisecond timestamp followed by 80 random bits
// from crypto/rand. Within one millisecond the random part is incremented,
// so ids made by one client sort in creation order.
type idGen struct {
	mu     sync.Mutex
	lastMS uint64
	hi     uint16 // top 16 of the 80 random bits
	lo     uint64 // low 64 random bits
}

// ids is the process-wide generator.
var ids idGen

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newID returns a fresh message id.
func newID() string { return ids.next(time.Now()) }

func (g *idGen) next(now time.Time) string {
	ms := uint64(now.UnixMilli())
	g.mu.Lock()
	if ms <= g.lastMS {
		// Same millisecond (or a clock step back): keep ordering.
		ms = g.lastMS
		g.lo++
		if g.lo == 0 {
			g.hi++
		}
	} else {
		var b [10]byte
		_, _ = crand.Read(b[:])
		g.lastMS = ms
		g.hi = binary.BigEndian.Uint16(b[:2])
		g.lo = binary.BigEndian.Uint64(b[2:])
	}
	hi, lo := g.hi, g.lo
	g.mu.Unlock()

	var raw [16]byte
	raw[0], raw[1], raw[2] = byte(ms>>40), byte(ms>>32), byte(ms>>24)
	raw[3], raw[4], raw[5] = byte(ms>>16), byte(ms>>8), byte(ms)
	binary.BigEndian.PutUint16(raw[6:], hi)
	binary.BigEndian.PutUint64(raw[8:], lo)
	return encodeULID(raw)
}

// encodeULID writes 128 bits as 26 base32 characters (the first one
// carries only 3 bits).
func encodeULID(raw [16]byte) string {
	var out [26]byte
	// Take the 128 bits as two 64-bit halves and emit 5 bits at a time,
	// most significant first, with 2 leading zero bits of padding.
	hi := binary.BigEndian.Uint64(raw[:8])
	lo := binary.BigEndian.Uint64(raw[8:])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}
