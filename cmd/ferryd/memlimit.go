package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
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
