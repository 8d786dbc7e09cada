package wire

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Code is the stable numeric outcome of a request. Numbers are part of the
// protocol: once published a number keeps its meaning forever, new codes are
// added with new numbers, and none is ever reused.
type Code uint16

// Result codes. Each comment says when the code is returned and whether a
// client may send the same request again (see Code.Retryable).
const (
	// CodeOK means the request succeeded.
	CodeOK Code = 0

	// CodeInternal means the server hit an unexpected failure (a bug, a
	// storage error). The outcome is not known; not retryable as such.
	CodeInternal Code = 1

	// CodeMalformed means a frame or request body could not be decoded, the
	// op is unknown, or a required field is missing. Not retryable. When the
	// envelope itself is unreadable the server answers with ID 0 and closes
	// the connection.
	CodeMalformed Code = 2

	// CodeProtocolVersion is the handshake refusal: the server does not
	// speak the client's protocol version (or the hello was not a Ferry
	// hello). The server closes the connection. Not retryable.
	CodeProtocolVersion Code = 3

	// CodeInvalidArgument means a field of the request is out of range: an
	// empty or too long id, a partition that does not exist, a visibility or
	// delay above its maximum, a batch that is too big. Not retryable.
	CodeInvalidArgument Code = 4

	// CodeInvalidConfig means a queue configuration failed validation or
	// tried to change a setting fixed at creation; the message names the
	// field. Not retryable.
	CodeInvalidConfig Code = 5

	// CodeQueueNotFound means the named queue does not exist. Not retryable.
	CodeQueueNotFound Code = 6

	// CodeQueueExists answers a create for a name already taken. Not
	// retryable.
	CodeQueueExists Code = 7

	// CodeNotLeader means the node does not lead the partition (or the meta
	// group) the request needs. Response.Leader carries the client address
	// of the leader when the node knows it; otherwise refresh metadata.
	// Retryable at the leader: nothing was done.
	CodeNotLeader Code = 8

	// CodeUnavailable means the request could not be started: no leader is
	// elected, no quorum is reachable, the node is shutting down, or the
	// leader could not write the request to its log (a disk error; it gives
	// up leadership). Nothing was done. Retryable after a backoff.
	CodeUnavailable Code = 9

	// CodeTimeout means the request was started but its outcome is unknown:
	// leadership was lost or the deadline passed before the commit was
	// confirmed. Retryable only where a repeat is harmless: a send with the
	// same message ids is (deduplication), an ack is (a repeat reports
	// CodeMessageNotFound), a receive is not without cost (its leases may
	// have been granted and will expire).
	CodeTimeout Code = 10

	// CodeQueueFull means accepting the message would take the partition
	// past max_depth or max_bytes. Nothing was stored. Retryable after a
	// backoff.
	CodeQueueFull Code = 11

	// CodeMessageTooLarge means a message's body plus headers exceed the
	// queue's max_message_bytes. Not retryable.
	CodeMessageTooLarge Code = 12

	// CodeLeaseLost means a receipt names a delivery that is no longer
	// current: the message was leased again since. Not retryable: the
	// message is handled by the newer delivery.
	CodeLeaseLost Code = 13

	// CodeMessageNotFound means no message (or dead letter) has the
	// receipt's or filter's sequence number: it was acked, deleted or never
	// existed. Not retryable.
	CodeMessageNotFound Code = 14

	// CodeFrameTooLarge means a frame's declared length exceeds the
	// receiver's limit. The server answers with ID 0 and closes the
	// connection. Not retryable: split the batch.
	CodeFrameTooLarge Code = 15

	// CodeLimitExceeded means a queue create would take the cluster past
	// its queue or partition count limit, or came faster than the node's
	// create rate limit; the message says which. Nothing was done. Not
	// retried by clients: a rate-limited create may be sent again after a
	// moment, a create over a count limit after queues are deleted.
	CodeLimitExceeded Code = 16
	// CodeTooManyConnections refuses a new connection: the node is at its
	// connection limit, or at its limit for the client's address. The
	// server sends it in place of the welcome (request ID 0) and closes the
	// connection. Retryable after a backoff, at this node or another.
	CodeTooManyConnections Code = 17
	// CodeUnauthorized means the connection's token is missing or unknown
	// (the server sends it in place of the welcome, request ID 0, and
	// closes the connection), or the token does not permit the request.
	// Nothing was done. Not retryable.
	CodeUnauthorized Code = 18

	codeEnd Code = 19 // one past the last known code
)

var codeNames = [...]string{
	CodeOK:                 "ok",
	CodeInternal:           "internal error",
	CodeMalformed:          "malformed request",
	CodeProtocolVersion:    "unsupported protocol version",
	CodeInvalidArgument:    "invalid argument",
	CodeInvalidConfig:      "invalid queue config",
	CodeQueueNotFound:      "queue not found",
	CodeQueueExists:        "queue exists",
	CodeNotLeader:          "not leader",
	CodeUnavailable:        "unavailable",
	CodeTimeout:            "timeout",
	CodeQueueFull:          "queue full",
	CodeMessageTooLarge:    "message too large",
	CodeLeaseLost:          "lease lost",
	CodeMessageNotFound:    "message not found",
	CodeFrameTooLarge:      "frame too large",
	CodeLimitExceeded:      "limit exceeded",
	CodeTooManyConnections: "too many connections",
	CodeUnauthorized:       "unauthorized",
}

// String returns a short human name of the code, or "code(N)" for a number
// this version does not know.
func (c Code) String() string {
	if c < codeEnd {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// Known reports whether this version of the package defines the code.
func (c Code) Known() bool { return c < codeEnd }

// Retryable reports whether a client may send the same request again, at
// the leader or after a backoff: true for CodeNotLeader, CodeUnavailable,
// CodeTimeout, CodeQueueFull and CodeTooManyConnections. For CodeTimeout the first attempt may have
// taken effect, so only repeat requests that are safe to repeat (see its
// comment). Unknown codes are not retryable.
func (c Code) Retryable() bool {
	switch c {
	case CodeNotLeader, CodeUnavailable, CodeTimeout, CodeQueueFull, CodeTooManyConnections:
		return true
	}
	return false
}

// DecodeMsgpack reads a code, refusing numbers that do not fit in 16 bits
// instead of truncating them.
func (c *Code) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeUint64()
	if err != nil {
		return err
	}
	if n > 0xffff {
		return fmt.Errorf("wire: code %d out of range", n)
	}
	*c = Code(n)
	return nil
}
