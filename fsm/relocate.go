package fsm

import (
	"fmt"
	"hash/crc32"
)

// RelocateBodies copies payloads that move selects into body records of
// the store (Append): live messages in seq order, then dead letters, until
// at least budgetBytes have been copied. Each payload is checked against
// its recorded checksum before it is copied. Once every copy is appended,
// durable is called (the store's sync); only if it succeeds do the
// messages switch to their copies and the old locations get released
// (MarkDead). A store that keeps payloads inside log entries uses it to
// let old entries go while a few of their messages are still waiting.
// Locations are local, so the state's digest does not change.
//
// It returns how many payloads and bytes were moved. On any error nothing
// moved: every message keeps its old location, and the copies appended so
// far are referenced by nothing (the caller may cut them off its log).
func (f *FSM) RelocateBodies(move func(Loc) bool, budgetBytes int, durable func() error) (moved, movedBytes int, err error) {
	type copied struct {
		m  *message
		to Loc
	}
	var copies []copied
	relocate := func(m *message) bool {
		if movedBytes >= budgetBytes {
			return false
		}
		if !move(m.pos) {
			return true
		}
		var to Loc
		if to, err = f.copyBody(m); err != nil {
			return false
		}
		copies = append(copies, copied{m, to})
		movedBytes += int(m.stored)
		return true
	}
	f.table.ascend(relocate)
	if err == nil && movedBytes < budgetBytes {
		f.dead.Ascend(relocate)
	}
	if err == nil && len(copies) > 0 {
		err = durable()
	}
	if err != nil {
		return 0, 0, err
	}
	for _, c := range copies {
		if err := f.store.MarkDead(c.m.pos, int(c.m.stored)); err != nil {
			panic(fmt.Sprintf("fsm: relocate seq %d: body store rejected mark-dead of %v: %v", c.m.seq, c.m.pos, err))
		}
		c.m.pos = c.to
		f.keys.drop(c.m.seq) // the copy is stored under the message's own seq
	}
	return len(copies), movedBytes, nil
}

// copyBody appends a verified copy of m's payload and returns where.
func (f *FSM) copyBody(m *message) (Loc, error) {
	_, payload, err := f.store.Read(m.pos)
	if err != nil {
		return Loc{}, fmt.Errorf("relocate seq %d from %v: %w", m.seq, m.pos, err)
	}
	if uint32(len(payload)) != m.stored || crc32.Checksum(payload, castagnoli) != m.crc {
		return Loc{}, fmt.Errorf("relocate seq %d from %v: payload does not match its size and checksum", m.seq, m.pos)
	}
	to, err := f.store.Append(m.seq, payload)
	if err != nil {
		return Loc{}, fmt.Errorf("relocate seq %d: %w", m.seq, err)
	}
	return to, nil
}
