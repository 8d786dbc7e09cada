package fsm

import (
	"fmt"
	"unicode/utf8"
)

// The checks of a command's arguments that do not depend on the
// partition's state. The FSM applies them to every command it applies;
// they are exported so that a proposer can refuse a command the FSM would
// refuse before it takes a place in the log. Each error wraps
// ErrInvalidArgument.

// CheckBatch refuses a batch (send, ack, extend, nack, reject) of n items
// unless 1 <= n <= BatchMax.
func CheckBatch(n int) error {
	if n < 1 || n > BatchMax {
		return fmt.Errorf("%w: batch of %d items (want 1..%d)", ErrInvalidArgument, n, BatchMax)
	}
	return nil
}

// ValidateReceive checks a receive's fields and, for a receive that acks
// receipts first (ReceiveAckCmd), their count acks (0 for a plain receive):
// a consumer id of at most ConsumerBytesMax bytes of UTF-8, 1 <= Max <=
// ReceiveMax, 0 <= Visibility <= VisibilityTimeoutMax, MaxBytes >= 0 and
// 0 <= acks <= BatchMax.
func ValidateReceive(c *ReceiveCmd, acks int) error {
	switch {
	case acks < 0 || acks > BatchMax:
		return fmt.Errorf("%w: receive carries %d acks (want 0..%d)", ErrInvalidArgument, acks, BatchMax)
	case len(c.Consumer) > ConsumerBytesMax || !utf8.ValidString(c.Consumer):
		return fmt.Errorf("%w: consumer id must be at most %d bytes of UTF-8", ErrInvalidArgument, ConsumerBytesMax)
	case c.Max < 1 || c.Max > ReceiveMax:
		return fmt.Errorf("%w: receive max %d (want 1..%d)", ErrInvalidArgument, c.Max, ReceiveMax)
	case c.Visibility < 0 || c.Visibility > VisibilityTimeoutMax:
		return fmt.Errorf("%w: visibility %v (want 0..%v)", ErrInvalidArgument, c.Visibility, VisibilityTimeoutMax)
	case c.MaxBytes < 0:
		return fmt.Errorf("%w: receive byte budget %d is negative", ErrInvalidArgument, c.MaxBytes)
	}
	return nil
}

// Validate checks an extend's new lease length: 0 < Visibility <=
// VisibilityTimeoutMax.
func (it ExtendItem) Validate() error {
	if it.Visibility <= 0 || it.Visibility > VisibilityTimeoutMax {
		return fmt.Errorf("%w: visibility %v (want >0..%v)", ErrInvalidArgument, it.Visibility, VisibilityTimeoutMax)
	}
	return nil
}

// Validate checks a nack's delay and release flag: an explicit delay lies
// in 0..DelayMax, and a release takes no delay.
func (it NackItem) Validate() error {
	switch {
	case it.ExplicitDelay && (it.Delay < 0 || it.Delay > DelayMax):
		return fmt.Errorf("%w: delay %v (want 0..%v)", ErrInvalidArgument, it.Delay, DelayMax)
	case it.Release && it.ExplicitDelay:
		return fmt.Errorf("%w: a release takes no delay", ErrInvalidArgument)
	}
	return nil
}

// Validate checks a dead-letter filter's sizes and time range: 0 <= Limit
// <= DeadListMax, at most DeadListMax Seqs, a Text of at most
// ReasonBytesMax bytes, and ToAt not before FromAt when both are set.
func (d DeadFilter) Validate() error {
	switch {
	case d.Limit < 0 || d.Limit > DeadListMax:
		return fmt.Errorf("%w: dead-letter limit %d (want 0..%d)", ErrInvalidArgument, d.Limit, DeadListMax)
	case len(d.Seqs) > DeadListMax:
		return fmt.Errorf("%w: %d sequence numbers in a dead-letter filter (at most %d)", ErrInvalidArgument, len(d.Seqs), DeadListMax)
	case len(d.Text) > ReasonBytesMax:
		return fmt.Errorf("%w: dead-letter text filter of %d bytes (at most %d)", ErrInvalidArgument, len(d.Text), ReasonBytesMax)
	case d.FromAt != 0 && d.ToAt != 0 && d.ToAt < d.FromAt:
		return fmt.Errorf("%w: dead-letter time range ends before it starts", ErrInvalidArgument)
	}
	return nil
}
