package wire

import (
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Integer fields narrower than 64 bits, and unsigned fields, are decoded by
// the functions below: a value out of the field's range is refused with a
// CodeInvalidArgument Error instead of being truncated or wrapped (an
// attempt of 2^32+1 must not read as attempt 1, a sequence number of -1 not
// as 2^64-1).

// decodeUintMax reads a non-negative integer of at most limit into a uint64.
func decodeUintMax(d *msgpack.Decoder, field string, limit uint64) (uint64, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, err
	}
	if msgpcode.IsFixedNum(c) && int8(c) < 0 || c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64 {
		n, err := d.DecodeInt64()
		if err != nil {
			return 0, err
		}
		if n < 0 {
			return 0, Errorf(CodeInvalidArgument, "%s %d is negative", field, n)
		}
		return checkUint(field, uint64(n), limit)
	}
	n, err := d.DecodeUint64()
	if err != nil {
		return 0, err
	}
	return checkUint(field, n, limit)
}

func checkUint(field string, n, limit uint64) (uint64, error) {
	if n > limit {
		return 0, Errorf(CodeInvalidArgument, "%s %d out of range (at most %d)", field, n, limit)
	}
	return n, nil
}

// decodeInt reads a signed integer that fits in an int64 (a uint64 above
// math.MaxInt64 is refused rather than read as a negative number).
func decodeInt(d *msgpack.Decoder, field string) (int64, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Uint64 {
		n, err := d.DecodeUint64()
		if err != nil {
			return 0, err
		}
		if n > math.MaxInt64 {
			return 0, Errorf(CodeInvalidArgument, "%s %d out of range", field, n)
		}
		return int64(n), nil
	}
	return d.DecodeInt64()
}

// decodeFields reads a msgpack map of string keys, calling field for each
// key; field reports false for a key it does not know, which is skipped (so
// newer peers may add fields). A nil value leaves everything at zero.
func decodeFields(d *msgpack.Decoder, field func(key string) (bool, error)) error {
	n, err := d.DecodeMapLen()
	if err != nil {
		return err
	}
	for range max(n, 0) {
		key, err := d.DecodeString()
		if err != nil {
			return err
		}
		known, err := field(key)
		if err != nil {
			return err
		}
		if !known {
			if err := d.Skip(); err != nil {
				return err
			}
		}
	}
	return nil
}

// DecodeMsgpack reads a receipt, refusing an attempt beyond 32 bits, a
// negative sequence number and a partition beyond an int64.
func (r *Receipt) DecodeMsgpack(d *msgpack.Decoder) error {
	var out Receipt
	err := decodeFields(d, func(key string) (bool, error) {
		switch key {
		case "partition":
			n, err := decodeInt(d, "receipt partition")
			out.Partition = int(n)
			return true, err
		case "seq":
			n, err := decodeUintMax(d, "receipt seq", math.MaxUint64)
			out.Seq = n
			return true, err
		case "attempt":
			n, err := decodeUintMax(d, "receipt attempt", math.MaxUint32)
			out.Attempt = uint32(n)
			return true, err
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	*r = out
	return nil
}

// DecodeMsgpack reads a dead-letter reason, refusing numbers beyond 8 bits.
func (r *DeadReason) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := decodeUintMax(d, "dead reason", math.MaxUint8)
	*r = DeadReason(n)
	return err
}

// DecodeMsgpack reads a field set, refusing numbers beyond 32 bits.
func (f *ConfigFields) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := decodeUintMax(d, "config field set", math.MaxUint32)
	*f = ConfigFields(n)
	return err
}

// DecodeMsgpack reads a hello, refusing a version beyond 16 bits (which
// would otherwise be truncated to a version the server speaks).
func (h *Hello) DecodeMsgpack(d *msgpack.Decoder) error {
	var out Hello
	err := decodeFields(d, func(key string) (bool, error) {
		var err error
		switch key {
		case "magic":
			out.Magic, err = d.DecodeString()
		case "version":
			var n uint64
			n, err = decodeUintMax(d, "hello version", math.MaxUint16)
			out.Version = uint16(n)
		case "client":
			out.Client, err = d.DecodeString()
		case "token":
			out.Token, err = d.DecodeString()
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return err
	}
	*h = out
	return nil
}
