package fsm

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/vmihailenco/msgpack/v5"
)

// WriteFullSnapshot reads a persisted snapshot of either form from r and
// writes its full form to w: a local snapshot's payloads are read from
// store (the store that wrote it) and inlined, with each payload checked
// against the size and checksum the snapshot recorded; a full snapshot is
// copied record by record. It is how a replica whose own snapshots are
// local sends one to a follower that lacks its log. The stream is decoded
// one record at a time: memory stays bounded by the largest record.
func WriteFullSnapshot(r io.Reader, w io.Writer, store BodyStore) error {
	dec := msgpack.NewDecoder(bufio.NewReaderSize(r, 1<<16))
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := msgpack.NewEncoder(bw)
	enc.UseCompactInts(true)
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("%w: header: %w", ErrSnapshotFormat, err)
	}
	local := h.Version == snapshotVersionLocal && h.Form == formLocal
	if !local && !(h.Form == formFull && (h.Version == snapshotVersionFull || h.Version == snapshotVersionLocal)) {
		return fmt.Errorf("%w: version %d form %d", ErrSnapshotFormat, h.Version, h.Form)
	}
	h.Version, h.Form = snapshotVersionFull, formFull
	if err := enc.Encode(&h); err != nil {
		return err
	}
	for i := range h.Messages {
		var sm snapMessage
		if err := dec.Decode(&sm); err != nil {
			return fmt.Errorf("%w: message %d of %d: %w", ErrSnapshotFormat, i, h.Messages, err)
		}
		if local {
			if err := inlinePayload(&sm, store); err != nil {
				return err
			}
		}
		if err := enc.Encode(&sm); err != nil {
			return err
		}
	}
	for i := range h.Dedup {
		var d snapDedup
		if err := dec.Decode(&d); err != nil {
			return fmt.Errorf("%w: dedup entry %d of %d: %w", ErrSnapshotFormat, i, h.Dedup, err)
		}
		if err := enc.Encode(&d); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// inlinePayload replaces a local record's location by its payload,
// verified against the recorded size and checksum.
func inlinePayload(sm *snapMessage, store BodyStore) error {
	loc := Loc{A: sm.LocA, B: sm.LocB, C: sm.LocC}
	_, payload, err := store.Read(loc)
	if err != nil {
		return fmt.Errorf("snapshot: body of seq %d at %v: %w", sm.Seq, loc, err)
	}
	if uint32(len(payload)) != sm.Stored || crc32.Checksum(payload, castagnoli) != sm.CRC {
		return fmt.Errorf("snapshot: body of seq %d at %v does not match its recorded size and checksum", sm.Seq, loc)
	}
	sm.Payload = payload
	sm.Stored, sm.CRC, sm.LocA, sm.LocB, sm.LocC = 0, 0, 0, 0, 0
	return nil
}
