package wal

import (
	"math"
	"strings"
	"testing"
)

func TestWAL_ConfigValidate(t *testing.T) {
	if err := DefaultConfig("/tmp/x").Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if err := (Config{Dir: "/tmp/x", SegmentBytesMax: SegmentBytesMin}).Validate(); err != nil {
		t.Fatalf("zero RecordBytesMax should shrink to fit a small segment: %v", err)
	}
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"Config.Dir", func(c *Config) { c.Dir = "" }},
		{"Config.SegmentBytesMax = 100:", func(c *Config) { c.SegmentBytesMax = 100 }},
		{"Config.SegmentBytesMax = -1:", func(c *Config) { c.SegmentBytesMax = -1 }},
		{"Config.SegmentBytesMax", func(c *Config) { c.SegmentBytesMax = SegmentBytesLimit + 1 }},
		{"Config.RecordBytesMax", func(c *Config) { c.RecordBytesMax = -5 }},
		{"Config.RecordBytesMax", func(c *Config) { c.SegmentBytesMax = SegmentBytesMin }},
		{"Config.RecordBytesMax", func(c *Config) { c.RecordBytesMax = int(c.SegmentBytesMax) - 31 }},
		{"Config.CompactLiveRatio", func(c *Config) { c.CompactLiveRatio = 1 }},
		{"Config.CompactLiveRatio", func(c *Config) { c.CompactLiveRatio = -0.1 }},
		{"Config.CompactLiveRatio", func(c *Config) { c.CompactLiveRatio = math.NaN() }},
		{"Config.PrewriteRateMaxBytesPerSecond", func(c *Config) { c.PrewriteRateMaxBytesPerSecond = -1 }},
	}
	for _, c := range cases {
		cfg := DefaultConfig("/tmp/x")
		c.edit(&cfg)
		err := cfg.Validate()
		wantErr(t, err, ErrInvalidConfig, c.field)
		if !strings.Contains(err.Error(), c.field) {
			t.Fatalf("error %q does not name %s", err, c.field)
		}
		_, _, err = Open(cfg)
		wantErr(t, err, ErrInvalidConfig, "Open with bad "+c.field)
	}
	want := "wal: invalid config: Config.SegmentBytesMax = 100: must be between 4096 and 1073741824"
	cfg := DefaultConfig("/tmp/x")
	cfg.SegmentBytesMax = 100
	if got := cfg.Validate().Error(); got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}
