package fsm

import "github.com/ferrymq/ferry/internal/digest"

// Digest is a hash of the partition's whole logical state: config, clock,
// counters, every message and dead letter with its metadata and body
// checksum, and the dedup window. Replicas that applied the same commands
// have equal digests; payload locations (Loc), which are local to a
// replica, are left out, so replicas that keep a payload in a log entry and
// replicas that keep a copy compare equal.
func (f *FSM) Digest() [32]byte {
	d := digester{digest.New()}
	cfg := f.cfg
	d.Ints(int64(cfg.VisibilityTimeout), int64(cfg.MaxReceives), int64(cfg.BackoffBase),
		int64(cfg.BackoffMax), int64(cfg.DedupWindow), int64(cfg.MaxMessageBytes),
		cfg.MaxDepth, cfg.MaxBytes, int64(cfg.Retention), cfg.MaxDead, cfg.MaxDeadBytes,
		int64(cfg.DeadRetention), cfg.DedupMaxIDs)
	if cfg.MaxInFlight > 0 || cfg.MaxDeliveryRate > 0 || f.rateTAT != 0 {
		// Only when set: older states digest as before.
		d.Ints(cfg.MaxInFlight, cfg.MaxDeliveryRate, f.rateTAT)
	}
	d.Ints(f.clock, int64(f.lastSeq))
	if p := f.pause; p.Paused {
		// Only when paused, so that digests of states without a pause
		// are as they were before pausing existed.
		d.Ints(1, p.At)
		d.Str(p.By)
	}
	if len(f.schedules) > 0 {
		f.digestSchedules(&d) // only when some exist: older states digest as before
	}
	if f.guard != 0 {
		d.Ints(-1, int64(f.guard)) // only when moved: older states digest as before
	}
	f.digestLanes(&d)
	c := f.counters
	d.Ints(int64(c.Sent), int64(c.Duplicates), int64(c.Leased), int64(c.Acked), int64(c.Nacked),
		int64(c.Rejected), int64(c.Expired), int64(c.DeadLettered), int64(c.Redriven),
		int64(c.DeadDeleted), int64(c.Purged), int64(c.RetentionExpired), int64(c.DeadEvicted),
		int64(c.DeadExpired), int64(c.DedupEvicted), int64(c.ClockRefused), int64(c.ClockResyncs))
	f.eachMessage(d.message)
	for _, e := range f.dedupEntries() {
		d.Ints(int64(e.ID.Hi), int64(e.ID.Lo), int64(e.Seq), e.At)
	}
	return d.Sum()
}

type digester struct{ *digest.Writer }

func (d *digester) message(m *message) {
	if p := m.priority(); p > 0 {
		// A negative number never starts a message's part (seqs are
		// positive), and priority 0 adds nothing: older states digest as
		// before.
		d.Ints(-int64(p))
	}
	d.Ints(int64(m.seq), m.enqueuedAt, m.visibleAt, int64(m.stored), int64(m.crc),
		int64(m.attempts), int64(m.state))
	var buf [ulidLen]byte
	d.Str(m.idInto(&buf))
	if m.group != nil {
		d.Str(m.group.name)
	} else {
		d.Ints(-1)
	}
	in := m.info
	if in == nil {
		d.Ints(-1)
		return
	}
	d.Str(in.consumer)
	d.Ints(in.firstEnqueuedAt, in.firstDeliveredAt, in.lastDeliveredAt, in.deadAt, int64(in.deadReason))
	d.Str(in.deadText)
	d.Ints(int64(len(in.history)))
	for _, e := range in.history {
		d.Ints(int64(e.Kind), e.At, int64(e.Attempt))
		d.Str(e.Consumer)
		d.Str(e.Reason)
	}
}
