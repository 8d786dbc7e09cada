package fsm

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func TestFSM_CommandTypesHaveNames(t *testing.T) {
	seen := map[string]bool{}
	for ct := CmdSend; ct < cmdTypeEnd; ct++ {
		name := ct.String()
		if name == "" || strings.HasPrefix(name, "command(") || seen[name] {
			t.Fatalf("type %d has name %q", ct, name)
		}
		seen[name] = true
	}
	if got := CommandType(0).String(); got != "command(0)" {
		t.Fatalf("unknown type named %q", got)
	}
	if got := cmdTypeEnd.String(); !strings.HasPrefix(got, "command(") {
		t.Fatalf("unknown type named %q", got)
	}
	// The enum is append-only: these numbers are in logs forever.
	pinned := map[CommandType]uint8{CmdSend: 1, CmdReceive: 2, CmdAck: 3, CmdExtend: 4, CmdNack: 5, CmdReject: 6,
		CmdTick: 7, CmdRedrive: 8, CmdDeleteDead: 9, CmdPurge: 10, CmdSetConfig: 11, CmdClockResync: 12, CmdReceiveAck: 13}
	for ct, n := range pinned {
		if uint8(ct) != n {
			t.Fatalf("%s renumbered to %d", ct, uint8(ct))
		}
	}
}

func TestFSM_CommandsRoundTripThroughEncoding(t *testing.T) {
	cfg := DefaultQueueConfig()
	r := Receipt{Seq: 7, Attempt: 2}
	cmds := []Command{
		{Type: CmdSend, Send: &SendCmd{Messages: []NewMessage{{ID: "a", Group: "g", Headers: map[string]string{"k": "v"}, Body: []byte("b"), Delay: time.Second}}}},
		{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: 3, Visibility: time.Minute}},
		{Type: CmdAck, Ack: &AckCmd{Receipts: []Receipt{r}}},
		{Type: CmdExtend, Extend: &ExtendCmd{Items: []ExtendItem{{Receipt: r, Visibility: time.Hour}}}},
		{Type: CmdNack, Nack: &NackCmd{Items: []NackItem{{Receipt: r, ExplicitDelay: true, Delay: time.Second, Reason: "x"}}}},
		{Type: CmdReject, Reject: &RejectCmd{Items: []RejectItem{{Receipt: r, Reason: "y"}}}},
		{Type: CmdTick},
		{Type: CmdRedrive, Redrive: &DeadFilter{Seqs: []uint64{1, 2}, Reason: DeadRejected, Group: "g", FromAt: 1, ToAt: 9, AfterSeq: 3, Limit: 5}},
		{Type: CmdDeleteDead, DeleteDead: &DeadFilter{Limit: 1}},
		{Type: CmdPurge},
		{Type: CmdSetConfig, SetConfig: &cfg},
		{Type: CmdReceiveAck, ReceiveAck: &ReceiveAckCmd{Receipts: []Receipt{r}, Receive: ReceiveCmd{Consumer: "c", Max: 3, Visibility: time.Minute, MaxBytes: 1 << 20}}},
		{Type: CmdReceiveAck, ReceiveAck: &ReceiveAckCmd{Receive: ReceiveCmd{Consumer: "c", Max: 1}}},
	}
	for _, c := range cmds {
		c.At = t0 + 123
		data, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("encode %s: %v", c.Type, err)
		}
		back, err := DecodeCommand(data)
		if err != nil {
			t.Fatalf("decode %s: %v", c.Type, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("%s round trip:\n got %+v\nwant %+v", c.Type, back, c)
		}
	}
}

func TestFSM_EncodeRefusesMalformedCommands(t *testing.T) {
	for _, c := range []Command{{Type: 0}, {Type: cmdTypeEnd}, {Type: CmdSend}, {Type: CmdAck}, {Type: CmdReceiveAck}} {
		if _, err := EncodeCommand(c); err == nil {
			t.Fatalf("encoded %+v", c)
		}
	}
	h := newHarness(t)
	if r := h.f.ApplyCommand(Command{Type: CmdSend, At: t0}); r.Err == nil {
		t.Fatal("applied a send without payload")
	}
}

func TestFSM_DecodeRejectsGarbage(t *testing.T) {
	good, _ := EncodeCommand(Command{Type: CmdAck, At: 1, Ack: &AckCmd{Receipts: []Receipt{{Seq: 1, Attempt: 1}}}})
	unknown, _ := EncodeCommand(Command{Type: CmdTick})
	unknown[1] = 99 // the header array's type field (a positive fixint)
	for name, data := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not msgpack at all"),
		"truncated": good[:len(good)-2],
		"trailing":  append(append([]byte{}, good...), 0xc0),
		"unknown":   unknown,
	} {
		if _, err := DecodeCommand(data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestFSM_ApplyPanicsOnUndecodableEntry(t *testing.T) {
	h := newHarness(t)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "undecodable log entry") {
			t.Fatalf("recovered %v", r)
		}
	}()
	h.f.Apply([]byte{0xc1, 0x00})
}

// receiveAckByReflection is ReceiveAckCmd without its codec: msgpack's
// reflection encodes and decodes it as it did before the codec existed.
type receiveAckByReflection ReceiveAckCmd

