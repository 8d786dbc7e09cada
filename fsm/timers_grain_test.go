package fsm

import (
	"fmt"
	"testing"
	"time"
)

// Dedup ids sent 10 ms apart over two seconds age out in three ticks, one
// per second they expire in, not one tick per id: the dedup deadline is
// rounded up to a grain (a tenth of the window, at most a second), never
// down.
func TestFSM_DedupExpiryTicksAreGrained(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.DedupWindow = time.Minute })
	start := t0 + int64(300*time.Millisecond)
	for i := range 200 {
		h.now = start + int64(i)*int64(10*time.Millisecond)
		h.send(fmt.Sprint("m", i), "", "b")
	}
	ticks := 0
	for {
		at, ok := h.f.NextDeadline()
		if !ok {
			break
		}
		if at%int64(time.Second) != 0 {
			t.Fatalf("deadline %d is not on a second", at-t0)
		}
		if first := start + int64(ticks)*int64(time.Second) + int64(time.Minute); at < first {
			t.Fatalf("deadline %d comes before the ids it ages out expire (%d)", at-t0, first-t0)
		}
		h.now = at
		h.tick()
		ticks++
		if ticks > 5 {
			t.Fatalf("%d ticks and still ids to age out", ticks)
		}
	}
	if ticks != 3 {
		t.Fatalf("ids sent over 2 s aged out in %d ticks, want 3 (one per second they expire in)", ticks)
	}
	if got := lateExpiry(t0+1, int64(time.Second)); got != t0+int64(100*time.Millisecond) {
		t.Fatalf("lateExpiry with a 1 s period rounds to %d, want the next 100 ms", got-t0)
	}
	if got := lateExpiry(t0+7, 50); got != t0+10 {
		t.Fatalf("lateExpiry with a 50 ns period (a 5 ns grain): %d, want 10", got-t0)
	}
}
