package wire

import (
	"fmt"
	"math"
	"time"
)

// The send request is the hottest payload: it is parsed from the bytes
// without the reflection of a msgpack decoder, with the same meaning
// (unknown keys skipped, nil as the zero value, the last of repeated keys
// wins).

// parseSendRequest decodes a SendRequest from one checked msgpack value.
// With shareBytes, message bodies are slices of data rather than copies.
func parseSendRequest(data []byte, r *SendRequest, shareBytes bool) error {
	*r = SendRequest{}
	c := &checker{data: data, shareBytes: shareBytes}
	return c.body(func(key string) error {
		var err error
		switch key {
		case "queue":
			r.Queue, err = c.str()
		case "partition":
			var v int64
			v, err = c.int()
			r.Partition = int(v)
		case "messages":
			r.Messages, err = c.messages()
		default:
			err = c.value(1)
		}
		return err
	})
}

// messages reads an array of Message; nil reads as nil.
func (c *checker) messages() ([]Message, error) {
	return array(c, "message", c.message)
}

// message reads one Message; nil reads as the zero Message.
func (c *checker) message(m *Message) error {
	return c.record(func(key string) error {
		var err error
		switch key {
		case "id":
			m.ID, err = c.str()
		case "group":
			m.Group, err = c.str()
		case "headers":
			m.Headers, err = c.strMap()
		case "body":
			m.Body, err = c.bin()
		case "delay":
			var v int64
			v, err = c.int()
			m.Delay = time.Duration(v)
		case "priority":
			var v int64
			if v, err = c.int(); err == nil {
				if v < 0 || v > PriorityMax {
					return Errorf(CodeInvalidArgument, "priority %d out of range 0..%d", v, PriorityMax)
				}
				m.Priority = Priority(v)
			}
		default:
			err = c.value(1)
		}
		return err
	})
}

// fields walks a map with string keys, calling field for each key to
// consume its value.
func (c *checker) fields(field func(key string) error) error {
	n, err := c.mapLen()
	if err != nil {
		return err
	}
	for range n {
		key, err := c.str()
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		if err := field(key); err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
	}
	return nil
}

// end fails unless the whole value was consumed.
func (c *checker) end() error {
	if c.pos != len(c.data) {
		return fmt.Errorf("%d trailing bytes after the value", len(c.data)-c.pos)
	}
	return nil
}

// body reads a whole request or answer body: a map walked by fields, or
// nil for the zero value, and nothing after it.
func (c *checker) body(field func(key string) error) error {
	if !c.nilNext() {
		if err := c.fields(field); err != nil {
			return err
		}
	}
	return c.end()
}

// record reads one map-shaped item walked by fields; nil reads as the zero
// item (field is not called).
func (c *checker) record(field func(key string) error) error {
	if c.nilNext() {
		return nil
	}
	return c.fields(field)
}

// array reads an array whose items item reads in place, naming a failed
// one by what and its index; nil reads as nil.
func array[T any](c *checker, what string, item func(*T) error) ([]T, error) {
	if c.nilNext() {
		return nil, nil
	}
	n, err := c.arrayLen()
	if err != nil {
		return nil, err
	}
	out := make([]T, n)
	for i := range out {
		if err := item(&out[i]); err != nil {
			return nil, fmt.Errorf("%s %d: %w", what, i, err)
		}
	}
	return out, nil
}

// nilNext consumes a nil and reports true if one is next.
func (c *checker) nilNext() bool {
	if c.left() > 0 && c.data[c.pos] == 0xc0 {
		c.pos++
		return true
	}
	return false
}

// arrayLen reads an array header.
func (c *checker) arrayLen() (int, error) {
	b, err := c.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case b >= 0x90 && b <= 0x9f:
		return int(b & 0x0f), nil
	case b == 0xdc:
		return c.length(2)
	case b == 0xdd:
		return c.length(4)
	}
	return 0, fmt.Errorf("expected an array, got byte %#x", b)
}