// TestFSM_ReceiveAckKeepsTheReflectionForm checks that a receive-ack entry
// is byte for byte what the reflection-based encoder wrote (so builds from
// before the codec read entries from builds after it, and the other way
// round) and that both decoders read it alike.
func TestFSM_ReceiveAckKeepsTheReflectionForm(t *testing.T) {
	many := []Receipt{{Seq: 7, Attempt: 2}, {Seq: 1<<64 - 1, Attempt: 1<<32 - 1}, {Seq: 0, Attempt: 0}}
	for i := range 97 {
		many = append(many, Receipt{Seq: uint64(1000 + i*100_000), Attempt: uint32(i)})
	}
	for name, ra := range map[string]ReceiveAckCmd{
		"many":  {Receipts: many, Receive: ReceiveCmd{Consumer: "c", Max: 3, Visibility: time.Minute, MaxBytes: 1 << 20}},
		"one":   {Receipts: many[:1], Receive: ReceiveCmd{Consumer: "c", Max: 100}},
		"nil":   {Receive: ReceiveCmd{Consumer: "c", Max: 1}},
		"empty": {Receipts: []Receipt{}, Receive: ReceiveCmd{Consumer: "", Max: 1}},
	} {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.UseCompactInts(true) // as EncodeCommand
		byReflection := receiveAckByReflection(ra)
		if err := encodeAll(enc.Encode(&commandHeader{Type: CmdReceiveAck, At: t0}), enc.Encode(&byReflection)); err != nil {
			t.Fatal(err)
		}
		want := Command{Type: CmdReceiveAck, At: t0, ReceiveAck: &ra}
		data, err := EncodeCommand(want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, buf.Bytes()) {
			t.Fatalf("%s: encoded\n%x\nreflection wrote\n%x", name, data, buf.Bytes())
		}
		got, err := DecodeCommand(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var back receiveAckByReflection
		dec := msgpack.NewDecoder(bytes.NewReader(data))
		if err := encodeAll(dec.Decode(&commandHeader{}), dec.Decode(&back)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got.ReceiveAck, ReceiveAckCmd(back)) || len(got.ReceiveAck.Receipts) != len(ra.Receipts) {
			t.Fatalf("%s: decoded %+v, reflection decoded %+v", name, *got.ReceiveAck, back)
		}
		if !reflect.DeepEqual(got.ReceiveAck.Receipts, ra.Receipts) && len(ra.Receipts) > 0 {
			t.Fatalf("%s: receipts %v, want %v", name, got.ReceiveAck.Receipts, ra.Receipts)
		}
	}
}

// TestFSM_ReceiveAckKeysInAnyOrder decodes a receive-ack whose keys come in
// another order, with a key this build does not know, as reflection did.
func TestFSM_ReceiveAckKeysInAnyOrder(t *testing.T) {
	type receipt struct {
		Extra   string `msgpack:"extra"`
		Attempt uint32 `msgpack:"attempt"`
		Seq     uint64 `msgpack:"seq"`
	}
	type shuffled struct {
		Receive  ReceiveCmd `msgpack:"receive"`
		Note     []int      `msgpack:"a_key_from_a_later_build"`
		Receipts []receipt  `msgpack:"receipts"`
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	v := shuffled{Receive: ReceiveCmd{Consumer: "c", Max: 2}, Note: []int{1, 2},
		Receipts: []receipt{{Extra: "x", Attempt: 3, Seq: 9}, {Attempt: 1, Seq: 1 << 40}}}
	if err := encodeAll(enc.Encode(&commandHeader{Type: CmdReceiveAck, At: t0}), enc.Encode(&v)); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommand(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := ReceiveAckCmd{Receipts: []Receipt{{Seq: 9, Attempt: 3}, {Seq: 1 << 40, Attempt: 1}}, Receive: v.Receive}
	if !reflect.DeepEqual(*got.ReceiveAck, want) {
		t.Fatalf("decoded %+v, want %+v", *got.ReceiveAck, want)
	}
}

// TestFSM_ReceiptsDecodeBounded checks that receipts arrays claiming more
// entries than they hold, or an odd count of flat values, are refused
// without allocating for the claim.
func TestFSM_ReceiptsDecodeBounded(t *testing.T) {
	recvAck := func(tail ...byte) []byte { // the map form up to the receipts' array
		return append([]byte{0x82, 0xa8, 'r', 'e', 'c', 'e', 'i', 'p', 't', 's'}, tail...)
	}
	for name, c := range map[string]struct {
		typ  CommandType
		tail []byte
	}{
		"ack odd":           {CmdAck, []byte{0x93, 1, 1, 1}},                   // 3 values
		"ack claim":         {CmdAck, []byte{0xdd, 0x00, 0x10, 0x00, 0x00, 1}}, // 2^20 values, one present
		"ack huge":          {CmdAck, []byte{0xdd, 0x7f, 0xff, 0xff, 0xfe}},    // over decodeItemsMax
		"receive-ack claim": {CmdReceiveAck, recvAck(0xdd, 0x00, 0x0f, 0xff, 0xff, 0x80)},
		"receive-ack huge":  {CmdReceiveAck, recvAck(0xdd, 0x7f, 0xff, 0xff, 0xfe)},
		"receipt huge":      {CmdReceiveAck, recvAck(0x91, 0xdf, 0x7f, 0xff, 0xff, 0xfe)},
	} {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		if err := enc.Encode(&commandHeader{Type: c.typ, At: t0}); err != nil {
			t.Fatal(err)
		}
		buf.Write(c.tail)
		allocs := testing.AllocsPerRun(1, func() {
			if _, err := DecodeCommand(buf.Bytes()); err == nil {
				t.Errorf("%s: decoded", name)
			}
		})
		if allocs > 20 {
			t.Errorf("%s: %v allocations", name, allocs)
		}
	}
}
