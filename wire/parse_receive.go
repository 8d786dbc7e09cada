package wire

import (
	"fmt"
	"math"
	"time"
)

// The receive and ack bodies are parsed from the bytes without the
// reflection of a msgpack decoder, as the send bodies are (parse_send.go),
// with the same meaning: unknown keys skipped, nil as the zero value, the
// last of repeated keys wins.

// parseReceiveRequest decodes a ReceiveRequest from one checked value.
func parseReceiveRequest(data []byte, r *ReceiveRequest) error {
	*r = ReceiveRequest{}
	c := &checker{data: data}
	return c.body(func(key string) error {
		var err error
		switch key {
		case "queue":
			r.Queue, err = c.str()
		case "partition":
			r.Partition, err = c.intValue()
		case "consumer":
			r.Consumer, err = c.str()
		case "max":
			r.Max, err = c.intValue()
		case "visibility":
			var v int64
			v, err = c.int()
			r.Visibility = time.Duration(v)
		case "wait":
			var v int64
			v, err = c.int()
			r.Wait = time.Duration(v)
		case "acks":
			r.Acks, err = c.receipts()
		default:
			err = c.value(1)
		}
		return err
	})
}

// parseReceiveResponse decodes a ReceiveResponse from one checked value.
func parseReceiveResponse(data []byte, r *ReceiveResponse) error {
	*r = ReceiveResponse{}
	c := &checker{data: data}
	return c.body(func(key string) error {
		var err error
		switch key {
		case "messages":
			r.Messages, err = c.deliveries()
		case "ack_results":
			r.AckResults, err = c.itemResults()
		default:
			err = c.value(1)
		}
		return err
	})
}

// parseAckRequest decodes an AckRequest from one checked value.
func parseAckRequest(data []byte, r *AckRequest) error {
	*r = AckRequest{}
	c := &checker{data: data}
	return c.body(func(key string) error {
		var err error
		switch key {
		case "queue":
			r.Queue, err = c.str()
		case "partition":
			r.Partition, err = c.intValue()
		case "receipts":
			r.Receipts, err = c.receipts()
		default:
			err = c.value(1)
		}
		return err
	})
}

// parseAckResponse decodes an AckResponse from one checked value.
func parseAckResponse(data []byte, r *AckResponse) error {
	*r = AckResponse{}
	c := &checker{data: data}
	return c.body(func(key string) error {
		if key != "results" {
			return c.value(1)
		}
		var err error
		r.Results, err = c.itemResults()
		return err
	})
}

// intValue reads an integer that fits in an int.
func (c *checker) intValue() (int, error) {
	v, err := c.int()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt || v > math.MaxInt {
		return 0, fmt.Errorf("integer %d out of range", v)
	}
	return int(v), nil
}

// receipts reads an array of Receipt; nil reads as nil.
func (c *checker) receipts() ([]Receipt, error) {
	return array(c, "receipt", c.receipt)
}

// receipt reads one Receipt; nil reads as the zero receipt.
func (c *checker) receipt(r *Receipt) error {
	return c.record(func(key string) error {
		var err error
		switch key {
		case "partition":
			var v int64
			v, err = c.rangedInt("receipt partition")
			r.Partition = int(v)
		case "seq":
			r.Seq, err = c.rangedUint("receipt seq", math.MaxUint64)
		case "attempt":
			var v uint64
			v, err = c.rangedUint("receipt attempt", math.MaxUint32)
			r.Attempt = uint32(v)
		default:
			err = c.value(1)
		}
		return err
	})
}

// rangedInt reads an integer that fits in an int64; one that does not is
// a CodeInvalidArgument Error naming field, as Receipt's decoder says.
func (c *checker) rangedInt(field string) (int64, error) {
	if c.left() > 0 && c.data[c.pos] == 0xcf { // uint64
		c.pos++
		v, err := c.fixed(8)
		if err == nil && v > math.MaxInt64 {
			err = Errorf(CodeInvalidArgument, "%s %d out of range", field, v)
		}
		return int64(v), err
	}
	return c.int()
}

// rangedUint reads a non-negative integer of at most limit; a negative
// or larger one is a CodeInvalidArgument Error naming field.
func (c *checker) rangedUint(field string, limit uint64) (uint64, error) {
	if c.left() > 0 {
		if b := c.data[c.pos]; b >= 0xe0 || (b >= 0xd0 && b <= 0xd3) { // negative fixint, int8..int64
			v, err := c.int()
			if err != nil {
				return 0, err
			}
			if v < 0 {
				return 0, Errorf(CodeInvalidArgument, "%s %d is negative", field, v)
			}
			return checkUint(field, uint64(v), limit)
		}
	}
	v, err := c.uint(math.MaxUint64)
	if err != nil {
		return 0, err
	}
	return checkUint(field, v, limit)
}

// deliveries reads an array of Delivery; nil reads as nil.
func (c *checker) deliveries() ([]Delivery, error) {
	return array(c, "message", c.delivery)
}

// delivery reads one Delivery; nil reads as the zero delivery.
func (c *checker) delivery(d *Delivery) error {
	return c.record(func(key string) error {
		var err error
		switch key {
		case "partition":
			d.Partition, err = c.intValue()
		case "seq":
			d.Seq, err = c.uint(math.MaxUint64)
		case "attempt":
			var v uint64
			v, err = c.uint(math.MaxUint32)
			d.Attempt = uint32(v)
		case "id":
			d.ID, err = c.str()
		case "group":
			d.Group, err = c.str()
		case "headers":
			d.Headers, err = c.strMap()
		case "body":
			d.Body, err = c.bin()
		case "enqueued_at":
			d.EnqueuedAt, err = c.int()
		case "deadline":
			d.Deadline, err = c.int()
		case "priority":
			var v uint64
			v, err = c.rangedUint("priority", PriorityMax)
			d.Priority = Priority(v)
		default:
			err = c.value(1)
		}
		return err
	})
}

// itemResults reads an array of ItemResult; nil reads as nil.
func (c *checker) itemResults() ([]ItemResult, error) {
	return array(c, "result", c.itemResult)
}

// itemResult reads one ItemResult; nil reads as the zero result.
func (c *checker) itemResult(r *ItemResult) error {
	return c.record(func(key string) error {
		var err error
		switch key {
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
