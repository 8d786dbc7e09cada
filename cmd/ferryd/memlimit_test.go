package main

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"testing"
	"time"
)

func TestFerryd_ParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"": 0, "0": 0, "1048576": 1 << 20, "256MiB": 256 << 20, "1.5GiB": 3 << 29,
		"300MB": 300e6, " 2 GiB ": 2 << 30, "64KiB": 64 << 10, "7B": 7, "1TB": 1e12,
	} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"lots", "-1GiB", "12XB", "GiB", "1e30GiB", "NaN", "Inf"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestFerryd_MemoryLimitFlagSetsTheRuntimeLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	o, err := parseFlags([]string{"-id", "n1", "-insecure", "-memory-limit", "300MiB"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMemoryLimit(o.memoryLimit); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Fatalf("memory limit %d, want %d", got, 300<<20)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	for _, bad := range []string{"1MiB", "lots"} {
		var ue *usageError
		if err := applyMemoryLimit(bad); !errors.As(err, &ue) {
			t.Errorf("-memory-limit %s: %v, want a usage error", bad, err)
		}
	}
	if err := applyMemoryLimit("0"); err != nil || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("-memory-limit 0 set a limit (%v)", err)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	if err := applyMemoryLimit("128MiB"); err != nil || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("-memory-limit overrode GOMEMLIMIT (%v)", err)
	}
}

func TestMemoryTrim_FlagRangeAndStop(t *testing.T) {
	o, err := parseFlags([]string{"-id", "n1", "-insecure"}, io.Discard)
	if err != nil || o.memoryTrimInterval != 10*time.Second {
		t.Fatalf("default -memory-trim-interval %v (%v), want 10s", o.memoryTrimInterval, err)
	}
	var ue *usageError
	if _, err := startMemoryTrim(time.Millisecond, slog.New(slog.DiscardHandler)); !errors.As(err, &ue) {
		t.Fatalf("-memory-trim-interval 1ms: %v, want a usage error", err)
	}
	for _, d := range []time.Duration{0, time.Second} {
		stop, err := startMemoryTrim(d, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("-memory-trim-interval %v: %v", d, err)
		}
		stop() // returns only once the loop has ended
	}
}
