package raftlog

import (
	"fmt"
	"log/slog"
	"math"

	"github.com/ferrymq/ferry/wal"
)

// Limits and defaults of Config. Sizes are in bytes.
const (
	// DefaultSegmentBytesMax is the segment size used when
	// Config.SegmentBytesMax is zero.
	DefaultSegmentBytesMax int64 = 64 << 20
	// DefaultEntryBytesMax is Config.EntryBytesMax when zero, lowered if
	// needed so that an entry fits in an empty segment.
	DefaultEntryBytesMax = 16 << 20
	// DefaultBatchBytesMax is Config.BatchBytesMax when zero.
	DefaultBatchBytesMax int64 = 8 << 20
	// BatchBytesMin is the smallest allowed Config.BatchBytesMax.
	BatchBytesMin int64 = 4 << 10
	// DefaultBatchCallsMax is Config.BatchCallsMax when zero.
	DefaultBatchCallsMax = 1024
	// BatchCallsLimit is the largest allowed Config.BatchCallsMax.
	BatchCallsLimit = 1 << 16
	// DefaultCompactLiveRatio is Config.CompactLiveRatio when zero.
	DefaultCompactLiveRatio = 0.5
	// DefaultCompactBytesMax is Config.CompactBytesMax when zero.
	DefaultCompactBytesMax int64 = 4 << 20
	// DefaultGroupsMax is Config.GroupsMax when zero.
	DefaultGroupsMax = 1 << 16
	// GroupsLimit is the largest allowed Config.GroupsMax.
	GroupsLimit = 1 << 24
	// GroupNameBytesMax bounds a group name.
	GroupNameBytesMax = 128
)

// SyncMode says how a group-commit write is made durable.
type SyncMode int

// Sync modes.
const (
	// SyncData flushes and fdatasyncs the active segment once per batch:
	// a StoreLogs returns only once its entries are durable. The default.
	SyncData SyncMode = iota
	// SyncNone never syncs batches (segments are still fsynced when they
	// are sealed). For tests and benchmarks only: a crash loses
	// acknowledged entries, which breaks raft's guarantees.
	SyncNone
)

// Config configures a Store. A zero numeric field means "use the default";
// DefaultConfig spells the defaults out.
type Config struct {
	// Dir holds the segment files and the group registry. It is created if
	// missing; the Store must be its only user.
	Dir string

	// SegmentBytesMax bounds a segment file, header included (see
	// wal.Config.SegmentBytesMax for the allowed range).
	SegmentBytesMax int64

	// EntryBytesMax bounds len(Data)+len(Extensions) of one entry. At most
	// what fits in an empty segment: SegmentBytesMax minus
	// EntryOverheadBytes.
	EntryBytesMax int

	// BatchBytesMax is the most entry bytes one group-commit write gathers
	// from several calls. A single call larger than it is written alone.
	BatchBytesMax int64

	// BatchCallsMax is the most calls one group-commit write gathers.
	BatchCallsMax int

	// CompactLiveRatio selects sealed segments for compaction: one whose
	// live bytes over record bytes fall below it has its live records
	// copied forward and is then deleted. Strictly between 0 and 1.
	CompactLiveRatio float64

	// CompactBytesMax bounds the bytes copied by one compaction step; the
	// writer runs one step between group-commit writes, so this bounds the
	// delay compaction adds to a waiting StoreLogs.
	CompactBytesMax int64

	// GroupsMax bounds the number of groups (and so the registry file).
	GroupsMax int

	// SyncMode selects how batches are made durable; SyncData unless a
	// test or benchmark knows better.
	SyncMode SyncMode

	// HoldDeadAtOpen keeps every record that recovery finds dead on disk
	// until ReleaseDeadFromOpen is called, so that an owner can first
	// re-register the positions it retains (RetainPos) after a restart.
	HoldDeadAtOpen bool

	// PreallocateSegments has the next segment file written full of zeros
	// in the background, so that appends overwrite existing blocks and an
	// fdatasync commits no size change (see wal.Config.PreallocateSegments).
	// It costs up to SegmentBytesMax of extra disk (Stats.SpareBytes). On
	// in DefaultConfig.
	PreallocateSegments bool

	// PrewriteRateMaxBytesPerSecond: no spare is prepared for a segment
	// appended to faster than this (see
	// wal.Config.PrewriteRateMaxBytesPerSecond). Zero means
	// wal.DefaultPrewriteRateMaxBytesPerSecond.
	PrewriteRateMaxBytesPerSecond int64

	// Logger receives recovery reports and background failures. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// EntryOverheadBytes is the space an entry takes on disk beyond its Data
// and Extensions: the wal record header and the entry header.
const EntryOverheadBytes = walRecordHeaderBytes + entryHeaderBytes

// DefaultConfig returns the configuration of a Store in dir with every
// default written out.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:              dir,
		SegmentBytesMax:  DefaultSegmentBytesMax,
		EntryBytesMax:    DefaultEntryBytesMax,
		BatchBytesMax:    DefaultBatchBytesMax,
		BatchCallsMax:    DefaultBatchCallsMax,
		CompactLiveRatio: DefaultCompactLiveRatio,
		CompactBytesMax:  DefaultCompactBytesMax,
		GroupsMax:        DefaultGroupsMax,

		PreallocateSegments:           true,
		PrewriteRateMaxBytesPerSecond: wal.DefaultPrewriteRateMaxBytesPerSecond,
	}
}

