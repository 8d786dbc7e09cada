package fsm

import (
	"slices"
	"testing"
)

func TestFSM_SeqTableNextAfterSkipsFreedChunks(t *testing.T) {
	var tab seqTable
	for seq := uint64(1); seq <= 5*seqChunkLen; seq++ {
		tab.put(&message{seq: seq})
	}
	// Free chunk 0 (seqs 1..255) and chunk 2 entirely, keep chunk 1 partly.
	for seq := uint64(1); seq < seqChunkLen; seq++ {
		tab.remove(seq)
	}
	for seq := uint64(2 * seqChunkLen); seq < 3*seqChunkLen; seq++ {
		tab.remove(seq)
	}
	cases := map[uint64]uint64{
		0:                  seqChunkLen,       // before the first allocated chunk
		5:                  seqChunkLen,       // inside a freed leading chunk
		seqChunkLen:        seqChunkLen + 1,   // next slot of an allocated chunk
		2*seqChunkLen - 1:  3 * seqChunkLen,   // into a freed chunk: jump over it
		5 * seqChunkLen:    5*seqChunkLen + 1, // the last seq: lastSeq+1
		10 * seqChunkLen:   10*seqChunkLen + 1,
		3*seqChunkLen + 10: 3*seqChunkLen + 11,
	}
	for seq, want := range cases {
		if got := tab.nextAfter(seq); got != want {
			t.Errorf("nextAfter(%d) = %d, want %d", seq, got, want)
		}
	}
	var seen []uint64
	tab.ascend(func(m *message) bool { seen = append(seen, m.seq); return true })
	if len(seen) != tab.len() || !slices.IsSorted(seen) || seen[0] != seqChunkLen {
		t.Fatalf("ascend saw %d of %d, first %d", len(seen), tab.len(), seen[0])
	}
}

// TestFSM_SeqTableNextAfterPastTheLastAllocatedChunk: when the chunk of
// the last seq ever put is freed, the chunks end below it; a walk from a
// seq under lastSeq must end at lastSeq+1, not index past the chunks. (A
// replica restarted from a snapshot walks its fresh cursor from the
// start and met exactly this: "index out of range [1] with length 1" in
// nextAfter, while applying a receive, on every restart.)
func TestFSM_SeqTableNextAfterPastTheLastAllocatedChunk(t *testing.T) {
	var tab seqTable
	tab.put(&message{seq: 3})
	tab.put(&message{seq: seqChunkLen + 5})
	tab.put(&message{seq: 2*seqChunkLen + 7})
	tab.remove(2*seqChunkLen + 7) // chunk 2 freed: chunks now end at chunk 1
	tab.remove(seqChunkLen + 5)   // and chunk 1: only chunk 0 is left
	end := uint64(2*seqChunkLen + 8)
	for _, seq := range []uint64{seqChunkLen - 1, seqChunkLen, seqChunkLen + 5, 2 * seqChunkLen} {
		if got := tab.nextAfter(seq); got != end {
			t.Errorf("nextAfter(%d) = %d, want %d (lastSeq+1)", seq, got, end)
		}
	}
	if got := tab.nextAfter(3); got != 4 { // chunk 0 is still allocated
		t.Errorf("nextAfter(3) = %d, want 4", got)
	}
}

// TestFSM_FreshCursorCrossesFreedChunks acks long runs of messages (so whole
// chunks of the seq table are freed) between sends and checks that every
// message is still delivered, in order.
func TestFSM_FreshCursorCrossesFreedChunks(t *testing.T) {
	h := newHarness(t)
	var want, got []uint64
	for round := range 4 {
		for i := range 700 {
			seq := h.send(string(rune('a'+round))+string(rune(i)), "", "x")
			want = append(want, seq)
		}
		// Take and ack most of them, leaving the rest queued.
		for range 6 {
			ds := h.receive("c", 100, 0)
			for _, d := range ds {
				got = append(got, d.Receipt.Seq)
				wantNoErr(t, h.ack(d.Receipt))
			}
		}
	}
	for {
		ds := h.receive("c", 1000, 0)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			got = append(got, d.Receipt.Seq)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %d of %d messages, or out of order", len(got), len(want))
	}
}
