package wal

import (
	"fmt"
	"hash/crc32"
	"os"
)

// Zero tails. A pre-written segment (Config.PreallocateSegments) left by a
// crash holds its records followed by zeros up to the file end. Recovery
// finds where the non-zero bytes end with bounded reads from the file end,
// and searches for valid records after damage only in the bytes before
// that point, treating the rest as the zeros it is: no zero tail is read
// into memory whole, and zeros cost the search no budget.

// dataEnd returns the offset just after the last non-zero byte of f in
// [from, size), or from if that range is all zeros. It reads backwards in
// chunks of zeroCheckBytes.
func dataEnd(f *os.File, from, size int64) (int64, error) {
	buf := make([]byte, zeroCheckBytes)
	for end := size; end > from; {
		start := max(from, end-zeroCheckBytes)
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil {
			return 0, fmt.Errorf("wal: read segment file at offset %d: %w", start, err)
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != 0 {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return from, nil
}

// zeroBlock is a source of zeros for checksumming a zero tail.
var zeroBlock [4 << 10]byte

// findValidRecordZeroTail is findValidRecord over data followed by
// zeroBytes zeros that are not in memory. A position in the zeros cannot
// start a valid record (an all-zero header fails its checksum), so only
// positions within data are tried; a record starting there may run into
// the zeros.
func findValidRecordZeroTail(data []byte, zeroBytes int64, lengthMax int, budgetBytes int64) (index int, exhausted bool) {
	total := int64(len(data)) + zeroBytes
	for p := 0; p < len(data) && int64(p)+recordHeaderBytes <= total; p++ {
		var hb [recordHeaderBytes]byte
		copy(hb[:], data[p:])
		h := parseRecordHeader(hb[:])
		if uint64(h.length) > uint64(lengthMax) || int64(h.length) > total-int64(p)-recordHeaderBytes {
			continue
		}
		if budgetBytes -= int64(h.length); budgetBytes < 0 {
			return -1, true
		}
		if zeroTailChecksum(h, data[min(p+recordHeaderBytes, len(data)):], int64(h.length)) == h.checksum {
			return p, false
		}
	}
	return -1, false
}

// zeroTailChecksum returns the checksum of a record with header h whose
// payload of length bytes is the start of rest followed by zeros.
func zeroTailChecksum(h recordHeader, rest []byte, length int64) uint32 {
	inMemory := rest[:min(int64(len(rest)), length)]
	sum := crc32.Update(h.seed(), crcTable, inMemory)
	for left := length - int64(len(inMemory)); left > 0; {
		n := min(left, int64(len(zeroBlock)))
		sum = crc32.Update(sum, crcTable, zeroBlock[:n])
		left -= n
	}
	return sum
}

// zeroTailReason describes a tail that holds only zeros.
const zeroTailReason = "zero-filled tail after the last record (a pre-written segment, or a size extended without its data)"
