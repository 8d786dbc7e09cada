package raftutil

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Bounds of raft's warnings and errors, for the whole process: when
// thousands of groups elect at once (their leader's node died), each one
// logs a handful of lines, and writing hundreds of thousands of them takes
// CPU the elections need. Beyond the bound, lines are counted, and the
// count is logged once a second while it grows.
const (
	raftWarningsPerSecond = 50
	raftWarningsBurst     = 200
)

// raftWarnings is the process's budget for raft's warnings and errors,
// shared by every group that logs through RaftLogger.
var raftWarnings = NewLogBudget(raftWarningsPerSecond, raftWarningsBurst, time.Now)

// RaftLogger adapts l for hashicorp/raft (raft.Config.Logger), for the
// partition groups and the meta group alike. Raft reports routine events
// (elections, pipeline restarts, snapshots) at Info; they are demoted to
// Debug so that a node's Info log stays readable. Warnings and errors keep
// their level, within a budget for the whole process.
func RaftLogger(l *slog.Logger) hclog.Logger {
	return NewHCLogger(slog.New(demoteInfo{limitedHandler{l.Handler(), raftWarnings}})).Named("raft")
}

// LogBudget is a token bucket of log lines with a count of those it
// refused, for lines that many groups may write at once (elections after a
// node's death). It is safe for concurrent use.
type LogBudget struct {
	mu         sync.Mutex
	now        func() time.Time
	rate       float64 // lines a second
	burst      float64
	tokens     float64
	last       time.Time
	suppressed int64
	reported   time.Time // when the suppressed count was last returned
}

// NewLogBudget returns a full budget of burst lines, refilled at rate
// lines a second as now tells time.
func NewLogBudget(rate, burst float64, now func() time.Time) *LogBudget {
	return &LogBudget{now: now, rate: rate, burst: burst, tokens: burst, last: now()}
}

// Take reports whether a line may be written now; when lines were refused
// and a second has passed since the last report, it also returns their
// count (and the count starts again).
func (b *LogBudget) Take() (ok bool, suppressed int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.now()
	b.tokens = min(b.burst, b.tokens+t.Sub(b.last).Seconds()*b.rate)
	b.last = t
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	if b.suppressed > 0 && t.Sub(b.reported) >= time.Second {
		suppressed, b.suppressed, b.reported = b.suppressed, 0, t
	}
	return true, suppressed
}

// limitedHandler passes records below Warn through and spends the budget
// on the others.
type limitedHandler struct {
	slog.Handler
	budget *LogBudget
}

// Handle writes r if it is below Warn or the budget allows it, preceded by
// the count of lines suppressed since the last one let through.
func (h limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.Handler.Handle(ctx, r)
	}
	ok, suppressed := h.budget.Take()
	if !ok {
		return nil
	}
	if suppressed > 0 {
		note := slog.NewRecord(r.Time, slog.LevelWarn, "raft warnings and errors suppressed (over the process's budget)", 0)
		note.AddAttrs(slog.Int64("count", suppressed), slog.Int("per_second", raftWarningsPerSecond))
		if err := h.Handler.Handle(ctx, note); err != nil {
			return err
		}
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the budget on the derived handler.
func (h limitedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return limitedHandler{h.Handler.WithAttrs(as), h.budget}
}

// WithGroup keeps the budget on the derived handler.
func (h limitedHandler) WithGroup(name string) slog.Handler {
	return limitedHandler{h.Handler.WithGroup(name), h.budget}
}

// demoteInfo is a slog.Handler that logs Info records at Debug.
type demoteInfo struct{ slog.Handler }

// Enabled asks the wrapped handler about the demoted level.
func (d demoteInfo) Enabled(ctx context.Context, level slog.Level) bool {
	return d.Handler.Enabled(ctx, demote(level))
}

// Handle writes r at its demoted level.
func (d demoteInfo) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return d.Handler.Handle(ctx, r)
}

// WithAttrs keeps the demotion on the derived handler.
func (d demoteInfo) WithAttrs(as []slog.Attr) slog.Handler {
	return demoteInfo{d.Handler.WithAttrs(as)}
}

// WithGroup keeps the demotion on the derived handler.
func (d demoteInfo) WithGroup(name string) slog.Handler { return demoteInfo{d.Handler.WithGroup(name)} }

// demote maps Info to Debug and leaves other levels alone.
func demote(level slog.Level) slog.Level {
	if level == slog.LevelInfo {
		return slog.LevelDebug
	}
	return level
}
