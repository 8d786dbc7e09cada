package wal

import (
	"fmt"
	"log/slog"
	"math"
)

// Limits and defaults of Config. Sizes are in bytes.
const (
	// DefaultSegmentBytesMax is the segment size used when
	// Config.SegmentBytesMax is zero.
	DefaultSegmentBytesMax int64 = 64 << 20
	// SegmentBytesMin is the smallest allowed Config.SegmentBytesMax. It is
	// small so that tests can exercise rotation cheaply.
	SegmentBytesMin int64 = 4 << 10
	// SegmentBytesLimit is the largest allowed Config.SegmentBytesMax; it
	// keeps every offset well inside Pos.Offset's uint32.
	SegmentBytesLimit int64 = 1 << 30

	// DefaultRecordBytesMax is the payload limit used when
	// Config.RecordBytesMax is zero, lowered if needed so that one record
	// fits in an empty segment.
	DefaultRecordBytesMax = 16 << 20

	// DefaultCompactLiveRatio is the compaction threshold used when
	// Config.CompactLiveRatio is zero.
	DefaultCompactLiveRatio = 0.5

	// DefaultPrewriteRateMaxBytesPerSecond is the rate bound used when
	// Config.PrewriteRateMaxBytesPerSecond is zero. Measured on ext4 with
	// three logs on one disk: a 1 KiB-message bulk load appends 50-80 MB/s
	// per log in batches of 100+ KiB, where the journal commit is a small
	// part of each fdatasync and writing every segment twice would make the
	// disk's bandwidth the bound; synchronous and pipelined publishing
	// append 1-20 MB/s in small batches, where the commit is about half of
	// each fdatasync.
	DefaultPrewriteRateMaxBytesPerSecond int64 = 32 << 20
)

