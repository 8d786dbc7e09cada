package chaos

import (
	"strings"
	"testing"

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
