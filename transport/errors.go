package transport

import (
	"errors"
	"fmt"
	"net"
)

// Errors returned by the package, alone or wrapped with detail naming the
// field, group or address concerned. Test for them with errors.Is.
var (
	// ErrInvalidConfig is returned by MuxConfig.Validate and NewMux; the
	// message names the offending field and what it must be.
	ErrInvalidConfig = errors.New("transport: invalid config")

	// ErrInvalidGroupID is returned by Mux.Group and ValidateGroupID for an
	// id that is empty, longer than MaxGroupIDLen bytes, or holds a byte
	// outside printable ASCII.
	ErrInvalidGroupID = errors.New("transport: invalid group id")

	// ErrMuxClosed is returned by Mux.Group and StreamLayer.Dial once the
	// Mux has been closed.
	ErrMuxClosed = errors.New("transport: mux closed")

	// ErrGroupExists is returned by Mux.Group when a StreamLayer for the id
	// is registered and not yet closed.
	ErrGroupExists = errors.New("transport: group already registered")

	// ErrGroupClosed is returned by StreamLayer.Accept and StreamLayer.Dial
	// after the StreamLayer (or its Mux) was closed. It wraps net.ErrClosed.
	ErrGroupClosed = fmt.Errorf("transport: group listener closed: %w", net.ErrClosed)

	// ErrDialBusy is returned by StreamLayer.Dial when no slot to set up
	// a connection (MuxConfig.MaxDialing) freed within the dial timeout.
	ErrDialBusy = errors.New("transport: too many connections being set up")

	// ErrBadHeader describes an accepted connection whose header was
	// malformed, of an unknown version, or did not arrive within
	// MuxConfig.HandshakeTimeout. Such connections are closed and logged at
	// debug level; the error never reaches a caller of the package API.
	ErrBadHeader = errors.New("transport: bad connection header")

	// ErrTLSRefused describes an accepted connection whose TLS handshake
	// failed: no certificate, one not signed by the cluster CA, plaintext,
	// or too slow. Such connections are closed before any raft byte is
	// read, counted in Stats.TLSRefused and logged.
	ErrTLSRefused = errors.New("transport: TLS handshake refused")

	// ErrUnknownGroup describes an accepted connection whose header names a
	// group not registered on this Mux. Such connections are closed and
	// logged at debug level.
	ErrUnknownGroup = errors.New("transport: unknown group")

	// ErrBadFrame describes a frame on a shared connection that is too
	// long, malformed or of the wrong kind. The connection it came on is
	// closed.
	ErrBadFrame = errors.New("transport: bad frame")

	// ErrBusy is returned by a shared transport's RPC when a bound was
	// reached: RPCs in flight on a connection, peers, or (answered by the
	// peer) appends queued for its group. raft retries.
	ErrBusy = errors.New("transport: busy")

	// ErrTimeout is returned by a shared transport's RPC that was not
	// answered within SharedConfig.Timeout.
	ErrTimeout = errors.New("transport: RPC timed out")

	// ErrConnLost is returned by the RPCs in flight on a shared connection
	// that failed; the next RPC dials again.
	ErrConnLost = errors.New("transport: connection lost")

	// ErrRemote wraps the error message a peer answered an RPC with (for
	// example a group it does not host).
	ErrRemote = errors.New("transport: peer refused RPC")
)