// entryFit is the largest EntryBytesMax for segments of segmentBytes.
func entryFit(segmentBytes int64) int64 {
	return segmentBytes - walSegmentHeaderBytes - EntryOverheadBytes
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.SegmentBytesMax == 0 {
		c.SegmentBytesMax = DefaultSegmentBytesMax
	}
	if c.EntryBytesMax == 0 {
		c.EntryBytesMax = int(min(DefaultEntryBytesMax, max(entryFit(c.SegmentBytesMax), 0)))
	}
	if c.BatchBytesMax == 0 {
		c.BatchBytesMax = DefaultBatchBytesMax
	}
	if c.BatchCallsMax == 0 {
		c.BatchCallsMax = DefaultBatchCallsMax
	}
	if c.CompactLiveRatio == 0 {
		c.CompactLiveRatio = DefaultCompactLiveRatio
	}
	if c.CompactBytesMax == 0 {
		c.CompactBytesMax = DefaultCompactBytesMax
	}
	if c.GroupsMax == 0 {
		c.GroupsMax = DefaultGroupsMax
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first field out of range, after zero fields have
// been replaced by defaults. The error wraps ErrInvalidConfig and names
// the field, its value and the allowed range.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(field string, value any, rng string) error {
		return fmt.Errorf("%w: Config.%s = %v: must be %s", ErrInvalidConfig, field, value, rng)
	}
	switch {
	case c.Dir == "":
		return bad("Dir", `""`, "a directory")
	case c.SegmentBytesMax < wal.SegmentBytesMin || c.SegmentBytesMax > wal.SegmentBytesLimit:
		return bad("SegmentBytesMax", c.SegmentBytesMax, fmt.Sprintf("between %d and %d", wal.SegmentBytesMin, wal.SegmentBytesLimit))
	case c.EntryBytesMax < 1 || int64(c.EntryBytesMax) > entryFit(c.SegmentBytesMax):
		return bad("EntryBytesMax", c.EntryBytesMax, fmt.Sprintf("between 1 and %d (SegmentBytesMax less headers)", entryFit(c.SegmentBytesMax)))
	case c.BatchBytesMax < BatchBytesMin || c.BatchBytesMax > c.SegmentBytesMax:
		return bad("BatchBytesMax", c.BatchBytesMax, fmt.Sprintf("between %d and SegmentBytesMax (%d)", BatchBytesMin, c.SegmentBytesMax))
	case c.BatchCallsMax < 1 || c.BatchCallsMax > BatchCallsLimit:
		return bad("BatchCallsMax", c.BatchCallsMax, fmt.Sprintf("between 1 and %d", BatchCallsLimit))
	case math.IsNaN(c.CompactLiveRatio) || c.CompactLiveRatio <= 0 || c.CompactLiveRatio >= 1:
		return bad("CompactLiveRatio", c.CompactLiveRatio, "strictly between 0 and 1")
	case c.CompactBytesMax < 1 || c.CompactBytesMax > c.SegmentBytesMax:
		return bad("CompactBytesMax", c.CompactBytesMax, fmt.Sprintf("between 1 and SegmentBytesMax (%d)", c.SegmentBytesMax))
	case c.GroupsMax < 1 || c.GroupsMax > GroupsLimit:
		return bad("GroupsMax", c.GroupsMax, fmt.Sprintf("between 1 and %d", GroupsLimit))
	case c.SyncMode != SyncData && c.SyncMode != SyncNone:
		return bad("SyncMode", c.SyncMode, "SyncData or SyncNone")
	case c.PrewriteRateMaxBytesPerSecond < 0:
		return bad("PrewriteRateMaxBytesPerSecond", c.PrewriteRateMaxBytesPerSecond, "zero (the default) or more")
	}
	return nil
}

// walConfig is the configuration of the underlying segment log.
func (c Config) walConfig() wal.Config {
	wc := wal.DefaultConfig(c.Dir)
	wc.SegmentBytesMax = c.SegmentBytesMax
	wc.RecordBytesMax = int(c.SegmentBytesMax - walSegmentHeaderBytes - walRecordHeaderBytes)
	wc.CompactLiveRatio = c.CompactLiveRatio
	wc.Logger = c.Logger
	wc.PreallocateSegments = c.PreallocateSegments
	if c.PrewriteRateMaxBytesPerSecond != 0 {
		wc.PrewriteRateMaxBytesPerSecond = c.PrewriteRateMaxBytesPerSecond
	}
	return wc
}
