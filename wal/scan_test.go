package wal

import (
	"encoding/binary"
	"testing"
)

func TestWAL_FindValidRecord(t *testing.T) {
	if p, ex := findValidRecord(make([]byte, 1000), 1<<20, tailSearchBudgetBytes); p != -1 || ex {
		t.Fatalf("zeros: %d, %v", p, ex)
	}
	data := payloadFor(5, 200)
	rec := encodeRecord(nil, 9, []byte("valid"))
	copy(data[37:], rec)
	if p, ex := findValidRecord(data, 1<<20, tailSearchBudgetBytes); p != 37 || ex {
		t.Fatalf("embedded record: %d, %v", p, ex)
	}
	if p, _ := findValidRecord(data, 4, tailSearchBudgetBytes); p != -1 {
		t.Fatalf("record longer than lengthMax accepted at %d", p)
	}
	// Many plausible lengths exhaust the budget: the caller must then
	// report corruption rather than truncate.
	ints := make([]byte, 4*4000)
	for i := 0; i < len(ints); i += 4 {
		binary.LittleEndian.PutUint32(ints[i:], 1000)
	}
	if p, ex := findValidRecord(ints, 1<<20, 10000); p != -1 || !ex {
		t.Fatalf("plausible lengths: %d, %v", p, ex)
	}
}
