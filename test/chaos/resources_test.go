package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestResourceGrowth_FlagsSteadyGrowthOnly(t *testing.T) {
	t0 := time.Now()
	var ss []ResourceSample
	for i := range 20 {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		// n1 is flat with noise; n2 leaks goroutines; n3 restarts half-way
		// (its new process starts smaller, which is not growth).
		ss = append(ss,
			ResourceSample{At: at, Node: "n1", Start: 1, RSSBytes: 100<<20 + int64(i%3)<<20, Goroutines: 300, OpenFDs: 40},
			ResourceSample{At: at, Node: "n2", Start: 1, RSSBytes: 100 << 20, Goroutines: 300 + int64(i)*100, OpenFDs: 40})
		start := 1
		if i >= 10 {
			start = 2
		}
		ss = append(ss, ResourceSample{At: at, Node: "n3", Start: start, RSSBytes: int64(200-i*5) << 20, Goroutines: 300, OpenFDs: 40})
	}
	got := ResourceGrowth(ss, t0, DefaultGrowthBound)
	if len(got) != 1 || !strings.HasPrefix(got[0], "n2 (start #1): goroutines grew") {
		t.Fatalf("growth found: %q, want only n2's goroutines", got)
	}
	if late := ResourceGrowth(ss, t0.Add(190*time.Second), DefaultGrowthBound); len(late) != 0 {
		t.Fatalf("judged processes with too few steady samples: %q", late)
	}
}

func TestResourceGrowth_IgnoresARestartedProcessWarmingUp(t *testing.T) {
	t0 := time.Now()
	var ss []ResourceSample
	for i := range 40 {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		// n1 restarts at 100 s: it comes up idle (95 goroutines) and
		// reaches its loaded level (370) as clients reconnect, then stays.
		g := int64(370)
		if i >= 10 && i < 14 {
			g = 95 + int64(i-10)*90
		}
		start := 1
		if i >= 10 {
			start = 2
		}
		ss = append(ss, ResourceSample{At: at, Node: "n1", Start: start, RSSBytes: 50 << 20, Goroutines: g, OpenFDs: 40})
		// n2 restarts at the same time and then keeps growing: a leak.
		ss = append(ss, ResourceSample{At: at, Node: "n2", Start: start, RSSBytes: 50 << 20, Goroutines: 100 + int64(i)*30, OpenFDs: 40})
	}
	got := ResourceGrowth(ss, t0, DefaultGrowthBound)
	if len(got) != 1 || !strings.HasPrefix(got[0], "n2 (start #2): goroutines grew") {
		t.Fatalf("growth found: %q, want only n2's goroutines after its warm-up", got)
	}
}

func TestIdleLeaks_FlagsGoroutinesThatStayAfterTheLoad(t *testing.T) {
	before := []ResourceSample{{Node: "n1", Goroutines: 100}, {Node: "n2", Goroutines: 100}, {Node: "n3", Goroutines: 100}}
	after := []ResourceSample{{Node: "n1", Goroutines: 160}, {Node: "n2", Goroutines: 170}, {Node: "n4", Goroutines: 900}}
	got := IdleLeaks(before, after, IdleGoroutineBound)
	if len(got) != 1 || !strings.HasPrefix(got[0], "n2: 170 goroutines") {
		t.Fatalf("leaks %q, want only n2 (bound 165)", got)
	}
}
