//go:build chaosclock

package clock

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Adjustable reports whether this build's clock can be shifted.
const Adjustable = true

var shiftNanos atomic.Int64

func now() time.Time { return time.Now().Add(time.Duration(shiftNanos.Load())) }

func shift(d time.Duration) error {
	if d > ShiftMax || d < -ShiftMax {
		return fmt.Errorf("clock: shift %v beyond ±%v", d, ShiftMax)
	}
	shiftNanos.Store(int64(d))
	return nil
}

func offset() time.Duration { return time.Duration(shiftNanos.Load()) }
