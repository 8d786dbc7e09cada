package fsm

import (
	"fmt"
	"hash/crc32"
)

// RelocateBodies copies payloads that move selects into body records of
// the store (Append), releasing their old locations (MarkDead): live
// messages in seq order, then dead letters, until at least budgetBytes have
// been copied. Each payload is checked against its recorded checksum before
// it is copied. A store that keeps payloads inside log entries uses it to
// let old entries go while a few of their messages are still waiting.
// Locations are local, so the state's digest does not change.
//
// It returns how many payloads and bytes were copied. On error the message
// being moved keeps its old location and the ones already moved stay
// moved.
func (f *FSM) RelocateBodies(move func(Loc) bool, budgetBytes int) (moved, movedBytes int, err error) {
	relocate := func(m *message) bool {
		if movedBytes >= budgetBytes {
			return false
		}
		if !move(m.pos) {
			return true
		}
		if err = f.relocateOne(m); err != nil {
			return false
		}
		moved++
		movedBytes += int(m.stored)
		return true
	}
	f.table.ascend(relocate)
	if err == nil && movedBytes < budgetBytes {
		f.dead.Ascend(relocate)
	}
	return moved, movedBytes, err
}

func (f *FSM) relocateOne(m *message) error {
	_, payload, err := f.store.Read(m.pos)
	if err != nil {
		return fmt.Errorf("relocate seq %d from %v: %w", m.seq, m.pos, err)
	}
	if uint32(len(payload)) != m.stored || crc32.Checksum(payload, castagnoli) != m.crc {
		return fmt.Errorf("relocate seq %d from %v: payload does not match its size and checksum", m.seq, m.pos)
	}
	to, err := f.store.Append(m.seq, payload)
	if err != nil {
		return fmt.Errorf("relocate seq %d: %w", m.seq, err)
	}
	if err := f.store.MarkDead(m.pos, int(m.stored)); err != nil {
		return fmt.Errorf("relocate seq %d: release %v: %w", m.seq, m.pos, err)
	}
	m.pos = to
	return nil
}