// Config configures a Log. A zero numeric field means "use the default";
// DefaultConfig spells the defaults out.
type Config struct {
	// Dir holds the segment files. It is created if missing. The Log
	// assumes it is the only writer of segment files in Dir.
	Dir string

	// SegmentBytesMax bounds a segment file's size, header included: a
	// record that would take the active segment past it goes to a new
	// segment. Between SegmentBytesMin and SegmentBytesLimit.
	SegmentBytesMax int64

	// RecordBytesMax is the largest payload Append accepts. At most
	// SegmentBytesMax minus the segment and record headers (32 bytes), so
	// that a largest record fits exactly in an empty segment.
	RecordBytesMax int

	// CompactLiveRatio selects compaction candidates: a sealed segment whose
	// live record bytes divided by its record bytes is below this ratio is
	// rewritten by Compact. Strictly between 0 and 1.
	CompactLiveRatio float64

	// SyncOnAppend makes every Append flush and fsync the active segment
	// before returning. Off by default: the owner's durability comes from
	// its Raft log.
	SyncOnAppend bool

	// PreallocateSegments prepares the next segment file in the background
	// while the active one fills: written full of zeros to SegmentBytesMax
	// and fsynced, then renamed into place at rotation, so that appends
	// overwrite existing blocks and an fdatasync need not commit a new file
	// size (about half the latency on ext4). The spare is prepared once the
	// active segment is half full. The first segment of a directory and
	// the one active at Open are not pre-written; once such a segment
	// holds 256 KiB a spare is prepared and the segment is sealed early when
	// the spare is ready. The spare takes up to
	// SegmentBytesMax of extra disk (Stats.SpareBytes); failing to prepare
	// it (a full disk) never fails an append. Off by default.
	//
	// A spare is prepared only for an active segment written slower than
	// PrewriteRateMaxBytesPerSecond, and it is filled in paced pieces
	// (each fdatasynced, then a pause as long as the piece took), so that
	// the fill never queues more than one piece ahead of an append's
	// fdatasync and takes at most about half of the disk's time.
	PreallocateSegments bool

	// PrewriteRateMaxBytesPerSecond is the append rate, measured over the
	// active segment since it became active, above which no spare is
	// prepared for it: at such rates appends come in large batches whose
	// fdatasync gains little from pre-written blocks, and the zeros would
	// double the bytes the disk must write. Zero means
	// DefaultPrewriteRateMaxBytesPerSecond; must not be negative.
	PrewriteRateMaxBytesPerSecond int64

	// Files opens and closes the Log's segment files, within the bound
	// of open files it shares with the other Logs given the same cache,
	// and closes files (after writing and syncing buffered records) once
	// the Log is idle; see FileCache. Nil gives the Log a cache of its
	// own with neither bound nor idle closing: each segment file is
	// opened when first needed and stays open until the segment is
	// deleted or the Log closed.
	Files *FileCache

	// Logger receives recovery reports and background failures (a segment
	// file that could not be deleted after a pin was released). Nil means
	// slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the configuration used for a Log in dir, with
// every default written out.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:              dir,
		SegmentBytesMax:  DefaultSegmentBytesMax,
		RecordBytesMax:   DefaultRecordBytesMax,
		CompactLiveRatio: DefaultCompactLiveRatio,

		PrewriteRateMaxBytesPerSecond: DefaultPrewriteRateMaxBytesPerSecond,
	}
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.SegmentBytesMax == 0 {
		c.SegmentBytesMax = DefaultSegmentBytesMax
	}
	if c.RecordBytesMax == 0 {
		c.RecordBytesMax = DefaultRecordBytesMax
		if fit := recordBytesFit(c.SegmentBytesMax); fit >= 0 && int64(c.RecordBytesMax) > fit {
			c.RecordBytesMax = int(fit)
		}
	}
	if c.CompactLiveRatio == 0 {
		c.CompactLiveRatio = DefaultCompactLiveRatio
	}
	if c.PrewriteRateMaxBytesPerSecond == 0 {
		c.PrewriteRateMaxBytesPerSecond = DefaultPrewriteRateMaxBytesPerSecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// recordBytesFit is the largest payload that fits in an empty segment of
// segmentBytes bytes.
func recordBytesFit(segmentBytes int64) int64 {
	return segmentBytes - segmentHeaderBytes - recordHeaderBytes
}

// Validate reports the first field that is out of range, after zero fields
// have been replaced by their defaults. The error wraps ErrInvalidConfig
// and names the field, its value and the allowed range.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Dir == "" {
		return fmt.Errorf("%w: Config.Dir is empty: must name a directory", ErrInvalidConfig)
	}
	if c.SegmentBytesMax < SegmentBytesMin || c.SegmentBytesMax > SegmentBytesLimit {
		return fmt.Errorf("%w: Config.SegmentBytesMax = %d: must be between %d and %d",
			ErrInvalidConfig, c.SegmentBytesMax, SegmentBytesMin, SegmentBytesLimit)
	}
	if fit := recordBytesFit(c.SegmentBytesMax); c.RecordBytesMax < 0 || int64(c.RecordBytesMax) > fit {
		return fmt.Errorf("%w: Config.RecordBytesMax = %d: must be between 0 and %d (Config.SegmentBytesMax - %d header bytes)",
			ErrInvalidConfig, c.RecordBytesMax, fit, segmentHeaderBytes+recordHeaderBytes)
	}
	if math.IsNaN(c.CompactLiveRatio) || c.CompactLiveRatio <= 0 || c.CompactLiveRatio >= 1 {
		return fmt.Errorf("%w: Config.CompactLiveRatio = %v: must be strictly between 0 and 1",
			ErrInvalidConfig, c.CompactLiveRatio)
	}
	if c.PrewriteRateMaxBytesPerSecond < 0 {
		return fmt.Errorf("%w: Config.PrewriteRateMaxBytesPerSecond = %d: must not be negative",
			ErrInvalidConfig, c.PrewriteRateMaxBytesPerSecond)
	}
	return nil
}
