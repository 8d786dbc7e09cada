package wire

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWire_ConfigFieldsApply(t *testing.T) {
	src := sampleConfig()
	var dst QueueConfig
	AllConfigFields.Apply(&dst, src)
	if dst != src {
		t.Fatalf("Apply(all) = %+v", dst)
	}
	// A named field is copied even when it is 0; others are left alone.
	base := QueueConfig{MaxReceives: 10, DedupWindow: time.Minute, MaxDepth: 5}
	(FieldMaxReceives | FieldDedupWindow).Apply(&base, QueueConfig{MaxDepth: 99})
	if base != (QueueConfig{MaxDepth: 5}) {
		t.Fatalf("partial Apply = %+v", base)
	}
	// Each bit copies exactly its own field: applying all other bits on
	// top gives src back, applying none leaves a single field set.
	for bit := ConfigFields(1); bit&AllConfigFields != 0; bit <<= 1 {
		var d QueueConfig
		bit.Apply(&d, src)
		if d == (QueueConfig{}) {
			t.Errorf("%s copies nothing", bit)
		}
		(AllConfigFields &^ bit).Apply(&d, src)
		if d != src {
			t.Errorf("%s and the other bits give %+v", bit, d)
		}
		var rest QueueConfig
		(AllConfigFields &^ bit).Apply(&rest, src)
		bit.Apply(&rest, QueueConfig{})
		(AllConfigFields &^ bit).Apply(&rest, QueueConfig{})
		if rest != (QueueConfig{}) {
			t.Errorf("%s and the other bits leave %+v", bit, rest)
		}
	}
}

func TestWire_ConfigFieldsString(t *testing.T) {
	cases := map[ConfigFields]string{
		0:                                 "",
		FieldPartitions:                   "partitions",
		FieldMaxReceives | FieldRetention: "max_receives|retention",
		AllConfigFields: "partitions|replicas|visibility_timeout|max_receives|backoff_base|" +
			"backoff_max|dedup_window|max_message_bytes|max_depth|max_bytes|retention|" +
			"max_dead|max_dead_bytes|dead_retention|dedup_max_ids|max_in_flight|max_delivery_rate|fair_groups",
		1<<18 | 1<<31: "bit(18)|bit(31)",
	}
	for f, want := range cases {
		if got := f.String(); got != want {
			t.Errorf("%#x: %q, want %q", uint32(f), got, want)
		}
	}
	if !AllConfigFields.Has(FieldMaxBytes|FieldBackoffBase) || FieldMaxBytes.Has(FieldMaxBytes|FieldMaxDepth) {
		t.Error("Has")
	}
}

// TestWire_PartitionForPinned fails if the group mapping changes: messages
// of a group would then split across partitions.
func TestWire_PartitionForPinned(t *testing.T) {
	cases := []struct {
		group string
		n     int
		want  int
	}{
		{"", 8, 0}, {"order-1", 1, 0}, {"order-1", 0, 0}, {"order-1", -3, 0},
		{"a", 64, 44}, {"order-1", 8, 5}, {"order-2", 8, 4}, {"acct-42", 16, 3},
	}
	for _, tc := range cases {
		if got := PartitionFor(tc.group, tc.n); got != tc.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.group, tc.n, got, tc.want)
		}
	}
	seen := map[int]bool{}
	for i := range 1000 {
		p := PartitionFor(string(rune('a'+i%26))+string(rune(i)), 8)
		if p < 0 || p >= 8 {
			t.Fatalf("partition %d out of range", p)
		}
		seen[p] = true
	}
	if len(seen) != 8 {
		t.Errorf("1000 groups reach only %d of 8 partitions", len(seen))
	}
}

func TestWire_StatsTotal(t *testing.T) {
	a := sampleStats()
	b := PartitionStats{Partition: 2, Ready: 1, OldestEligibleAge: int64(time.Hour), LastSeq: 3,
		Counters: Counters{Sent: 100, RetentionExpired: 1}}
	total := QueueStatsResponse{Partitions: []PartitionStats{a, b, {Partition: 3, Code: CodeUnavailable}}}.Total()
	want := a
	want.Partition, want.Leader, want.AppliedIndex = -1, "", 0
	want.Ready, want.OldestEligibleAge = 11, int64(time.Hour)
	want.Counters.Sent, want.Counters.RetentionExpired = 101, 13
	if total != want {
		t.Fatalf("Total:\n got %+v\nwant %+v", total, want)
	}
	if (QueueStatsResponse{}).Total() != (PartitionStats{Partition: -1}) {
		t.Error("Total of nothing is not zero")
	}
}

func TestWire_EnumStrings(t *testing.T) {
	names := map[string]string{
		NodeUnknown.String(): "unknown", NodeAlive.String(): "alive", NodeSuspect.String(): "suspect",
		NodeDead.String(): "dead", NodeLeft.String(): "left", NodeState(9).String(): "unknown",
		DeadAny.String(): "any", DeadRejected.String(): "rejected",
		DeadRetriesExhausted.String(): "retries exhausted", DeadLeaseExpired.String(): "lease expired",
		DeadReason(9).String(): "unknown", EventNacked.String(): "nacked",
		EventLeaseExpired.String(): "lease expired", EventRejected.String(): "rejected",
		EventRedriven.String(): "redriven", EventKind(0).String(): "unknown",
	}
	for got, want := range names {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	pins := []struct{ got, want int }{
		{int(DeadRejected), 1}, {int(DeadRetriesExhausted), 2}, {int(DeadLeaseExpired), 3},
		{int(EventNacked), 1}, {int(EventLeaseExpired), 2}, {int(EventRejected), 3}, {int(EventRedriven), 4},
		{int(NodeAlive), 1}, {int(NodeSuspect), 2}, {int(NodeDead), 3}, {int(NodeLeft), 4},
	}
	for i, p := range pins {
		if p.got != p.want {
			t.Errorf("pin %d: %d, want %d", i, p.got, p.want)
		}
	}
	d := Delivery{Partition: 3, Seq: 9, Attempt: 2}
	if d.Receipt() != (Receipt{Partition: 3, Seq: 9, Attempt: 2}) {
		t.Error("Delivery.Receipt")
	}
}

// A stats answer with partitions missing says how many and why, and Total
// leaves them out; a complete one has no error.
func TestQueueStats_ErrNamesMissingPartitions(t *testing.T) {
	st := QueueStatsResponse{Queue: "q", Partitions: []PartitionStats{
		{Partition: 0, Ready: 2},
		{Partition: 1, Code: CodeUnavailable, Error: "no leader"},
		{Partition: 2, Ready: 3},
		{Partition: 3, Code: CodeNotLeader, Error: "ask n2"},
	}}
	err := st.Err()
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotLeader) {
		t.Fatalf("Err() = %v, want the first missing partition's ErrUnavailable", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "2 of 4 partitions") || !strings.Contains(msg, "partition 1") {
		t.Fatalf("Err() = %q, want the count and the first partition named", msg)
	}
	if got := st.Total().Ready; got != 5 {
		t.Fatalf("Total().Ready = %d, want 5 (the partitions that answered)", got)
	}
	st.Partitions[1] = PartitionStats{Partition: 1}
	st.Partitions[3] = PartitionStats{Partition: 3, Ready: 1}
	if err := st.Err(); err != nil {
		t.Fatalf("complete stats: Err() = %v", err)
	}
}
