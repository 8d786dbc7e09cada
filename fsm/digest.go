package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Digest is a hash of the partition's whole logical state: config, clock,
// counters, every message and dead letter with its metadata and body
// checksum, and the dedup window. Replicas that applied the same commands
// have equal digests; positions in the body store, which are local to a
// replica, are left out.
func (f *FSM) Digest() [32]byte {
	d := digester{h: sha256.New()}
	cfg := f.cfg
	d.ints(int64(cfg.VisibilityTimeout), int64(cfg.MaxReceives), int64(cfg.BackoffBase),
		int64(cfg.BackoffMax), int64(cfg.DedupWindow), int64(cfg.MaxMessageBytes),
		cfg.MaxDepth, cfg.MaxBytes, int64(cfg.Retention))
	d.ints(f.clock, int64(f.lastSeq))
	c := f.counters
	d.ints(int64(c.Sent), int64(c.Duplicates), int64(c.Leased), int64(c.Acked), int64(c.Nacked),
		int64(c.Rejected), int64(c.Expired), int64(c.DeadLettered), int64(c.Redriven),
		int64(c.DeadDeleted), int64(c.Purged), int64(c.RetentionExpired))
	f.eachMessage(d.message)
	for _, e := range f.dedupEntries() {
		d.ints(int64(e.ID.Hi), int64(e.ID.Lo), int64(e.Seq), e.At)
	}
	var out [32]byte
	copy(out[:], d.h.Sum(nil))
	return out
}

type digester struct {
	h   hash.Hash
	buf [8]byte
}

func (d *digester) ints(vs ...int64) {
	for _, v := range vs {
		binary.LittleEndian.PutUint64(d.buf[:], uint64(v))
		d.h.Write(d.buf[:])
	}
}

func (d *digester) str(s string) {
	d.ints(int64(len(s)))
	d.h.Write([]byte(s))
}

func (d *digester) message(m *message) {
	d.ints(int64(m.seq), m.enqueuedAt, m.visibleAt, int64(m.stored), int64(m.crc),
		int64(m.attempts), int64(m.state))
	d.str(m.id)
	if m.group != nil {
		d.str(m.group.name)
	} else {
		d.ints(-1)
	}
	in := m.info
	if in == nil {
		d.ints(-1)
		return
	}
	d.str(in.consumer)
	d.ints(in.firstEnqueuedAt, in.firstDeliveredAt, in.lastDeliveredAt, in.deadAt, int64(in.deadReason))
	d.str(in.deadText)
	d.ints(int64(len(in.history)))
	for _, e := range in.history {
		d.ints(int64(e.Kind), e.At, int64(e.Attempt))
		d.str(e.Consumer)
		d.str(e.Reason)
	}
}
