package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var errTruncatedMsgpack = errors.New("msgpack value cut short")

// checkMsgpackCounts walks the msgpack values in p and fails if an array or
// map claims more elements than bytes are left to hold them (every element
// takes at least one byte) or if a value is cut short. The reflection-based
// decoder allocates a slice for the claimed length before reading the
// elements; running this first bounds what a corrupted entry can make it
// allocate by the entry's size.
func checkMsgpackCounts(p []byte) error {
	pending := 1 // values still to read
	for len(p) > 0 && pending > 0 {
		pending--
		c := p[0]
		p = p[1:]
		var count, skip int
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3: // fixints, nil, bools
		case c >= 0x80 && c <= 0x8f:
			count = 2 * int(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			count = int(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			skip = int(c & 0x1f)
		default:
			var err error
			if p, count, skip, err = msgpackHead(c, p); err != nil {
				return err
			}
		}
		if count > len(p) {
			return fmt.Errorf("msgpack container claims %d elements with %d bytes left", count, len(p))
		}
		if skip > len(p) {
			return errTruncatedMsgpack
		}
		p = p[skip:]
		pending += count
	}
	if pending > 0 {
		return errTruncatedMsgpack
	}
	return nil
}

// msgpackHead decodes the rest of the head of a value whose first byte c is
// not a fixed-size form: it returns p after the head, the element count of
// a container and the byte length of a string, binary, ext or number.
func msgpackHead(c byte, p []byte) (rest []byte, count, skip int, err error) {
	size := func(n int) (int, bool) {
		if len(p) < n {
			return 0, false
		}
		var v uint64
		switch n {
		case 1:
			v = uint64(p[0])
		case 2:
			v = uint64(binary.BigEndian.Uint16(p))
		case 4:
			v = uint64(binary.BigEndian.Uint32(p))
		}
		p = p[n:]
		return int(v), true
	}
	ok := true
	switch c {
	case 0xcc, 0xd0:
		skip = 1
	case 0xcd, 0xd1:
		skip = 2
	case 0xca, 0xce, 0xd2:
		skip = 4
	case 0xcb, 0xcf, 0xd3:
		skip = 8
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: type byte and 1..16 bytes
		skip = 1 + 1<<(c-0xd4)
	case 0xc4, 0xd9:
		skip, ok = size(1)
	case 0xc5, 0xda:
		skip, ok = size(2)
	case 0xc6, 0xdb:
		skip, ok = size(4)
	case 0xc7, 0xc8, 0xc9: // ext: length, type byte, data
		skip, ok = size(1 << (c - 0xc7))
		skip++
	case 0xdc:
		count, ok = size(2)
	case 0xdd:
		count, ok = size(4)
	case 0xde:
		count, ok = size(2)
		count *= 2
	case 0xdf:
		count, ok = size(4)
		count *= 2
	default: // 0xc1 is never used
		return nil, 0, 0, fmt.Errorf("msgpack code 0x%02x", c)
	}
	if !ok {
		return nil, 0, 0, errTruncatedMsgpack
	}
	return p, count, skip, nil
}
