package client

import (
	"context"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

func TestAcquireRefill_WaitsForLeastThenTakesWhatIsFree(t *testing.T) {
	slots := make(chan struct{}, 8)
	for range 7 { // one slot free
		slots <- struct{}{}
	}
	got := make(chan int, 1)
	go func() { got <- acquireRefill(context.Background(), slots, 3, 6) }()
	select {
	case k := <-got:
		t.Fatalf("took %d slots with one free, want to wait for 3", k)
	case <-time.After(20 * time.Millisecond):
	}
	for range 4 { // five free now: it needs two more, then takes up to six in all
		<-slots
	}
	if k := <-got; k < 3 || k > 5 {
		t.Fatalf("took %d slots, want 3..5", k)
	}
}

func TestAcquireRefill_GivesBackOnCancel(t *testing.T) {
	slots := make(chan struct{}, 4)
	for range 3 {
		slots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan int, 1)
	go func() { got <- acquireRefill(ctx, slots, 2, 4) }()
	// It holds the free slot while waiting for a second.
	testwait.Until(t, 5*time.Second, "the free slot to be taken", func() bool { return len(slots) == 4 })
	cancel()
	if k := <-got; k != 0 {
		t.Fatalf("took %d slots after cancel", k)
	}
	if len(slots) != 3 {
		t.Fatalf("%d slots held after cancel, want the 3 of others", len(slots))
	}
}