// int reads a signed integer that fits in an int64; nil reads as 0.
func (c *checker) int() (int64, error) {
	b, err := c.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case b <= 0x7f:
		return int64(b), nil
	case b >= 0xe0:
		return int64(int8(b)), nil
	case b == 0xc0:
		return 0, nil
	case b >= 0xcc && b <= 0xcf: // uint8..uint64
		v, err := c.fixed(1 << (b - 0xcc))
		if err == nil && v > math.MaxInt64 {
			err = fmt.Errorf("integer %d out of range", v)
		}
		return int64(v), err
	case b >= 0xd0 && b <= 0xd3: // int8..int64
		size := 1 << (b - 0xd0)
		v, err := c.fixed(size)
		shift := 64 - 8*size
		return int64(v<<shift) >> shift, err // sign-extend
	}
	return 0, fmt.Errorf("expected an integer, got byte %#x", b)
}

// bin reads a byte string (bin or str) as a fresh copy, or as a slice of
// the data (capacity cut to its length) when c.shareBytes; nil reads as
// nil.
func (c *checker) bin() ([]byte, error) {
	b, err := c.byte()
	if err != nil {
		return nil, err
	}
	var n int
	switch {
	case b == 0xc0:
		return nil, nil
	case b >= 0xa0 && b <= 0xbf:
		n = int(b & 0x1f)
	case b == 0xc4, b == 0xc5, b == 0xc6:
		n, err = c.length(1 << (b - 0xc4))
	case b == 0xd9, b == 0xda, b == 0xdb:
		n, err = c.length(1 << (b - 0xd9))
	default:
		return nil, fmt.Errorf("expected bytes, got byte %#x", b)
	}
	if err != nil {
		return nil, err
	}
	start := c.pos
	if err := c.skip(n); err != nil {
		return nil, err
	}
	if c.shareBytes {
		return c.data[start:c.pos:c.pos], nil
	}
	out := make([]byte, n)
	copy(out, c.data[start:c.pos])
	return out, nil
}

// strMap reads a map of strings to strings; nil reads as nil.
func (c *checker) strMap() (map[string]string, error) {
	if c.nilNext() {
		return nil, nil
	}
	n, err := c.mapLen()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, n)
	for range n {
		k, err := c.str()
		if err != nil {
			return nil, err
		}
		v, err := c.str()
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// parseSendResponse decodes a SendResponse from one checked msgpack value,
// as reflection would, without it: it is the answer a producer decodes
// most.
func parseSendResponse(data []byte, r *SendResponse) error {
	*r = SendResponse{}
	c := &checker{data: data}
	return c.body(func(key string) error {
		if key != "results" {
			return c.value(1)
		}
		var err error
		r.Results, err = c.sendResults()
		return err
	})
}

// sendResults reads an array of SendResult; nil reads as nil.
func (c *checker) sendResults() ([]SendResult, error) {
	return array(c, "result", c.sendResult)
}

// sendResult reads one SendResult; nil reads as the zero result.
func (c *checker) sendResult(r *SendResult) error {
	return c.record(func(key string) error {
		var err error
		switch key {
		case "seq":
			r.Seq, err = c.uint(math.MaxUint64)
		case "dup":
			r.Duplicate, err = c.bool()
		case "code":
			var v uint64
			v, err = c.uint(math.MaxUint16)
			r.Code = Code(v)
		case "error":
			r.Error, err = c.str()
		default:
			err = c.value(1)
		}
		return err
	})
}

// bool reads a boolean; nil reads as false.
func (c *checker) bool() (bool, error) {
	b, err := c.byte()
	switch {
	case err != nil:
		return false, err
	case b == 0xc3:
		return true, nil
	case b == 0xc2, b == 0xc0:
		return false, nil
	}
	return false, fmt.Errorf("expected a boolean, got byte %#x", b)
}
