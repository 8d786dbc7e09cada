package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Error is a failure carried by a response: its Code says what kind, its
// Message gives the detail, and Leader, for CodeNotLeader, the client
// address of the leader to retry at.
//
// Two Errors match under errors.Is when their codes are equal, whatever
// their messages, so errors.Is(err, ErrQueueFull) works for any queue-full
// error a server sends.
type Error struct {
	// Code is the kind of failure.
	Code Code
	// Message is the detail, without the code's name.
	Message string
	// Leader is the client address of the leader, for CodeNotLeader.
	Leader string
}

// Sentinel errors, one per non-OK code, for errors.Is. They must never be
// modified; build a new Error (Errorf) to add a message.
var (
	// ErrInternal matches CodeInternal.
	ErrInternal = &Error{Code: CodeInternal}
	// ErrMalformed matches CodeMalformed.
	ErrMalformed = &Error{Code: CodeMalformed}
	// ErrProtocolVersion matches CodeProtocolVersion.
	ErrProtocolVersion = &Error{Code: CodeProtocolVersion}
	// ErrInvalidArgument matches CodeInvalidArgument.
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument}
	// ErrInvalidConfig matches CodeInvalidConfig.
	ErrInvalidConfig = &Error{Code: CodeInvalidConfig}
	// ErrQueueNotFound matches CodeQueueNotFound.
	ErrQueueNotFound = &Error{Code: CodeQueueNotFound}
	// ErrQueueExists matches CodeQueueExists.
	ErrQueueExists = &Error{Code: CodeQueueExists}
	// ErrNotLeader matches CodeNotLeader.
	ErrNotLeader = &Error{Code: CodeNotLeader}
	// ErrUnavailable matches CodeUnavailable.
	ErrUnavailable = &Error{Code: CodeUnavailable}
	// ErrTimeout matches CodeTimeout.
	ErrTimeout = &Error{Code: CodeTimeout}
	// ErrQueueFull matches CodeQueueFull.
	ErrQueueFull = &Error{Code: CodeQueueFull}
	// ErrMessageTooLarge matches CodeMessageTooLarge.
	ErrMessageTooLarge = &Error{Code: CodeMessageTooLarge}
	// ErrLeaseLost matches CodeLeaseLost.
	ErrLeaseLost = &Error{Code: CodeLeaseLost}
	// ErrMessageNotFound matches CodeMessageNotFound.
	ErrMessageNotFound = &Error{Code: CodeMessageNotFound}
	// ErrFrameTooLarge matches CodeFrameTooLarge; frame readers and writers
	// return an Error of this code for a frame over the limit.
	ErrFrameTooLarge = &Error{Code: CodeFrameTooLarge}
	// ErrLimitExceeded matches CodeLimitExceeded.
	ErrLimitExceeded = &Error{Code: CodeLimitExceeded}
	// ErrTooManyConnections matches CodeTooManyConnections: a server at its
	// connection limit (per node or per client address) refused the
	// connection.
	ErrTooManyConnections = &Error{Code: CodeTooManyConnections}
	// ErrUnauthorized matches CodeUnauthorized: the connection's token is
	// missing or unknown, or does not permit the request.
	ErrUnauthorized = &Error{Code: CodeUnauthorized}
	// ErrMalformedFrame has CodeMalformed (so it also matches ErrMalformed);
	// frame readers return an Error of this code for a zero length or an
	// undecodable payload.
	ErrMalformedFrame = &Error{Code: CodeMalformed, Message: "malformed frame"}
)

// Error formats the error as "ferry: <code>[: message][ (leader addr)]".
// A message that itself starts with "ferry: " or with the code's name (a
// server's error text passed on whole) is not prefixed again, so the text
// never reads "queue full: queue full".
func (e *Error) Error() string {
	if e == nil {
		return "ferry: <nil error>"
	}
	s := "ferry: " + e.Code.String()
	if msg := e.detail(); msg != "" {
		s += ": " + msg
	}
	if e.Leader != "" {
		s += " (leader at " + e.Leader + ")"
	}
	return s
}

// detail returns the message without the prefixes Error adds itself.
func (e *Error) detail() string {
	msg := e.Message
	for {
		switch name := e.Code.String(); {
		case strings.HasPrefix(msg, "ferry: "):
			msg = msg[len("ferry: "):]
		case msg == name:
			return ""
		case strings.HasPrefix(msg, name+": "):
			msg = msg[len(name)+2:]
		default:
			return msg
		}
	}
}

// Is reports whether target is an *Error with the same code. An Error of
// CodeFrameTooLarge also matches ErrMessageTooLarge: a request over the
// frame limit carries a message too large for the protocol.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || e == nil || t == nil {
		return false
	}
	return t.Code == e.Code || (e.Code == CodeFrameTooLarge && t.Code == CodeMessageTooLarge)
}

// Retryable reports e.Code.Retryable().
func (e *Error) Retryable() bool { return e != nil && e.Code.Retryable() }

// Errorf returns a new Error with the code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError turns a code and message from a response into an error: nil for
// CodeOK, an *Error otherwise.
func AsError(code Code, msg string) error {
	if code == CodeOK {
		return nil
	}
	return &Error{Code: code, Message: msg}
}

// CodeOf returns the code a server should send for err: CodeOK for nil, the
// code of the first *Error in err's chain, CodeTimeout for
// context.DeadlineExceeded, and CodeInternal for anything else.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var we *Error
	if errors.As(err, &we) && we != nil {
		return we.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return CodeTimeout
	}
	return CodeInternal
}

// splitError returns the code, message and leader to put on the wire for
// err. The message of an *Error is sent without the "ferry: code" prefix,
// since the receiver rebuilds it from the code.
func splitError(err error) (Code, string, string) {
	code := CodeOf(err)
	if code == CodeOK {
		return CodeOK, "", ""
	}
	var we *Error
	if !errors.As(err, &we) || we == nil {
		return code, err.Error(), ""
	}
	if we == err {
		return code, we.Message, we.Leader
	}
	// A wrapped Error: keep the outer context, drop the inner prefix.
	msg := strings.Replace(err.Error(), we.Error(), we.Message, 1)
	return code, strings.TrimRight(msg, ": "), we.Leader
}
