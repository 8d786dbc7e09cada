package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ferrymq/ferry/wire"
)

// Errors returned by the client. Every error a call returns can be tested
// with errors.Is against these values; errors that come from the server
// match by result code whatever their message (errors.Is(err,
// ErrQueueFull) holds for any queue-full refusal).
//
// Transient conditions (not leader, unavailable, lost connections) are
// retried inside the client until the call's context is done; when a call
// gives up, its error wraps both the context's error and the last failure,
// so errors.Is(err, context.DeadlineExceeded) and errors.Is(err,
// ErrUnavailable) may both hold. When the last failure left the outcome
// unknown the error also wraps ErrUnconfirmed.
var (
	// ErrQueueNotFound: the named queue does not exist.
	ErrQueueNotFound = wire.ErrQueueNotFound
	// ErrQueueExists: CreateQueue named a queue that already exists.
	ErrQueueExists = wire.ErrQueueExists
	// ErrQueueFull: the partition is at its max_depth or max_bytes. Nothing
	// was stored. The client does not retry it by itself: back off and send
	// again (with the same message id) if the message must go through.
	ErrQueueFull = wire.ErrQueueFull
	// ErrLeaseLost: the delivery's lease was superseded by a newer delivery
	// (or the message was dead-lettered); another consumer owns it now.
	ErrLeaseLost = wire.ErrLeaseLost
	// ErrMessageTooLarge: body plus headers exceed the queue's
	// max_message_bytes.
	ErrMessageTooLarge = wire.ErrMessageTooLarge
	// ErrMessageNotFound: no message or dead letter has that sequence
	// number (already acked, deleted, or never existed).
	ErrMessageNotFound = wire.ErrMessageNotFound
	// ErrInvalidArgument: a request field is out of range. The client
	// checks what it can before sending and reports it with this error too.
	ErrInvalidArgument = wire.ErrInvalidArgument
	// ErrInvalidConfig: a queue configuration failed validation.
	ErrInvalidConfig = wire.ErrInvalidConfig
	// ErrUnavailable: the partition or cluster could not serve the request
	// (no leader, no quorum, node shutting down, no leader known).
	ErrUnavailable = wire.ErrUnavailable
	// ErrTimeout: the server started the request but could not confirm its
	// outcome (leadership lost, commit deadline passed). It is not the
	// context's deadline, which is context.DeadlineExceeded.
	ErrTimeout = wire.ErrTimeout
	// ErrInternal: the server hit an unexpected failure.
	ErrInternal = wire.ErrInternal

	// ErrUnconfirmed: the request may or may not have taken effect. The
	// client returns it, never a success, when it gives up on a request
	// that may have reached the server: the connection was lost after the
	// request was written, the server answered with a timeout, or the
	// context ended while waiting for the answer. A send that failed with
	// ErrUnconfirmed can be sent again safely with the same message id
	// (the server deduplicates it within the queue's dedup window).
	ErrUnconfirmed = errors.New("ferry: outcome unconfirmed")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("ferry: client closed")
)

// BatchError reports the messages of a SendBatch that did not succeed. Errors
// has one entry per message of the batch, in order: nil for a message that
// was sent, its error otherwise. errors.Is and errors.As look at every
// failed message, so errors.Is(err, ErrUnconfirmed) reports whether any
// message's outcome is unknown.
type BatchError struct {
	// Errors holds one entry per message of the batch; nil means sent.
	Errors []error
}

// Error summarizes the failures: how many, and the first one.
func (e *BatchError) Error() string {
	n, first := 0, error(nil)
	for _, err := range e.Errors {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if first == nil {
		return "ferry: batch: no failures"
	}
	return fmt.Sprintf("ferry: %d of %d messages failed; first: %v", n, len(e.Errors), first)
}

// Unwrap returns the failures of the batch, for errors.Is and errors.As.
func (e *BatchError) Unwrap() []error {
	var out []error
	for _, err := range e.Errors {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Reject marks a handler error as terminal: when a Consume handler returns
// Reject(err), the delivery is rejected (dead-lettered at once, with
// err's text as the reason) instead of nacked for a retry. The returned
// error wraps err.
//
//	if !valid(order) {
//		return client.Reject(fmt.Errorf("order %s: bad total", order.ID))
//	}
func Reject(err error) error { return &rejectError{err: err} }

// rejectError is the error Reject returns.
type rejectError struct{ err error }

// Error says the handler rejected the message, and why.
func (e *rejectError) Error() string {
	if e.err == nil {
		return "rejected"
	}
	return "rejected: " + e.err.Error()
}

// Unwrap returns the handler's error.
func (e *rejectError) Unwrap() error { return e.err }

// reason returns the text kept as the reject reason.
func (e *rejectError) reason() string {
	if e.err == nil {
		return "rejected"
	}
	return e.err.Error()
}

// transportError is a failure of the connection to addr. sent tells
// whether the request may have reached the server: false when it was never
// completely written (nothing can have happened), true when it was written
// and its answer did not arrive.
type transportError struct {
	addr string
	sent bool
	err  error
}

// Error names the address and the failure.
func (e *transportError) Error() string {
	return "ferry: connection to " + e.addr + ": " + e.err.Error()
}

// Unwrap returns the underlying failure.
func (e *transportError) Unwrap() error { return e.err }

// invalidArg builds a client-side ErrInvalidArgument.
func invalidArg(format string, args ...any) error {
	return wire.Errorf(wire.CodeInvalidArgument, format, args...)
}

// unconfirmed wraps err as an outcome that may or may not have happened.
func unconfirmed(err error) error {
	if errors.Is(err, ErrUnconfirmed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnconfirmed, err)
}

// gaveUp is the error of a call that stops retrying because ctx is done (or
// the client closed): it wraps the stop reason and the last failure.
func gaveUp(stop, last error) error {
	if last == nil || errors.Is(last, stop) {
		return stop
	}
	return fmt.Errorf("%w (last failure: %w)", stop, last)
}

// truncate cuts s to at most n bytes, for reasons and log lines.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
