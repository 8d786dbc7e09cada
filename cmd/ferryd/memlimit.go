package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/internal/memtrim"
)

// memoryLimitMin is the smallest -memory-limit ferryd accepts: below it the
// collector would run all the time for the heap of an idle node.
const memoryLimitMin = 64 << 20

// byteUnits are the suffixes -memory-limit accepts, longest first so that
// "MiB" is not read as "B".
var byteUnits = []struct {
	suffix string
	scale  int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// parseByteSize reads a size such as "512MiB", "1.5GiB", "300MB" or
// "1048576" (bytes). "0" and "" mean none.
func parseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	num, scale := s, int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, scale = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v*float64(scale) >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is not a size (want bytes, or a number with KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s)
	}
	return int64(v * float64(scale)), nil
}

// applyMemoryLimit sets the runtime's soft memory limit from -memory-limit,
// unless GOMEMLIMIT is set (it wins, as GOGC wins over -gc-percent).
func applyMemoryLimit(limit string) error {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return nil
	}
	n, err := parseByteSize(limit)
	switch {
	case err != nil:
		return &usageError{fmt.Errorf("-memory-limit: %w", err)}
	case n == 0:
		return nil
	case n < memoryLimitMin:
		return &usageError{fmt.Errorf("-memory-limit %s: want 0 (none) or at least %d MiB", limit, memoryLimitMin>>20)}
	}
	debug.SetMemoryLimit(n)
	return nil
}

// startMemoryTrim runs a memtrim.Trimmer every interval (0: none) and
// returns what stops it. Trims are logged at debug level.
func startMemoryTrim(interval time.Duration, logger *slog.Logger) (stop func(), err error) {
	if interval == 0 {
		return func() {}, nil
	}
	cfg := memtrim.DefaultConfig()
	cfg.Interval = interval
	t, err := memtrim.New(cfg, func(before, after memtrim.Usage) {
		logger.Debug("memory given back", "excess_before_bytes", before.Excess(), "excess_after_bytes", after.Excess(),
			"live_bytes", after.LiveBytes)
	})
	if err != nil {
		return nil, &usageError{fmt.Errorf("-memory-trim-interval: %w", err)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}
