package client

import (
	"strings"
	"testing"
	"time"
)

func TestClient_IDsAreTimeOrderedULIDs(t *testing.T) {
	var g idGen
	at := time.UnixMilli(1_700_000_000_123)
	prev := ""
	seen := map[string]bool{}
	for i := range 2000 {
		now := at.Add(time.Duration(i/500) * time.Millisecond) // 500 ids per millisecond
		id := g.next(now)
		if len(id) != 26 {
			t.Fatalf("id %q has %d characters", id, len(id))
		}
		for _, r := range id {
			if !strings.ContainsRune(crockford, r) {
				t.Fatalf("id %q has %q outside the Crockford alphabet", id, r)
			}
		}
		if id <= prev || seen[id] {
			t.Fatalf("id %q not after %q", id, prev)
		}
		seen[id], prev = true, id
	}
	// The first 10 characters are the millisecond timestamp.
	later := at.Add(time.Hour)
	ms := uint64(later.UnixMilli())
	tsOnly := [16]byte{byte(ms >> 40), byte(ms >> 32), byte(ms >> 24), byte(ms >> 16), byte(ms >> 8), byte(ms)}
	if got, want := g.next(later)[:10], encodeULID(tsOnly)[:10]; got != want {
		t.Fatalf("timestamp prefix %s, want %s", got, want)
	}
	a, b := g.next(at.Add(2*time.Hour)), g.next(at.Add(3*time.Hour))
	if a[:10] >= b[:10] {
		t.Fatalf("timestamps not ordered: %s %s", a, b)
	}
	// A clock stepping back keeps the order.
	if c := g.next(at); c <= b {
		t.Fatalf("id %s after a clock step back sorts before %s", c, b)
	}
}

func TestClient_EncodeULIDKnownValue(t *testing.T) {
	var raw [16]byte
	if got := encodeULID(raw); got != strings.Repeat("0", 26) {
		t.Fatalf("zero encodes as %s", got)
	}
	for i := range raw {
		raw[i] = 0xff
	}
	if got := encodeULID(raw); got != "7"+strings.Repeat("Z", 25) {
		t.Fatalf("all ones encode as %s", got)
	}
	// 1 ms after the epoch with zero randomness.
	raw = [16]byte{5: 1}
	if got := encodeULID(raw); got != "0000000001"+strings.Repeat("0", 16) {
		t.Fatalf("ms=1 encodes as %s", got)
	}
}

func TestClient_BackoffStaysInBounds(t *testing.T) {
	c := &Client{cfg: defaultConfig()}
	WithRetryBackoff(10*time.Millisecond, 80*time.Millisecond)(&c.cfg)
	for attempt := range 20 {
		d := c.backoff(attempt)
		step := min(10*time.Millisecond<<min(attempt, 10), 80*time.Millisecond)
		if d < step/2 || d > step {
			t.Fatalf("attempt %d: backoff %v outside [%v, %v]", attempt, d, step/2, step)
		}
	}
}

// TestClient_DefaultBackoffFindsANewLeaderSoon: with the default bounds, a
// caller that has retried through a whole election (raft elects within
// 0.5-1.5 s) never sleeps more than a quarter second before its next try,
// so it reaches the new leader soon after the election.
func TestClient_DefaultBackoffFindsANewLeaderSoon(t *testing.T) {
	c := &Client{cfg: defaultConfig()}
	var slept time.Duration
	for attempt := 0; slept < 3*time.Second; attempt++ {
		d := c.backoff(attempt)
		if d > 250*time.Millisecond {
			t.Fatalf("attempt %d, %v into the retries: pause %v, want at most 250ms", attempt, slept, d)
		}
		slept += d
	}
}

func TestClient_ChunkSplitsByCountAndWeight(t *testing.T) {
	idx := make([]int, 2500)
	for i := range idx {
		idx[i] = i
	}
	chunks := chunk(idx, nil)
	if len(chunks) != 3 || len(chunks[0]) != maxBatch || len(chunks[2]) != 500 {
		t.Fatalf("chunks of %d, %d, ...", len(chunks[0]), len(chunks[1]))
	}
	heavy := chunk([]int{0, 1, 2}, func(int) int { return maxBatchBytes/2 + 1 })
	if len(heavy) != 3 {
		t.Fatalf("%d chunks for 3 items over half the byte budget", len(heavy))
	}
}
