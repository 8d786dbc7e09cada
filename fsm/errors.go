package fsm

import "errors"

// Errors returned by the FSM, alone or wrapped with detail. A command that
// fails with one of these changes nothing (for batches: nothing for the item
// that failed).
var (
	// ErrInvalidArgument is returned when a command's argument is out of its
	// documented range: an empty or too-long id, a non-positive receive size,
	// a visibility or delay beyond its maximum, and so on.
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrInvalidConfig is returned when a QueueConfig fails validation; the
	// message names the field.
	ErrInvalidConfig = errors.New("invalid queue config")

	// ErrMessageTooLarge is returned for a message whose body plus headers
	// exceed the queue's MaxMessageBytes.
	ErrMessageTooLarge = errors.New("message too large")

	// ErrQueueFull is returned for a message that would take the partition
	// past MaxDepth or MaxBytes. It is retryable: nothing was stored.
	ErrQueueFull = errors.New("queue full")

	// ErrLeaseLost is returned when a receipt names a delivery that is no
	// longer current: the message was leased again since, or its lease ended
	// in a way that does not allow the requested operation.
	ErrLeaseLost = errors.New("lease lost")

	// ErrNotFound is returned when no message or dead letter has the
	// receipt's sequence number: it was acked, deleted, or never existed.
	ErrNotFound = errors.New("message not found")

	// ErrClockStep is returned for a command stamped further ahead of the
	// partition's clock than the FSM's max clock step: the proposer's clock
	// is suspect. The command changes nothing, not even the clock; it is
	// counted in Counters.ClockRefused.
	ErrClockStep = errors.New("command stamped too far ahead of the partition clock")
)
