package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// The sampler holds each partition to its own share of the bound and
// skips partitions whose figures are missing.
func TestBoundsSampler_ChecksEachPartitionsShare(t *testing.T) {
	var s boundsSampler
	half := int64(boundedMaxInFlight / 2)
	s.check(client.Stats{Partitions: []client.PartitionStats{{Partition: 0, InFlight: half}, {Partition: 1, InFlight: half}}})
	if n, over := s.result(); n != 1 || len(over) != 0 {
		t.Fatalf("at the shares: %d samples, %v", n, over)
	}
	s.check(client.Stats{Partitions: []client.PartitionStats{{Partition: 0, InFlight: 0}, {Partition: 1, InFlight: half + 1}}})
	s.check(client.Stats{Partitions: []client.PartitionStats{{Partition: 0, InFlight: 99, Code: 9, Error: "no leader"}}})
	n, over := s.result()
	if n != 3 || len(over) != 1 || !strings.Contains(over[0], "chaos-jobs/1: 21 leased") {
		t.Fatalf("%d samples, %v: want one breach on partition 1", n, over)
	}
}

// The rate check holds each partition to its share of the delivery rate
// over windows of at least rateWindowMin, with the slack for the burst
// and a clock step: leasing at the share passes, leasing at twice it is
// a breach once a window is long enough, and a failed read is skipped.
func TestRateCheck_HoldsEachPartitionToItsShare(t *testing.T) {
	share := int64(boundedMaxDeliveryRate / 2)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var r rateCheck
	var breaches []string
	for sec := int64(0); sec <= 60; sec++ {
		at := t0.Add(time.Duration(sec) * time.Second)
		st := client.Stats{Partitions: []client.PartitionStats{
			{Partition: 0, Counters: client.Counters{Leased: uint64(sec * share)}},
			{Partition: 1, Counters: client.Counters{Leased: uint64(sec * 2 * share)}},
		}}
		if sec == 45 {
			st.Partitions[1].Code, st.Partitions[1].Error = 9, "no leader"
		}
		breaches = append(breaches, r.add(st, at, at.Add(50*time.Millisecond))...)
	}
	if r.checks == 0 || len(breaches) == 0 {
		t.Fatalf("%d windows checked, breaches %v: want partition 1 over its share", r.checks, breaches)
	}
	for _, b := range breaches {
		if !strings.Contains(b, rateQueue+"/1:") {
			t.Fatalf("breach %q: only partition 1 leased over its share", b)
		}
	}
	first := breaches[0]
	if !strings.Contains(first, fmt.Sprintf("its share of max_delivery_rate %d/s", share)) {
		t.Fatalf("breach %q does not name the share", first)
	}
}
