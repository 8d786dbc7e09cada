package wal

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
)

// scannedRecord is one record found by a recordScanner.
type scannedRecord struct {
	offset       int64
	key          uint64
	payloadBytes int
	// payload is set only when the scanner keeps payloads, and is valid
	// until the next call to next.
	payload []byte
	// prefix holds the first bytes of the payload when the scanner was
	// asked for them (prefixBytes), valid until the next call to next.
	prefix []byte
}

// size is the record's size on disk.
func (r scannedRecord) size() int64 {
	return recordBytes(r.payloadBytes)
}

// recordScanner walks the records of one segment in order, verifying each
// checksum. Lengths are bounded only by the bytes left in the segment, so a
// log written with a larger Config.RecordBytesMax still opens.
type recordScanner struct {
	r           *bufio.Reader
	offset      int64 // offset of the next record
	end         int64
	keepPayload bool
	scratch     []byte
	// prefixBytes, when positive and payloads are not kept, makes next
	// copy up to that many leading payload bytes into scannedRecord.prefix.
	prefixBytes int
	prefixBuf   []byte
}

// newRecordScanner scans ra from start (just after the segment header) to
// end (the segment's size).
func newRecordScanner(ra io.ReaderAt, start, end int64, keepPayload bool) *recordScanner {
	bufBytes := int(min(max(end-start, recordHeaderBytes), scanBufferBytes))
	return &recordScanner{
		r:           bufio.NewReaderSize(io.NewSectionReader(ra, start, end-start), bufBytes),
		offset:      start,
		end:         end,
		keepPayload: keepPayload,
	}
}

// next returns the next record; io.EOF at a clean end, a *frameError for a
// record that does not parse, or the underlying read error.
func (s *recordScanner) next() (scannedRecord, error) {
	left := s.end - s.offset
	if left == 0 {
		return scannedRecord{}, io.EOF
	}
	if left < recordHeaderBytes {
		return scannedRecord{}, &frameError{s.offset, fmt.Sprintf("%d bytes left, too few for a record header", left)}
	}
	b, err := s.r.Peek(recordHeaderBytes)
	if err != nil {
		return scannedRecord{}, s.readError(err)
	}
	h := parseRecordHeader(b)
	if int64(h.length) > left-recordHeaderBytes {
		return scannedRecord{}, &frameError{s.offset, fmt.Sprintf(
			"record length %d runs past the end of the segment (%d bytes left)", h.length, left-recordHeaderBytes)}
	}
	if _, err := s.r.Discard(recordHeaderBytes); err != nil {
		return scannedRecord{}, s.readError(err)
	}
	rec := scannedRecord{offset: s.offset, key: h.key, payloadBytes: int(h.length)}
	sum := h.seed()
	if s.keepPayload {
		if cap(s.scratch) < rec.payloadBytes {
			s.scratch = make([]byte, rec.payloadBytes)
		}
		rec.payload = s.scratch[:rec.payloadBytes]
		if _, err := io.ReadFull(s.r, rec.payload); err != nil {
			return scannedRecord{}, s.readError(err)
		}
		sum = crc32.Update(sum, crcTable, rec.payload)
	} else {
		if s.prefixBytes > 0 {
			if rec.prefix, err = s.peekPrefix(rec.payloadBytes); err != nil {
				return scannedRecord{}, s.readError(err)
			}
		}
		if sum, err = s.checksumPayload(sum, rec.payloadBytes); err != nil {
			return scannedRecord{}, s.readError(err)
		}
	}
	if sum != h.checksum {
		return scannedRecord{}, &frameError{s.offset, "record checksum mismatch"}
	}
	s.offset += rec.size()
	return rec, nil
}

// peekPrefix copies up to prefixBytes leading bytes of a payload of
// payloadBytes without consuming them.
func (s *recordScanner) peekPrefix(payloadBytes int) ([]byte, error) {
	n := min(s.prefixBytes, payloadBytes, s.r.Size())
	b, err := s.r.Peek(n)
	if err != nil {
		return nil, err
	}
	s.prefixBuf = append(s.prefixBuf[:0], b...)
	return s.prefixBuf, nil
}

// checksumPayload folds the next n bytes into sum without copying them.
func (s *recordScanner) checksumPayload(sum uint32, n int) (uint32, error) {
	for n > 0 {
		chunk := min(n, s.r.Size())
		b, err := s.r.Peek(chunk)
		if err != nil {
			return sum, err
		}
		sum = crc32.Update(sum, crcTable, b)
		if _, err := s.r.Discard(chunk); err != nil {
			return sum, err
		}
		n -= chunk
	}
	return sum, nil
}

// readError turns a short read (the file shrank under the scanner) into a
// descriptive error; other errors pass through.
func (s *recordScanner) readError(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("wal: segment ended early near offset %d (expected %d bytes): %w", s.offset, s.end, io.ErrUnexpectedEOF)
	}
	return err
}

// tailSearchBudgetBytes bounds the payload bytes findValidRecord may
// checksum. Payloads full of small little-endian integers can make many
// positions look like plausible record headers; past the budget recovery
// gives up and reports corruption, which is the safe answer.
const tailSearchBudgetBytes = 256 << 20

// findValidRecord returns the index of the first position in data at which
// a whole record with a matching checksum and a payload of at most
// lengthMax bytes starts, or -1. exhausted is set, with -1, when the search
// would checksum more than budgetBytes without an answer.
func findValidRecord(data []byte, lengthMax int, budgetBytes int64) (index int, exhausted bool) {
	for p := 0; p+recordHeaderBytes <= len(data); p++ {
		h := parseRecordHeader(data[p:])
		if uint64(h.length) > uint64(lengthMax) || int64(h.length) > int64(len(data)-p-recordHeaderBytes) {
			continue
		}
		if budgetBytes -= int64(h.length); budgetBytes < 0 {
			return -1, true
		}
		if _, _, _, err := decodeRecord(data[p:], lengthMax); err == nil {
			return p, false
		}
	}
	return -1, false
}
