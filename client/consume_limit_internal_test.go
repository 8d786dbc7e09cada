package client

import (
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

func TestPrefetchLimit_Compute(t *testing.T) {
	const concurrency = 4
	cases := []struct {
		name      string
		most      int
		handle    time.Duration // 0: no handler has finished
		lease     time.Duration
		bodyBytes int64
		want      int
	}{
		{"before any handler finished", 256, 0, 30 * time.Second, 0, 2 * concurrency},
		{"fast handlers get the most", 256, 50 * time.Microsecond, 30 * time.Second, 256, 256},
		{"slow handlers: a quarter lease of runs", 256, time.Second, 40 * time.Second, 256, 10 * concurrency},
		{"very slow handlers: one per handler", 256, time.Minute, 30 * time.Second, 256, concurrency},
		{"large bodies bound the bytes held", 256, time.Microsecond, 30 * time.Second, 1 << 20, prefetchBytesMax >> 20},
		{"a small most is never exceeded", 3, time.Microsecond, 30 * time.Second, 1, 3},
		{"start is bounded by most", 3, 0, 30 * time.Second, 1, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pace := &consumePace{concurrency: concurrency}
			l := newPrefetchLimit(make(chan struct{}, tc.most), pace)
			pace.handleNs.Store(int64(tc.handle))
			l.leaseNs.Store(int64(tc.lease))
			l.bodyBytes.Store(tc.bodyBytes)
			if got := l.compute(); got != tc.want {
				t.Fatalf("compute() = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestPrefetchLimit_RunHoldsTheSlotsAboveTheTarget checks that the limit
// holds the slots above its starting target before any poller can ask for
// them, that run gives slots back at once when the target rises, and that
// it takes the slots above a lowered target as they free.
func TestPrefetchLimit_RunHoldsTheSlotsAboveTheTarget(t *testing.T) {
	slots := make(chan struct{}, 10)
	pace := &consumePace{concurrency: 1}
	l := newPrefetchLimit(slots, pace) // target 2 until a handler finishes
	if len(slots) != 8 {
		t.Fatalf("the limit holds %d slots before any poller runs, want 8 (10 - 2)", len(slots))
	}
	for range 2 {
		slots <- struct{}{} // the two leases the pollers may ask for
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() { defer close(ended); l.run(done) }()
	pace.handleNs.Store(int64(time.Microsecond))
	l.leaseNs.Store(int64(30 * time.Second))
	l.update() // fast handlers: the target rises to 10
	waitLen(t, slots, 2)
	pace.handleNs.Store(int64(time.Minute))
	l.update()            // very slow handlers: the target falls to 1
	waitLen(t, slots, 10) // the limiter takes the 8 free slots
	<-slots               // a lease is settled: the limiter takes its slot too
	waitLen(t, slots, 10) // it holds 10 - 1
	close(done)
	<-ended
}

func waitLen(t *testing.T, ch chan struct{}, n int) {
	t.Helper()
	testwait.Until(t, 5*time.Second, "slots taken", func() bool { return len(ch) == n })
}
