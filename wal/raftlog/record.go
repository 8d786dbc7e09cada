package raftlog

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Sizes of the wal framing this package relies on (see package wal's
// documentation of the format).
const (
	walSegmentHeaderBytes = 16
	walRecordHeaderBytes  = 16
)

// Record kinds: the first payload byte. Append-only; never renumber.
const (
	// kindEntry is one raft log entry of a group.
	kindEntry byte = 1
	// kindTruncate says: entries of the group with an index above the
	// record's value and a lower write sequence are gone.
	kindTruncate byte = 2
	// kindPrefix says: entries of the group with an index below the
	// record's value and a lower write sequence are gone.
	kindPrefix byte = 3
	// kindKept is an entry raft no longer holds, copied forward by
	// compaction only because a Retention kept it. Never part of a log.
	kindKept byte = 4
	// kindStable is one key of a group's raft stable store (term, vote):
	// of a group's records with the same key, the highest write sequence
	// holds the value.
	kindStable byte = 5
)

// Layout of a record payload. The wal record key is the write sequence.
//
//	entry, kept: [kind 1][group 4][index 8][term 8][type 1][appendedAt 8]
//	             [dataLen 4][extLen 4][data][extensions]
//	truncate, prefix: [kind 1][group 4][value 8]
//	stable: [kind 1][group 4][keyLen 1][valueLen 2][key][value]
const (
	entryHeaderBytes  = 38
	markerBytes       = 13
	stableHeaderBytes = 8
	entryDataOffset   = entryHeaderBytes
	scanPrefixBytes   = entryHeaderBytes
	lastKnownLogType  = raft.LogConfiguration
	zeroAppendedAtRaw = 0
)

// recHeader is the decoded fixed part of a record payload.
type recHeader struct {
	kind       byte
	group      uint32
	index      uint64 // entry index, or a marker's value
	term       uint64
	logType    raft.LogType
	appendedAt int64
	dataLen    uint32
	extLen     uint32
}

// isEntryKind reports whether kind carries an entry layout.
func isEntryKind(kind byte) bool {
	return kind == kindEntry || kind == kindKept
}

// encodeEntry appends the payload of entry l of group to dst.
func encodeEntry(dst []byte, kind byte, group uint32, l *raft.Log) []byte {
	var h [entryHeaderBytes]byte
	h[0] = kind
	binary.LittleEndian.PutUint32(h[1:5], group)
	binary.LittleEndian.PutUint64(h[5:13], l.Index)
	binary.LittleEndian.PutUint64(h[13:21], l.Term)
	h[21] = byte(l.Type)
	at := int64(zeroAppendedAtRaw)
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.LittleEndian.PutUint64(h[22:30], uint64(at))
	binary.LittleEndian.PutUint32(h[30:34], uint32(len(l.Data)))
	binary.LittleEndian.PutUint32(h[34:38], uint32(len(l.Extensions)))
	dst = append(dst, h[:]...)
	dst = append(dst, l.Data...)
	return append(dst, l.Extensions...)
}

// encodeMarker appends the payload of a truncate or prefix marker.
func encodeMarker(dst []byte, kind byte, group uint32, value uint64) []byte {
	var b [markerBytes]byte
	b[0] = kind
	binary.LittleEndian.PutUint32(b[1:5], group)
	binary.LittleEndian.PutUint64(b[5:13], value)
	return append(dst, b[:]...)
}

// decodeHeader decodes and range-checks the fixed part of a record payload
// from its first bytes (prefix) and its full length (payloadBytes).
func decodeHeader(prefix []byte, payloadBytes int) (recHeader, error) {
	var h recHeader
	if len(prefix) < 5 {
		return h, fmt.Errorf("payload of %d bytes is too short for a record", payloadBytes)
	}
	h.kind = prefix[0]
	h.group = binary.LittleEndian.Uint32(prefix[1:5])
	if h.group == 0 {
		return h, fmt.Errorf("group id 0")
	}
	switch {
	case h.kind == kindTruncate || h.kind == kindPrefix:
		if payloadBytes != markerBytes || len(prefix) < markerBytes {
			return h, fmt.Errorf("marker payload is %d bytes, want %d", payloadBytes, markerBytes)
		}
		h.index = binary.LittleEndian.Uint64(prefix[5:13])
		return h, nil
	case isEntryKind(h.kind):
		return decodeEntryHeader(h, prefix, payloadBytes)
	case h.kind == kindStable:
		return decodeStableHeader(h, prefix, payloadBytes)
	}
	return h, fmt.Errorf("unknown record kind %d", h.kind)
}

// decodeEntryHeader decodes the rest of an entry header.
func decodeEntryHeader(h recHeader, prefix []byte, payloadBytes int) (recHeader, error) {
	if len(prefix) < entryHeaderBytes || payloadBytes < entryHeaderBytes {
		return h, fmt.Errorf("entry payload is %d bytes, shorter than its %d-byte header", payloadBytes, entryHeaderBytes)
	}
	h.index = binary.LittleEndian.Uint64(prefix[5:13])
	h.term = binary.LittleEndian.Uint64(prefix[13:21])
	h.logType = raft.LogType(prefix[21])
	h.appendedAt = int64(binary.LittleEndian.Uint64(prefix[22:30]))
	h.dataLen = binary.LittleEndian.Uint32(prefix[30:34])
	h.extLen = binary.LittleEndian.Uint32(prefix[34:38])
	if h.index == 0 {
		return h, fmt.Errorf("entry index 0")
	}
	if h.logType > lastKnownLogType {
		return h, fmt.Errorf("entry type %d unknown", h.logType)
	}
	if want := int64(entryHeaderBytes) + int64(h.dataLen) + int64(h.extLen); want != int64(payloadBytes) {
		return h, fmt.Errorf("entry lengths (data %d, extensions %d) disagree with the %d-byte payload", h.dataLen, h.extLen, payloadBytes)
	}
	return h, nil
}

// decodeEntry decodes a whole entry payload into l. Data and Extensions
// alias payload (nil when empty).
func decodeEntry(payload []byte, l *raft.Log) (recHeader, error) {
	h, err := decodeHeader(payload, len(payload))
	if err != nil {
		return h, err
	}
	if !isEntryKind(h.kind) {
		return h, fmt.Errorf("record kind %d is not an entry", h.kind)
	}
	data := payload[entryHeaderBytes : entryHeaderBytes+int(h.dataLen)]
	ext := payload[entryHeaderBytes+int(h.dataLen):]
	*l = raft.Log{Index: h.index, Term: h.term, Type: h.logType}
	if len(data) > 0 {
		l.Data = data[:len(data):len(data)]
	}
	if len(ext) > 0 {
		l.Extensions = ext[:len(ext):len(ext)]
	}
	if h.appendedAt != zeroAppendedAtRaw {
		l.AppendedAt = time.Unix(0, h.appendedAt)
	}
	return h, nil
}
