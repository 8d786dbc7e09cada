package raftutil

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Raft's warnings beyond the budget are dropped and counted, the count is
// logged with the next line let through, and lines below Warn are never
// limited.
func TestRaftLogger_WarningsWithinABudget(t *testing.T) {
	now := time.Unix(1000, 0)
	budget := NewLogBudget(10, 20, func() time.Time { return now })
	var out bytes.Buffer
	log := slog.New(limitedHandler{slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}), budget})
	for range 1000 {
		log.Warn("heartbeat timeout reached, starting election")
		log.Debug("routine")
	}
	if n := strings.Count(out.String(), "starting election"); n != 20 {
		t.Fatalf("%d warnings written at once, want the burst of 20", n)
	}
	if n := strings.Count(out.String(), "routine"); n != 1000 {
		t.Fatalf("%d debug lines written, want all 1000", n)
	}
	out.Reset()
	now = now.Add(2 * time.Second) // 20 more tokens
	log.Warn("election won")
	if !strings.Contains(out.String(), "suppressed") || !strings.Contains(out.String(), "count=980") {
		t.Fatalf("after the budget refilled: %q, want the count of 980 suppressed lines", out.String())
	}
}
