package partition

import (
	"context"
	"log/slog"
	"sync"
	"time"
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

// raftWarnings is the process's budget for raft's warnings and errors.
var raftWarnings = newLogBudget(raftWarningsPerSecond, raftWarningsBurst, time.Now)

// leaderLines is the process's budget for "partition leader changed"
// lines: every replica logs each leader it learns, which is what an
// operator needs for a few partitions and 70,000 lines a minute when a
// node leading thousands dies.
var leaderLines = newLogBudget(leaderLinesPerSecond, leaderLinesBurst, time.Now)

// Bounds of leaderLines.
const (
	leaderLinesPerSecond = 100
	leaderLinesBurst     = 1000
)

// logBudget is a token bucket of log lines with a count of those it
// refused.
type logBudget struct {
	mu         sync.Mutex
	now        func() time.Time
	rate       float64 // lines a second
	burst      float64
	tokens     float64
	last       time.Time
	suppressed int64
	reported   time.Time // when the suppressed count was last logged
}

func newLogBudget(rate, burst float64, now func() time.Time) *logBudget {
	return &logBudget{now: now, rate: rate, burst: burst, tokens: burst, last: now()}
}

// take reports whether a line may be written now; when lines were refused
// and a second has passed since the last report, it also returns their
// count (and the count starts again).
func (b *logBudget) take() (ok bool, suppressed int64) {
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
	budget *logBudget
}

func (h limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.Handler.Handle(ctx, r)
	}
	ok, suppressed := h.budget.take()
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

func (h limitedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return limitedHandler{h.Handler.WithAttrs(as), h.budget}
}

func (h limitedHandler) WithGroup(name string) slog.Handler {
	return limitedHandler{h.Handler.WithGroup(name), h.budget}
}
