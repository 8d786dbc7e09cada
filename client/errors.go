package client

import (
	"errors"
	"fmt"
	"net"
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
// ErrUnavailable) both hold (a lost connection and a partition whose
// leader could not be reached are ErrUnavailable). When the last failure
// left the outcome unknown the error also wraps ErrUnconfirmed.
//
// Error texts start with "ferry: " once and name their kind once: an error
// that wraps another drops the inner "ferry: " prefix.
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
	// max_message_bytes, or a message is too big for the protocol's frame
	// limit (wire.MaxFrameBytes, or the server's lower limit). The client
	// checks the frame limit before sending: such a message fails alone
	// and the other messages of its batch are still sent.
	ErrMessageTooLarge = wire.ErrMessageTooLarge
	// ErrMessageNotFound: no message or dead letter has that sequence
	// number (already acked, deleted, or never existed).
	ErrMessageNotFound = wire.ErrMessageNotFound
	// ErrInvalidArgument: a request field is out of range. The client
	// checks what it can before sending and reports it with this error too.
	ErrInvalidArgument = wire.ErrInvalidArgument
	// ErrInvalidConfig: a queue configuration failed validation.
	ErrInvalidConfig = wire.ErrInvalidConfig
	// ErrLimitExceeded: CreateQueue would take the cluster past its
	// queue or partition limit, or came faster than the node's create rate
	// limit (the message says which). Nothing was created; not retried by
	// the client.
	ErrLimitExceeded = wire.ErrLimitExceeded
	// ErrUnavailable: the partition or cluster could not serve the request
	// (no leader, no quorum, node shutting down, no leader known).
	ErrUnavailable = wire.ErrUnavailable
	// ErrTimeout: the server started the request but could not confirm its
	// outcome (leadership lost, commit deadline passed). It is not the
	// context's deadline, which is context.DeadlineExceeded.
	ErrTimeout = wire.ErrTimeout
	// ErrInternal: the server hit an unexpected failure.
	ErrInternal = wire.ErrInternal
	// ErrMalformed: the server could not decode a request, or the client
	// could not decode an answer: a protocol mismatch or a bug, not
	// retried.
	ErrMalformed = wire.ErrMalformed
	// ErrProtocolVersion: the server does not speak this client's
	// protocol version (returned by Dial).
	ErrProtocolVersion = wire.ErrProtocolVersion
	// ErrTooManyConnections: the server refused the connection because it
	// is at its connection limit, or at its limit for this client's
	// address. Requests retry it (on another node when the route allows)
	// until their context is done.
	ErrTooManyConnections = wire.ErrTooManyConnections
	// ErrUnauthorized: the cluster requires a token and the client gave
	// none or an unknown one (Dial fails with it), or the token does not
	// permit the request (the token was revoked, or lacks the permission
	// on the queue). Nothing was done; not retried.
	ErrUnauthorized = wire.ErrUnauthorized

	// ErrUnconfirmed: the request may or may not have taken effect. The
	// client returns it, never a success, when it gives up on a request
	// that may have reached the server: the connection was lost after the
	// request was written, the server answered with a timeout, or the
	// context ended while waiting for the answer. A send that failed with
	// ErrUnconfirmed can be sent again safely with the same message id
	// (the server deduplicates it within the queue's dedup window).
	ErrUnconfirmed = errors.New("ferry: outcome unconfirmed")
	// ErrInvalidPriority: a message's priority is outside 0..MaxPriority.
	// The client checks it before sending; the error also matches
	// ErrInvalidArgument, as a server's refusal of it does.
	ErrInvalidPriority = errors.New("ferry: priority out of range")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("ferry: client closed")
	// ErrStopping: a Consume handler's context was cancelled because the
	// grace period of a soft stop (ConsumeOptions.Stop) ran out; it is the
	// context's cause.
	ErrStopping = errors.New("ferry: consumer stopping")
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
	return fmt.Sprintf("ferry: %d of %d messages failed; first: %s", n, len(e.Errors), bare(first))
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

// Error names the address and the failure (a dial error's own copy of the
// address left out).
func (e *transportError) Error() string {
	var oe *net.OpError
	if errors.As(e.err, &oe) && oe.Op == "dial" && oe.Err != nil {
		return "ferry: connection to " + e.addr + ": " + oe.Err.Error()
	}
	return "ferry: connection to " + e.addr + ": " + bare(e.err)
}

// Unwrap returns the underlying failure.
func (e *transportError) Unwrap() error { return e.err }

// Is makes a lost or refused connection match ErrUnavailable (unless the
// client was closed, which is ErrClosed).
func (e *transportError) Is(target error) bool {
	t, ok := target.(*wire.Error)
	return ok && t.Code == wire.CodeUnavailable && !errors.Is(e.err, ErrClosed) &&
		!errors.Is(e.err, wire.ErrProtocolVersion)
}

// invalidArg builds a client-side ErrInvalidArgument.
func invalidArg(format string, args ...any) error {
	return wire.Errorf(wire.CodeInvalidArgument, format, args...)
}

// invalidPriority reports priority p out of range, after what (the
// message it belongs to, or nothing): an invalid argument that also
// matches ErrInvalidPriority.
func invalidPriority(what string, p Priority) error {
	return &priorityError{invalidArg("%spriority %d out of range 0..%d", what, p, MaxPriority)}
}

// priorityError is an invalid-argument error about a priority.
type priorityError struct{ err error }

// Error returns the invalid-argument text.
func (e *priorityError) Error() string { return e.err.Error() }

// Unwrap returns the invalid-argument error.
func (e *priorityError) Unwrap() error { return e.err }

// Is makes the error match ErrInvalidPriority.
func (e *priorityError) Is(target error) bool { return target == ErrInvalidPriority }

// unconfirmed wraps err as an outcome that may or may not have happened.
func unconfirmed(err error) error {
	if errors.Is(err, ErrUnconfirmed) {
		return err
	}
	return &wrapError{text: ErrUnconfirmed.Error() + ": " + bare(err), errs: []error{ErrUnconfirmed, err}}
}

// gaveUp is the error of a call that stops retrying because ctx is done (or
// the client closed): it wraps the stop reason and the last failure. A
// last failure of "not leader" becomes ErrUnavailable: no leader could
// serve the request.
func gaveUp(stop, last error) error {
	if last == nil || errors.Is(last, stop) {
		return stop
	}
	var we *wire.Error
	if errors.As(last, &we) && we.Code == wire.CodeNotLeader {
		last = noLeader(we)
	}
	return &wrapError{text: "ferry: " + bare(stop) + " (last failure: " + bare(last) + ")", errs: []error{stop, last}}
}

// noLeader turns a not-leader answer into ErrUnavailable, keeping its
// detail.
func noLeader(we *wire.Error) error {
	msg := "no leader answered"
	if d := bare(we); d != "" {
		msg += " (" + d + ")"
	}
	return &wire.Error{Code: wire.CodeUnavailable, Message: msg}
}

// wrapError is an error with its own text wrapping several errors.
type wrapError struct {
	text string
	errs []error
}

// Error returns the text.
func (e *wrapError) Error() string { return e.text }

// Unwrap returns the wrapped errors, for errors.Is and errors.As.
func (e *wrapError) Unwrap() []error { return e.errs }

// wrapText wraps err under prefix, dropping err's own "ferry: " prefix
// from the text.
func wrapText(prefix string, err error) error {
	return &wrapError{text: prefix + ": " + bare(err), errs: []error{err}}
}

// bare returns err's text without a leading "ferry: ".
func bare(err error) string {
	return strings.TrimPrefix(err.Error(), "ferry: ")
}

// truncate cuts s to at most n bytes, for reasons and log lines.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
