package wire

import (
	"encoding/binary"
	"fmt"
)

// Structural limits every decoded payload must respect. They are checked
// before any value is decoded, so a hostile payload cannot make the decoder
// preallocate a huge slice or recurse without bound.
const (
	// MaxItems is the most entries one msgpack array or map in a payload
	// may declare. It is far above every batch limit of the server.
	MaxItems = 1 << 17
	// MaxNesting is the deepest nesting of arrays and maps a payload may
	// have, counting the frame's own envelope.
	MaxNesting = 32
)

// checkValue verifies that data holds exactly one well-formed msgpack value
// within the structural limits. It allocates nothing and runs in time linear
// in len(data): every declared container length is checked against the
// bytes left before the container is walked.
func checkValue(data []byte) error {
	c := checker{data: data}
	if err := c.value(0); err != nil {
		return err
	}
	if c.pos != len(c.data) {
		return fmt.Errorf("%d trailing bytes after the value", len(c.data)-c.pos)
	}
	return nil
}

type checker struct {
	data []byte
	pos  int
	// shareBytes lets bin return slices of data instead of copies: set
	// only when data belongs to the decoded value for good (a Request's
	// Body, never a Reader's reused buffer).
	shareBytes bool
}

func (c *checker) left() int { return len(c.data) - c.pos }

// skip advances over n bytes of scalar payload.
func (c *checker) skip(n int) error {
	if n < 0 || n > c.left() {
		return fmt.Errorf("value of %d bytes at offset %d overruns the payload", n, c.pos)
	}
	c.pos += n
	return nil
}

// length reads a big-endian length of size 1, 2 or 4 bytes.
func (c *checker) length(size int) (int, error) {
	if size > c.left() {
		return 0, fmt.Errorf("truncated length at offset %d", c.pos)
	}
	b := c.data[c.pos : c.pos+size]
	c.pos += size
	switch size {
	case 1:
		return int(b[0]), nil
	case 2:
		return int(binary.BigEndian.Uint16(b)), nil
	default:
		return int(binary.BigEndian.Uint32(b)), nil
	}
}

// value checks one value at the given nesting depth.
func (c *checker) value(depth int) error {
	if c.left() < 1 {
		return fmt.Errorf("truncated value at offset %d", c.pos)
	}
	b := c.data[c.pos]
	c.pos++
	switch {
	case b <= 0x7f || b >= 0xe0: // positive and negative fixint
		return nil
	case b <= 0x8f: // fixmap
		return c.container(int(b&0x0f), 2, depth)
	case b <= 0x9f: // fixarray
		return c.container(int(b&0x0f), 1, depth)
	case b <= 0xbf: // fixstr
		return c.skip(int(b & 0x1f))
	}
	return c.tagged(b, depth)
}

// tagged checks a value whose first byte is in 0xc0..0xdf.
func (c *checker) tagged(b byte, depth int) error {
	switch b {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
		return nil
	case 0xcc, 0xd0: // uint8, int8
		return c.skip(1)
	case 0xcd, 0xd1: // uint16, int16
		return c.skip(2)
	case 0xca, 0xce, 0xd2: // float32, uint32, int32
		return c.skip(4)
	case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
		return c.skip(8)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16 plus type byte
		return c.skip(1 + 1<<(b-0xd4))
	case 0xc4, 0xd9: // bin8, str8
		return c.sized(1, 0)
	case 0xc5, 0xda: // bin16, str16
		return c.sized(2, 0)
	case 0xc6, 0xdb: // bin32, str32
		return c.sized(4, 0)
	case 0xc7: // ext8
		return c.sized(1, 1)
	case 0xc8: // ext16
		return c.sized(2, 1)
	case 0xc9: // ext32
		return c.sized(4, 1)
	case 0xdc, 0xdd: // array16, array32
		n, err := c.length(2 << (b - 0xdc))
		if err != nil {
			return err
		}
		return c.container(n, 1, depth)
	case 0xde, 0xdf: // map16, map32
		n, err := c.length(2 << (b - 0xde))
		if err != nil {
			return err
		}
		return c.container(n, 2, depth)
	}
	return fmt.Errorf("invalid msgpack byte %#x at offset %d", b, c.pos-1)
}

// sized skips a length-prefixed value with extra header bytes (the ext type).
func (c *checker) sized(lenSize, extra int) error {
	n, err := c.length(lenSize)
	if err != nil {
		return err
	}
	return c.skip(n + extra)
}

// container checks n entries of per values each (1 for arrays, 2 for maps).
func (c *checker) container(n, per, depth int) error {
	if depth+1 > MaxNesting {
		return fmt.Errorf("nesting deeper than %d at offset %d", MaxNesting, c.pos)
	}
	if n > MaxItems {
		return fmt.Errorf("container of %d entries exceeds %d", n, MaxItems)
	}
	if n*per > c.left() {
		return fmt.Errorf("container of %d entries overruns the payload at offset %d", n, c.pos)
	}
	for i := 0; i < n*per; i++ {
		if err := c.value(depth + 1); err != nil {
			return err
		}
	}
	return nil
}
