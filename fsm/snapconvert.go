package fsm

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/vmihailenco/msgpack/v5"
)

// WriteFullSnapshot reads a persisted snapshot of any readable version and
// either form from r and writes the full form of the newest version to w:
// a local snapshot's payloads are read from store (the store that wrote
// it) and inlined, with each payload checked against the size and checksum
// the snapshot recorded; a full snapshot's payloads are copied. It is how a
// replica whose own snapshots are local sends one to a follower that lacks
// its log. The stream is decoded one record at a time: memory stays bounded
// by the largest record.
func WriteFullSnapshot(r io.Reader, w io.Writer, store BodyStore) error {
	dec := msgpack.NewDecoder(bufio.NewReaderSize(r, 1<<16))
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := msgpack.NewEncoder(bw)
	enc.UseCompactInts(true)
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("%w: header: %w", ErrSnapshotFormat, err)
	}
	legacy, err := snapReadable(&h)
	if err != nil {
		return err
	}
	rd := snapReader{dec: dec, form: h.Form, legacy: legacy}
	local := h.Form == formLocal
	h.Version, h.Form = snapshotVersionCompact, formFull
	if err := enc.Encode(&h); err != nil {
		return err
	}
	var out snapCodec
	for i := range h.Messages {
		var sm snapMessage
		if err := rd.message(&sm); err != nil {
			return fmt.Errorf("%w: message %d of %d: %w", ErrSnapshotFormat, i, h.Messages, err)
		}
		if sm.Seq <= out.seq && i > 0 || sm.Seq == 0 {
			return fmt.Errorf("%w: message %d of %d: seq %d after %d", ErrSnapshotFormat, i, h.Messages, sm.Seq, out.seq)
		}
		if local {
			if err := inlinePayload(&sm, store); err != nil {
				return err
			}
		}
		if err := out.encodeMessage(enc, &sm, formFull); err != nil {
			return err
		}
	}
	for i := range h.Dedup {
		var d snapDedup
		if err := rd.dedup(&d); err != nil {
			return fmt.Errorf("%w: dedup entry %d of %d: %w", ErrSnapshotFormat, i, h.Dedup, err)
		}
		if err := out.encodeDedup(enc, &d); err != nil {
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
