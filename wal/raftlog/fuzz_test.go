package raftlog

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// FuzzRaftlog_DecodeEntry feeds arbitrary payloads to the record decoders
// (neither may panic, and what they accept must be self-consistent), and
// checks that an encoded entry round-trips and that a damaged length or
// kind is refused.
func FuzzRaftlog_DecodeEntry(f *testing.F) {
	f.Add([]byte{}, uint64(1), uint64(1), uint8(0), []byte("data"), []byte(nil), int64(0))
	f.Add(encodeEntry(nil, kindEntry, 3, entry(7, 2, 30)), uint64(7), uint64(2), uint8(0), []byte{}, []byte("e"), int64(1700000000000000000))
	f.Add(encodeMarker(nil, kindTruncate, 9, 41), uint64(1<<63), uint64(0), uint8(6), []byte(nil), []byte(nil), int64(-5))
	f.Add(bytes.Repeat([]byte{0xff}, 64), uint64(2), uint64(3), uint8(200), []byte("x"), []byte("y"), int64(1))
	f.Add(encodeStable(nil, 4, "CurrentTerm", []byte{7, 0, 0, 0, 0, 0, 0, 0}), uint64(1), uint64(1), uint8(0), []byte(nil), []byte(nil), int64(0))

	f.Fuzz(func(t *testing.T, raw []byte, index, term uint64, typ uint8, data, ext []byte, at int64) {
		checkArbitraryPayload(t, raw)

		if index == 0 || raft.LogType(typ) > lastKnownLogType {
			return
		}
		in := &raft.Log{Index: index, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext}
		if at != 0 {
			in.AppendedAt = time.Unix(0, at)
		}
		enc := encodeEntry(nil, kindEntry, 5, in)
		var out raft.Log
		h, err := decodeEntry(enc, &out)
		if err != nil || h.group != 5 || h.kind != kindEntry {
			t.Fatalf("round trip: %v (%+v)", err, h)
		}
		if d := sameLog(&out, in); d != "" {
			t.Fatalf("round trip: %s", d)
		}
		if _, err := decodeEntry(enc[:len(enc)-1], &out); err == nil {
			t.Fatal("decoded an entry missing its last byte")
		}
		bad := append([]byte(nil), enc...)
		bad[0] = 0x7f
		if _, err := decodeEntry(bad, &out); err == nil {
			t.Fatal("decoded an entry of unknown kind")
		}
	})
}

// checkArbitraryPayload decodes raw as a record payload: whatever is
// accepted must describe exactly raw's bytes.
func checkArbitraryPayload(t *testing.T, raw []byte) {
	h, err := decodeHeader(raw, len(raw))
	if err != nil {
		return
	}
	switch h.kind {
	case kindTruncate, kindPrefix:
		if len(raw) != markerBytes {
			t.Fatalf("accepted a %d-byte marker", len(raw))
		}
	case kindEntry, kindKept:
		if int(h.dataLen)+int(h.extLen)+entryHeaderBytes != len(raw) || h.index == 0 {
			t.Fatalf("accepted inconsistent entry header %+v for %d bytes", h, len(raw))
		}
		var l raft.Log
		if _, err := decodeEntry(raw, &l); err != nil {
			t.Fatalf("header accepted but entry refused: %v", err)
		}
		if len(l.Data) != int(h.dataLen) || len(l.Extensions) != int(h.extLen) {
			t.Fatal("decoded lengths differ from the header")
		}
	case kindStable:
		_, key, val, err := decodeStable(raw)
		if err != nil {
			t.Fatalf("header accepted but stable record refused: %v", err)
		}
		if len(key) == 0 || len(key) > StableKeyBytesMax || len(val) > StableValueBytesMax ||
			stableHeaderBytes+len(key)+len(val) != len(raw) {
			t.Fatalf("accepted a stable record of key %d and value %d bytes in %d", len(key), len(val), len(raw))
		}
	default:
		t.Fatalf("accepted unknown kind %d", h.kind)
	}
	if h.group == 0 {
		t.Fatal("accepted group 0")
	}
}
