package wire

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// TestWire_CheckAcceptsEveryType runs the structural check over encodings
// of every msgpack type and checks that each is skipped exactly.
func TestWire_CheckAcceptsEveryType(t *testing.T) {
	values := []any{
		nil, true, false, 0, 127, 128, 255, 256, 65535, 65536, math.MaxUint32 + 1, uint64(math.MaxUint64),
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32 - 1, int64(math.MinInt64),
		float32(1.5), 2.5, "", "short", strings.Repeat("s", 40), strings.Repeat("m", 300), strings.Repeat("l", 70000),
		[]byte{}, []byte("bin"), make([]byte, 300), make([]byte, 70000),
		[]int{1, 2}, make([]int, 20), make([]int, 70000), map[string]int{"a": 1},
		map[int]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 10: 10, 11: 11, 12: 12, 13: 13, 14: 14, 15: 15, 16: 16},
		time.Unix(1, 0), time.Unix(1<<40, 5), time.Unix(1<<35, 1).UTC(),
	}
	exts := [][]byte{
		{0xd4, 1, 0}, {0xd5, 1, 0, 0}, {0xd6, 1, 0, 0, 0, 0}, {0xd7, 1, 0, 0, 0, 0, 0, 0, 0, 0},
		append([]byte{0xd8, 1}, make([]byte, 16)...), {0xc7, 2, 1, 0, 0},
		{0xc8, 0, 1, 1, 0}, {0xc9, 0, 0, 0, 1, 1, 0},
	}
	for _, v := range values {
		raw, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		exts = append(exts, raw)
	}
	for _, raw := range exts {
		if err := checkValue(raw); err != nil {
			t.Errorf("% x: %v", raw[:min(len(raw), 8)], err)
		}
		if err := checkValue(raw[:len(raw)-1]); err == nil && len(raw) > 1 {
			t.Errorf("% x cut by one byte accepted", raw[:min(len(raw), 8)])
		}
	}
}

func TestWire_CheckLimits(t *testing.T) {
	nest := func(n int) []byte {
		return append([]byte(strings.Repeat("\x91", n)), 0x01)
	}
	if err := checkValue(nest(MaxNesting)); err != nil {
		t.Errorf("nesting of %d refused: %v", MaxNesting, err)
	}
	if err := checkValue(nest(MaxNesting + 1)); err == nil {
		t.Error("nesting too deep accepted")
	}
	ok, err := msgpack.Marshal(make([]bool, MaxItems))
	if err != nil {
		t.Fatal(err)
	}
	big, _ := msgpack.Marshal(make([]bool, MaxItems+1))
	if checkValue(ok) != nil || checkValue(big) == nil {
		t.Error("MaxItems not enforced at its boundary")
	}
	if checkValue(nil) == nil || checkValue([]byte{0x01, 0x02}) == nil || checkValue([]byte{0xdc, 0x00}) == nil {
		t.Error("empty, trailing or truncated input accepted")
	}
}

func TestWire_EnvelopeIntegerForms(t *testing.T) {
	// id in every integer form a foreign encoder might choose.
	ids := map[string][]byte{
		"uint8": {0xcc, 200}, "uint16": {0xcd, 1, 0}, "uint32": {0xce, 0, 1, 0, 0},
		"uint64": {0xcf, 0, 0, 0, 1, 0, 0, 0, 0}, "int8": {0xd0, 100}, "int16": {0xd1, 1, 0},
		"int32": {0xd2, 0, 1, 0, 0}, "int64": {0xd3, 0, 0, 0, 1, 0, 0, 0, 0}, "nil": {0xc0},
	}
	want := map[string]uint64{"uint8": 200, "uint16": 256, "uint32": 65536, "uint64": 1 << 32,
		"int8": 100, "int16": 256, "int32": 65536, "int64": 1 << 32, "nil": 0}
	for name, enc := range ids {
		// map16 header, str8 key "id", the id, "op" as an int16.
		payload := append([]byte{0xde, 0, 2, 0xd9, 2, 'i', 'd'}, enc...)
		payload = append(payload, 0xa2, 'o', 'p', 0xd1, 0, 7)
		var req Request
		if err := decode(payload, &req); err != nil || req.ID != want[name] || req.Op != OpSend {
			t.Errorf("%s: %+v, %v", name, req, err)
		}
	}
	for name, payload := range map[string][]byte{
		"negative int8":  {0x81, 0xa2, 'i', 'd', 0xd0, 0x80},
		"negative int64": {0x81, 0xa2, 'i', 'd', 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0},
		"float id":       {0x81, 0xa2, 'i', 'd', 0xca, 0, 0, 0, 0},
		"code too big":   {0x81, 0xa4, 'c', 'o', 'd', 'e', 0xce, 0, 1, 0, 0},
		"error not str":  {0x81, 0xa5, 'e', 'r', 'r', 'o', 'r', 0x01},
		"array":          {0x91, 0x01},
	} {
		var resp Response
		if err := decode(payload, &resp); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestWire_OpAndCodeDecoders(t *testing.T) {
	type pair struct {
		Op   Op   `msgpack:"op"`
		Code Code `msgpack:"code"`
	}
	raw, _ := msgpack.Marshal(map[string]any{"op": 17, "code": 65535})
	var p pair
	if err := msgpack.Unmarshal(raw, &p); err != nil || p != (pair{OpPurge, 65535}) {
		t.Fatalf("%+v, %v", p, err)
	}
	for _, bad := range []map[string]any{{"op": 256}, {"code": 65536}, {"op": "x"}, {"code": -1}} {
		raw, _ := msgpack.Marshal(bad)
		if err := msgpack.Unmarshal(raw, &p); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
