package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// The envelopes are parsed straight from the payload bytes: the body is
// located by a structural skip and copied once, instead of being re-recorded
// byte by byte by a msgpack decoder. The payload has passed checkValue, but
// every read is still bounds-checked.

// parseRequest decodes a Request envelope from one checked msgpack value.
func parseRequest(data []byte, r *Request) error {
	*r = Request{}
	return parseEnvelope(data, func(c *checker, key string) error {
		var err error
		switch key {
		case "id":
			r.ID, err = c.uint(1<<64 - 1)
		case "op":
			var n uint64
			n, err = c.uint(0xff)
			r.Op = Op(n)
		case "body":
			r.Body, err = c.raw()
		default:
			err = c.value(1)
		}
		return err
	})
}

// parseResponse decodes a Response envelope from one checked msgpack value.
func parseResponse(data []byte, r *Response) error {
	*r = Response{}
	return parseEnvelope(data, func(c *checker, key string) error {
		var err error
		switch key {
		case "id":
			r.ID, err = c.uint(1<<64 - 1)
		case "code":
			var n uint64
			n, err = c.uint(0xffff)
			r.Code = Code(n)
		case "error":
			r.Error, err = c.str()
		case "leader":
			r.Leader, err = c.str()
		case "body":
			r.Body, err = c.raw()
		default:
			err = c.value(1)
		}
		return err
	})
}

// parseEnvelope walks a map with string keys, calling field for each key
// to consume its value.
func parseEnvelope(data []byte, field func(c *checker, key string) error) error {
	c := &checker{data: data}
	n, err := c.mapLen()
	if err != nil {
		return err
	}
	for range n {
		key, err := c.str()
		if err != nil {
			return fmt.Errorf("envelope key: %w", err)
		}
		if err := field(c, key); err != nil {
			return fmt.Errorf("envelope field %q: %w", key, err)
		}
	}
	if c.pos != len(data) {
		return fmt.Errorf("%d trailing bytes after the envelope", len(data)-c.pos)
	}
	return nil
}

// mapLen reads a map header.
func (c *checker) mapLen() (int, error) {
	b, err := c.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case b >= 0x80 && b <= 0x8f:
		return int(b & 0x0f), nil
	case b == 0xde:
		return c.length(2)
	case b == 0xdf:
		return c.length(4)
	}
	return 0, fmt.Errorf("envelope is not a map (byte %#x)", b)
}

// str reads a string; nil reads as "".
func (c *checker) str() (string, error) {
	b, err := c.byte()
	if err != nil {
		return "", err
	}
	var n int
	switch {
	case b == 0xc0:
		return "", nil
	case b >= 0xa0 && b <= 0xbf:
		n = int(b & 0x1f)
	case b == 0xd9, b == 0xda, b == 0xdb:
		if n, err = c.length(1 << (b - 0xd9)); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("expected a string, got byte %#x", b)
	}
	start := c.pos
	if err := c.skip(n); err != nil {
		return "", err
	}
	return string(c.data[start:c.pos]), nil
}

// uint reads a non-negative integer of at most limit; nil reads as 0.
func (c *checker) uint(limit uint64) (uint64, error) {
	b, err := c.byte()
	if err != nil {
		return 0, err
	}
	var v uint64
	switch {
	case b <= 0x7f:
		v = uint64(b)
	case b == 0xc0:
		v = 0
	case b >= 0xcc && b <= 0xcf: // uint8..uint64
		v, err = c.fixed(1 << (b - 0xcc))
	case b >= 0xd0 && b <= 0xd3: // int8..int64, accepted when not negative
		size := 1 << (b - 0xd0)
		v, err = c.fixed(size)
		if err == nil && v>>(8*size-1) != 0 {
			err = fmt.Errorf("negative integer")
		}
	default:
		err = fmt.Errorf("expected an unsigned integer, got byte %#x", b)
	}
	if err == nil && v > limit {
		err = fmt.Errorf("integer %d out of range", v)
	}
	return v, err
}

// fixed reads a big-endian integer of 1, 2, 4 or 8 bytes.
func (c *checker) fixed(size int) (uint64, error) {
	if size > c.left() {
		return 0, fmt.Errorf("truncated integer at offset %d", c.pos)
	}
	b := c.data[c.pos : c.pos+size]
	c.pos += size
	switch size {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), nil
	}
	return binary.BigEndian.Uint64(b), nil
}

// raw returns a copy of the next value's bytes; nil reads as an empty body.
func (c *checker) raw() ([]byte, error) {
	start := c.pos
	if err := c.value(1); err != nil {
		return nil, err
	}
	if c.pos == start+1 && c.data[start] == 0xc0 {
		return nil, nil
	}
	return bytes.Clone(c.data[start:c.pos]), nil
}

// byte reads one byte.
func (c *checker) byte() (byte, error) {
	if c.left() < 1 {
		return 0, fmt.Errorf("truncated value at offset %d", c.pos)
	}
	c.pos++
	return c.data[c.pos-1], nil
}
