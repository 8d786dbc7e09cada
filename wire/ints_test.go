package wire

import (
	"errors"
	"math"
	"testing"
)

// wideReceipt has the fields of a Receipt with wider types, as a hostile or
// buggy peer could encode them.
type wideReceipt struct {
	Partition any `msgpack:"partition"`
	Seq       any `msgpack:"seq"`
	Attempt   any `msgpack:"attempt"`
}

type wideAck struct {
	Queue     string        `msgpack:"queue"`
	Partition int           `msgpack:"partition"`
	Receipts  []wideReceipt `msgpack:"receipts"`
}

func TestDecode_ReceiptIntegersRangeChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    wideReceipt
	}{
		{"attempt 2^32+1", wideReceipt{0, uint64(7), uint64(1<<32 + 1)}},
		{"negative attempt", wideReceipt{0, uint64(7), int64(-1)}},
		{"negative seq", wideReceipt{0, int64(-1), uint64(1)}},
		{"partition beyond int64", wideReceipt{uint64(math.MaxUint64), uint64(7), uint64(1)}},
	} {
		raw, err := EncodeBody(wideAck{Queue: "q", Receipts: []wideReceipt{tc.r}})
		if err != nil {
			t.Fatal(err)
		}
		var got AckRequest
		err = DecodeBody(raw, &got)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: decoded to %+v, err %v; want invalid argument", tc.name, got, err)
		}
	}
	raw, err := EncodeBody(wideAck{Queue: "q", Receipts: []wideReceipt{{int64(2), int64(9), uint64(math.MaxUint32)}}})
	if err != nil {
		t.Fatal(err)
	}
	var got AckRequest
	if err := DecodeBody(raw, &got); err != nil {
		t.Fatal(err)
	}
	if want := (Receipt{Partition: 2, Seq: 9, Attempt: math.MaxUint32}); got.Receipts[0] != want {
		t.Fatalf("got %+v, want %+v", got.Receipts[0], want)
	}
}

func TestDecode_NarrowNamedIntegersRangeChecked(t *testing.T) {
	cases := []struct {
		name string
		body any
		into any
	}{
		{"dead reason 256", map[string]any{"queue": "q", "filter": map[string]any{"reason": 256}}, &DeadListRequest{}},
		{"field set 2^32", map[string]any{"name": "q", "set": uint64(1 << 32)}, &UpdateQueueRequest{}},
		{"hello version 2^16+1", map[string]any{"magic": Magic, "version": 1<<16 + 1}, &Hello{}},
	}
	for _, tc := range cases {
		raw, err := EncodeBody(tc.body)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeBody(raw, tc.into); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: decoded to %+v, err %v; want invalid argument", tc.name, tc.into, err)
		}
	}
	var h Hello
	raw, _ := EncodeBody(NewHello("x"))
	if err := DecodeBody(raw, &h); err != nil || h != NewHello("x") {
		t.Fatalf("hello round trip: %+v, %v", h, err)
	}
}
