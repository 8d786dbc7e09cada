package wal

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzWAL_DecodeRecord feeds arbitrary bytes to the record decoder and to
// the segment scanner: neither may panic, they must agree on the first
// record, and a freshly encoded record must round-trip through both.
func FuzzWAL_DecodeRecord(f *testing.F) {
	f.Add([]byte{}, uint64(0), []byte{})
	f.Add(make([]byte, 16), uint64(1), []byte("x"))
	f.Add(encodeRecord(nil, 42, []byte("hello")), uint64(42), []byte("hello"))
	f.Add(encodeRecord(nil, 7, nil)[:15], uint64(7), []byte{})
	f.Add(bytes.Repeat([]byte{0xFF}, 40), uint64(1<<63), bytes.Repeat([]byte{0xAA}, 300))
	two := encodeRecord(encodeRecord(nil, 1, []byte("a")), 2, []byte("bb"))
	f.Add(two, uint64(3), []byte("ccc"))
	f.Add(append(append([]byte(nil), two...), 0, 0, 0), uint64(4), []byte{0})

	f.Fuzz(func(t *testing.T, data []byte, key uint64, payload []byte) {
		checkDecoderAgrees(t, data)

		enc := encodeRecord(nil, key, payload)
		gotKey, got, n, err := decodeRecord(enc, len(payload))
		if err != nil || gotKey != key || !bytes.Equal(got, payload) || n != len(enc) {
			t.Fatalf("round trip: key %d, %d bytes, n %d, err %v", gotKey, len(got), n, err)
		}
		if _, _, _, err := decodeRecord(enc[:len(enc)-1], len(payload)); err == nil {
			t.Fatal("decoded a record missing its last byte")
		}
		if len(payload) > 0 {
			if _, _, _, err := decodeRecord(enc, len(payload)-1); !errors.Is(err, errRecordTooLong) {
				t.Fatalf("length limit not enforced: %v", err)
			}
		}
		// Followed by arbitrary bytes, the record still scans first.
		sc := newRecordScanner(bytes.NewReader(append(enc, data...)), 0, int64(len(enc)+len(data)), true)
		rec, err := sc.next()
		if err != nil || rec.key != key || !bytes.Equal(rec.payload, payload) {
			t.Fatalf("scanner round trip: %+v, %v", rec, err)
		}
	})
}

// checkDecoderAgrees decodes data with decodeRecord and with the scanner,
// which must reach the same verdict on the first record.
func checkDecoderAgrees(t *testing.T, data []byte) {
	key, payload, n, err := decodeRecord(data, len(data))
	if err == nil && (n > len(data) || n != recordHeaderBytes+len(payload)) {
		t.Fatalf("decodeRecord: n = %d for %d bytes of data", n, len(data))
	}
	sc := newRecordScanner(bytes.NewReader(data), 0, int64(len(data)), true)
	rec, serr := sc.next()
	if err == nil {
		if serr != nil || rec.key != key || !bytes.Equal(rec.payload, payload) {
			t.Fatalf("decoder accepted a record the scanner rejected: %v", serr)
		}
		return
	}
	if len(data) == 0 {
		if serr != io.EOF {
			t.Fatalf("scanner on empty data: %v", serr)
		}
		return
	}
	var fe *frameError
	if !errors.As(serr, &fe) || fe.offset != 0 {
		t.Fatalf("decoder rejected (%v) but scanner returned %+v, %v", err, rec, serr)
	}
	if p, _ := findValidRecord(data, len(data), tailSearchBudgetBytes); p == 0 {
		t.Fatal("findValidRecord accepted offset 0 that the decoder rejected")
	}
}
