// Package memtrim gives memory back to the operating system after a burst.
//
// The Go runtime sizes its heap goal from the live heap at the last
// collection and returns freed pages slowly, and an idle process runs no
// collection at all: after a burst of sends a node can hold hundreds of
// megabytes of garbage and free pages for minutes while its live state is
// a fraction of that. A Trimmer looks at the runtime's own accounting at a
// fixed interval and, when the memory held beyond the live heap passes a
// threshold, forces a collection and returns every free page
// (debug.FreeOSMemory). It never touches the heap goal or GOGC, so it
// cannot make a busy node collect more than once per interval.
//
// It owns only that loop: no clocks other than its ticker, no I/O.
package memtrim

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Errors returned by Config.Validate.
var (
	// ErrBadConfig is returned for a Config field out of range; the
	// message names the field.
	ErrBadConfig = errors.New("memtrim: bad config")
)

// Limits on the configuration.
const (
	// IntervalMin is the shortest Config.Interval: a forced collection
	// costs a full mark of the live heap.
	IntervalMin = time.Second
	// ExcessBytesMin is the smallest Config.ExcessBytes.
	ExcessBytesMin = 1 << 20
	// ExcessLivePercentMax is the largest Config.ExcessLivePercent.
	ExcessLivePercentMax = 1000
)

// Config says how often to look and how much excess to tolerate.
type Config struct {
	// Interval is how often the runtime's accounting is read.
	Interval time.Duration
	// ExcessBytes is how much the process may hold beyond its live heap
	// (garbage not yet collected plus free pages not yet returned)
	// before a trim, on top of ExcessLivePercent of the live heap.
	ExcessBytes uint64
	// ExcessLivePercent adds this share of the live heap to the excess a
	// process may hold: the collector lets garbage grow to GOGC percent
	// of the live heap between collections, so a fixed threshold alone
	// made a node with a large live heap (10,000 partitions: about 250
	// MB) force a full collection every interval, idle or not.
	ExcessLivePercent uint64
}

// DefaultConfig looks every 10 s and trims beyond 32 MiB of excess plus
// the live heap's own size.
func DefaultConfig() Config {
	return Config{Interval: 10 * time.Second, ExcessBytes: 32 << 20, ExcessLivePercent: 100}
}

// Validate checks every field and names the first bad one.
func (c Config) Validate() error {
	switch {
	case c.Interval < IntervalMin:
		return fmt.Errorf("%w: Interval %v is below %v", ErrBadConfig, c.Interval, IntervalMin)
	case c.ExcessBytes < ExcessBytesMin:
		return fmt.Errorf("%w: ExcessBytes %d is below %d", ErrBadConfig, c.ExcessBytes, ExcessBytesMin)
	case c.ExcessLivePercent > ExcessLivePercentMax:
		return fmt.Errorf("%w: ExcessLivePercent %d is above %d", ErrBadConfig, c.ExcessLivePercent, ExcessLivePercentMax)
	}
	return nil
}

// Usage is the part of the runtime's accounting a Trimmer reads.
type Usage struct {
	// LiveBytes is the heap marked live by the last collection.
	LiveBytes uint64
	// ObjectBytes is the heap held by objects now, live or garbage.
	ObjectBytes uint64
	// FreeBytes is heap memory free and not yet returned to the system.
	FreeBytes uint64
}

// Excess is the memory held beyond the live heap.
func (u Usage) Excess() uint64 {
	garbage := uint64(0)
	if u.ObjectBytes > u.LiveBytes {
		garbage = u.ObjectBytes - u.LiveBytes
	}
	return garbage + u.FreeBytes
}

var usageMetrics = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
}

// ReadUsage reads the runtime's accounting (no stop of the world).
func ReadUsage() Usage {
	s := make([]metrics.Sample, len(usageMetrics))
	for i, name := range usageMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return Usage{LiveBytes: v(0), ObjectBytes: v(1), FreeBytes: v(2)}
}

// Trimmer runs the loop. The zero value is not usable: use New.
type Trimmer struct {
	cfg   Config
	read  func() Usage
	trim  func()
	onRun func(before, after Usage)
}

// New returns a Trimmer for cfg. onTrim, if not nil, is called after each
// trim with the usage before and after it.
func New(cfg Config, onTrim func(before, after Usage)) (*Trimmer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Trimmer{cfg: cfg, read: ReadUsage, trim: debug.FreeOSMemory, onRun: onTrim}, nil
}

// Step reads the usage once and trims when the excess passes the
// threshold. It reports whether it trimmed.
func (t *Trimmer) Step() bool {
	before := t.read()
	if before.Excess() < t.threshold(before) {
		return false
	}
	t.trim()
	if t.onRun != nil {
		t.onRun(before, t.read())
	}
	return true
}

// threshold is the excess at which u is trimmed.
func (t *Trimmer) threshold(u Usage) uint64 {
	return t.cfg.ExcessBytes + u.LiveBytes/100*t.cfg.ExcessLivePercent
}

// Run steps every Config.Interval until ctx ends.
func (t *Trimmer) Run(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.Step()
		}
	}
}
