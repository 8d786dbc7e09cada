package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Pos names one record: the number of its segment and the byte offset of
// the record's first byte in that segment file. The zero Pos names no
// record (segment numbers start at 1).
type Pos struct {
	Segment uint32
	Offset  uint32
}

// String formats p as "seg 3 @ 4096".
func (p Pos) String() string {
	return fmt.Sprintf("seg %d @ %d", p.Segment, p.Offset)
}

// IsZero reports whether p is the zero Pos, which names no record.
func (p Pos) IsZero() bool {
	return p == Pos{}
}

// Format constants; doc.go describes the layout.
const (
	segmentMagic              = "FERRYWAL"
	formatVersion      uint32 = 1
	segmentHeaderBytes        = 16
	recordHeaderBytes         = 16
	// checksumSeedBytes is the part of the record header the checksum
	// covers: the length and the key.
	checksumSeedBytes = 12
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// encodeSegmentHeader returns the header of segment num.
func encodeSegmentHeader(num uint32) [segmentHeaderBytes]byte {
	var b [segmentHeaderBytes]byte
	copy(b[:8], segmentMagic)
	binary.LittleEndian.PutUint32(b[8:12], formatVersion)
	binary.LittleEndian.PutUint32(b[12:16], num)
	return b
}

// checkSegmentHeader returns a description of what is wrong with b as the
// header of segment num, or "" if it is right.
func checkSegmentHeader(b []byte, num uint32) string {
	if len(b) < segmentHeaderBytes {
		return fmt.Sprintf("segment header is %d bytes, want %d", len(b), segmentHeaderBytes)
	}
	if string(b[:8]) != segmentMagic {
		return fmt.Sprintf("bad segment magic %q", b[:8])
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != formatVersion {
		return fmt.Sprintf("unsupported format version %d", v)
	}
	if n := binary.LittleEndian.Uint32(b[12:16]); n != num {
		return fmt.Sprintf("header names segment %d, file name says %d", n, num)
	}
	return ""
}

// recordHeader is the decoded fixed part of a record.
type recordHeader struct {
	length   uint32
	checksum uint32
	key      uint64
}

// parseRecordHeader decodes the first recordHeaderBytes of b.
func parseRecordHeader(b []byte) recordHeader {
	return recordHeader{
		length:   binary.LittleEndian.Uint32(b[0:4]),
		checksum: binary.LittleEndian.Uint32(b[4:8]),
		key:      binary.LittleEndian.Uint64(b[8:16]),
	}
}

// seed returns the checksum state after the length and key fields; the
// payload is folded in with crc32.Update.
func (h recordHeader) seed() uint32 {
	var b [checksumSeedBytes]byte
	binary.LittleEndian.PutUint32(b[0:4], h.length)
	binary.LittleEndian.PutUint64(b[4:12], h.key)
	return crc32.Update(0, crcTable, b[:])
}

// crc32Payload returns the checksum of a record with header h and payload.
func crc32Payload(h recordHeader, payload []byte) uint32 {
	return crc32.Update(h.seed(), crcTable, payload)
}

// recordBytes is the size on disk of a record with payloadBytes of payload.
func recordBytes(payloadBytes int) int64 {
	return recordHeaderBytes + int64(payloadBytes)
}

// encodeRecordHeader fills dst with the header of a record holding key and
// payload.
func encodeRecordHeader(dst *[recordHeaderBytes]byte, key uint64, payload []byte) {
	h := recordHeader{length: uint32(len(payload)), key: key}
	sum := crc32Payload(h, payload)
	binary.LittleEndian.PutUint32(dst[0:4], h.length)
	binary.LittleEndian.PutUint32(dst[4:8], sum)
	binary.LittleEndian.PutUint64(dst[8:16], key)
}

// encodeRecord appends the encoding of one record to dst.
func encodeRecord(dst []byte, key uint64, payload []byte) []byte {
	var h [recordHeaderBytes]byte
	encodeRecordHeader(&h, key, payload)
	return append(append(dst, h[:]...), payload...)
}

// Reasons a record fails to decode.
var (
	errShortRecord    = errors.New("record runs past the end of the data")
	errRecordTooLong  = errors.New("record length exceeds the limit")
	errChecksumFailed = errors.New("record checksum mismatch")
)

// decodeRecord decodes the record at the start of b. A payload longer than
// lengthMax is rejected without reading it. On success payload aliases b
// and n is the record's size.
func decodeRecord(b []byte, lengthMax int) (key uint64, payload []byte, n int, err error) {
	if len(b) < recordHeaderBytes {
		return 0, nil, 0, errShortRecord
	}
	h := parseRecordHeader(b)
	if uint64(h.length) > uint64(lengthMax) {
		return 0, nil, 0, errRecordTooLong
	}
	n = recordHeaderBytes + int(h.length)
	if len(b) < n {
		return 0, nil, 0, errShortRecord
	}
	payload = b[recordHeaderBytes:n]
	if crc32Payload(h, payload) != h.checksum {
		return 0, nil, 0, errChecksumFailed
	}
	return h.key, payload, n, nil
}

// frameError describes a record that could not be parsed while scanning a
// segment; callers turn it into ErrCorrupt or a torn-tail truncation.
type frameError struct {
	offset int64
	reason string
}

func (e *frameError) Error() string {
	return fmt.Sprintf("offset %d: %s", e.offset, e.reason)
}

// corruptf returns an ErrCorrupt naming segment num and offset.
func corruptf(num uint32, offset int64, format string, args ...any) error {
	return fmt.Errorf("%w: segment %d offset %d: %s", ErrCorrupt, num, offset, fmt.Sprintf(format, args...))
}
