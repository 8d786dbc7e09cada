//go:build !chaosclock

package clock

import "time"

// Adjustable reports whether this build's clock can be shifted.
const Adjustable = false

func now() time.Time { return time.Now() }

func shift(time.Duration) error { return ErrNotAdjustable }

func offset() time.Duration { return 0 }
