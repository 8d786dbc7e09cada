// Package clock is the wall clock that Ferry stamps commands with.
//
// Every reading of wall time that ends up in a partition's or the meta
// group's state (command stamps, and through them leases, delays, retention
// and the dedup window) goes through Now. In a normal build Now is
// time.Now. In a build with the chaosclock tag (the chaos suite's) the
// clock can be shifted while the process runs, so that tests can run a
// node ahead of or behind the others, or make its clock jump; a normal
// build has no such control and Shift refuses.
package clock

import (
	"errors"
	"time"
)

// ErrNotAdjustable is returned by Shift in a build without the chaosclock
// tag.
var ErrNotAdjustable = errors.New("clock: not adjustable in this build")

// ShiftMax bounds the offset Shift accepts, either way.
const ShiftMax = 7 * 24 * time.Hour

// Now returns the current wall time, shifted by the offset set with Shift
// in a chaosclock build.
func Now() time.Time { return now() }

// Shift sets the clock's offset from the system clock (not cumulative:
// Shift(0) restores it). A normal build returns ErrNotAdjustable.
func Shift(offset time.Duration) error { return shift(offset) }

// Offset returns the offset set with Shift (always 0 in a normal build).
func Offset() time.Duration { return offset() }
