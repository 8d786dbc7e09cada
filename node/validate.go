package node

import (
	"unicode/utf8"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wire"
)

// Checks of request fields made before anything is proposed: a request the
// FSM would refuse is refused here, so it never takes a place in the raft
// log. The FSM checks again when it applies a command (its own rules stay
// the reference; these mirror them).

// checkBatch refuses an empty batch or one over fsm.BatchMax items.
func checkBatch(what string, n int) error {
	if n < 1 || n > fsm.BatchMax {
		return wire.Errorf(wire.CodeInvalidArgument, "%s batch of %d items (want 1..%d)", what, n, fsm.BatchMax)
	}
	return nil
}

// checkReceive checks a receive's count, lease, consumer id and acks.
func checkReceive(r *wire.ReceiveRequest) error {
	switch {
	case r.Max < 0 || r.Max > fsm.ReceiveMax:
		return wire.Errorf(wire.CodeInvalidArgument, "receive max %d (want 1..%d; 0 means 1)", r.Max, fsm.ReceiveMax)
	case r.Visibility < 0 || r.Visibility > fsm.VisibilityTimeoutMax:
		return wire.Errorf(wire.CodeInvalidArgument, "visibility %v (want 0..%v)", r.Visibility, fsm.VisibilityTimeoutMax)
	case r.Wait < 0:
		return wire.Errorf(wire.CodeInvalidArgument, "wait %v is negative", r.Wait)
	case len(r.Consumer) > fsm.ConsumerBytesMax || !utf8.ValidString(r.Consumer):
		return wire.Errorf(wire.CodeInvalidArgument, "consumer id must be at most %d bytes of UTF-8", fsm.ConsumerBytesMax)
	case len(r.Acks) > fsm.BatchMax:
		return wire.Errorf(wire.CodeInvalidArgument, "receive carries %d acks (at most %d)", len(r.Acks), fsm.BatchMax)
	}
	return nil
}

// checkExtendItem checks one extend's lease length.
func checkExtendItem(it wire.ExtendItem) error {
	if it.Visibility <= 0 || it.Visibility > fsm.VisibilityTimeoutMax {
		return wire.Errorf(wire.CodeInvalidArgument, "visibility %v (want >0..%v)", it.Visibility, fsm.VisibilityTimeoutMax)
	}
	return nil
}

// checkNackItem checks one nack's delay and release flag.
func checkNackItem(it wire.NackItem) error {
	switch {
	case it.ExplicitDelay && (it.Delay < 0 || it.Delay > fsm.DelayMax):
		return wire.Errorf(wire.CodeInvalidArgument, "delay %v (want 0..%v)", it.Delay, fsm.DelayMax)
	case it.Release && it.ExplicitDelay:
		return wire.Errorf(wire.CodeInvalidArgument, "a release takes no delay")
	}
	return nil
}

// checkDeadFilter checks a dead-letter filter's sizes.
func checkDeadFilter(f wire.DeadFilter) error {
	switch {
	case f.Limit < 0 || f.Limit > fsm.DeadListMax:
		return wire.Errorf(wire.CodeInvalidArgument, "dead-letter limit %d (want 0..%d)", f.Limit, fsm.DeadListMax)
	case len(f.Seqs) > fsm.DeadListMax:
		return wire.Errorf(wire.CodeInvalidArgument, "%d sequence numbers in a dead-letter filter (at most %d)", len(f.Seqs), fsm.DeadListMax)
	case len(f.Text) > fsm.ReasonBytesMax:
		return wire.Errorf(wire.CodeInvalidArgument, "dead-letter text filter of %d bytes (at most %d)", len(f.Text), fsm.ReasonBytesMax)
	}
	return nil
}
