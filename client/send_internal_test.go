package client

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ferrymq/ferry/wire"
)

func TestRouteBatch_OnePartitionNeedsNoMap(t *testing.T) {
	const n = 8
	wms := []wire.Message{{ID: "a", Group: "g"}, {ID: "b", Group: "g"}, {ID: "c", Group: "g"}}
	results, errs := make([]SendResult, len(wms)), make([]error, len(wms))
	if byPart := routeBatch(wms, n, results, errs); byPart != nil {
		t.Fatalf("one group's messages routed as %v, want nil (one partition)", byPart)
	}
	want := wire.PartitionFor("g", n)
	for i, r := range results {
		if r.ID != wms[i].ID || r.Partition != want || errs[i] != nil {
			t.Fatalf("message %d: %+v, %v; want id %s partition %d", i, r, errs[i], wms[i].ID, want)
		}
	}
	if got := sendable(errs); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("sendable = %v", got)
	}
	one := wms[:1]
	if allocs := testing.AllocsPerRun(100, func() { routeBatch(one, n, results[:1], errs[:1]) }); allocs != 0 {
		t.Fatalf("routing one message allocated %v times", allocs)
	}
}

func TestRouteBatch_SplitsByPartitionAndLeavesOutTooLarge(t *testing.T) {
	const n = 4
	var wms []wire.Message
	for i := range 40 {
		wms = append(wms, wire.Message{ID: fmt.Sprintf("m%d", i)})
	}
	wms[7].Body = make([]byte, maxFrameMessageBytes+1)
	results, errs := make([]SendResult, len(wms)), make([]error, len(wms))
	byPart := routeBatch(wms, n, results, errs)
	if len(byPart) < 2 {
		t.Fatalf("40 ids went to %d partitions of %d", len(byPart), n)
	}
	if !errors.Is(errs[7], ErrMessageTooLarge) {
		t.Fatalf("message over the frame limit: %v, want ErrMessageTooLarge", errs[7])
	}
	seen := 0
	for p, idx := range byPart {
		if !slices.IsSorted(idx) {
			t.Fatalf("partition %d's messages out of order: %v", p, idx)
		}
		for _, i := range idx {
			if i == 7 || results[i].Partition != p || results[i].Partition != wire.PartitionFor(wms[i].ID, n) {
				t.Fatalf("message %d routed to %d (result says %d)", i, p, results[i].Partition)
			}
			seen++
		}
	}
	if seen != len(wms)-1 {
		t.Fatalf("%d messages routed, want %d", seen, len(wms)-1)
	}

	// Every message too large: nothing to send.
	errs = make([]error, 1)
	if byPart := routeBatch(wms[7:8], n, results[:1], errs); byPart != nil || len(sendable(errs)) != 0 {
		t.Fatalf("a lone message over the limit: %v, sendable %v", byPart, sendable(errs))
	}
}
