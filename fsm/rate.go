package fsm

import "time"

// The delivery rate bound (QueueConfig.MaxDeliveryRate) is a token bucket
// kept as one number, the theoretical arrival time of the next delivery
// (rateTAT, Unix nanoseconds of the FSM clock): deliveries are spaced
// rateSpacing apart on average, and a burst may run up to one second
// ahead of that schedule (rateBurstWindow), so a partition that was idle
// can lease a whole second's worth at once. Everything is computed from
// the commands' stamped clock, so every replica leases the same.

// rateBurstWindow is how far ahead of the schedule deliveries may run.
const rateBurstWindow = int64(time.Second)

// rateSpacing is the time between deliveries at the configured rate, 0
// without a rate bound.
func (f *FSM) rateSpacing() int64 {
	if f.cfg.MaxDeliveryRate <= 0 {
		return 0
	}
	return max(1, rateBurstWindow/f.cfg.MaxDeliveryRate)
}

// rateRoom returns how many deliveries the bound allows now, at most
// want.
func (f *FSM) rateRoom(want int) int {
	return int(f.rateRoomAt(f.clock, int64(want)))
}

// rateRoomAt returns how many deliveries the bound allows at clock (Unix
// nanoseconds, not before the FSM's clock), at most want.
func (f *FSM) rateRoomAt(clock, want int64) int64 {
	spacing := f.rateSpacing()
	if spacing == 0 {
		return want
	}
	base := max(f.rateTAT, clock)
	room := (clock + rateBurstWindow - base) / spacing
	return min(want, max(0, room))
}

// rateTake books n deliveries made now.
func (f *FSM) rateTake(n int) {
	if spacing := f.rateSpacing(); spacing > 0 && n > 0 {
		f.rateTAT = max(f.rateTAT, f.clock) + int64(n)*spacing
	}
}

// RateWait returns how long after now (Unix nanoseconds, the leader's
// clock) the delivery rate bound lets the next delivery go: 0 when it
// may go now or there is no bound. A leader's long poll waits this long
// instead of proposing receives that would lease nothing.
func (f *FSM) RateWait(now int64) time.Duration {
	spacing := f.rateSpacing()
	if spacing == 0 {
		return 0
	}
	next := max(f.rateTAT, f.clock) + spacing - rateBurstWindow
	return time.Duration(max(0, next-now))
}
