package wire

import (
	"errors"
	"fmt"
	"io"
)

// Handshake constants.
const (
	// Magic opens every Hello, so a server can tell a Ferry client from a
	// stray connection.
	Magic = "FERRY"
	// ProtocolVersion is the version of the protocol this package speaks.
	// It changes only for an incompatible change; adding ops, codes or
	// fields does not need a new version (unknown fields are ignored).
	ProtocolVersion uint16 = 1
)

// Hello is the first frame of every connection, sent by the client.
type Hello struct {
	// Magic must be the Magic constant.
	Magic string `msgpack:"magic"`
	// Version is the protocol version the client speaks.
	Version uint16 `msgpack:"version"`
	// Client names the client software and version, for logs
	// ("ferry-go/0.1").
	Client string `msgpack:"client,omitempty"`
	// Token is the client's secret, checked once for the connection by a
	// server that requires tokens: a missing or unknown token is answered
	// CodeUnauthorized in place of the welcome. At most TokenBytesMax
	// bytes.
	Token string `msgpack:"token,omitempty"`
}

// TokenBytesMax is the longest token a Hello carries.
const TokenBytesMax = 512

// Welcome is the server's answer to an accepted Hello. It travels as the
// body of a Response with ID 0; a refused Hello gets a Response with ID 0
// and CodeProtocolVersion (or CodeMalformed) instead, and the connection is
// closed.
type Welcome struct {
	// Version is the protocol version the connection will use.
	Version uint16 `msgpack:"version"`
	// NodeID is the answering node's cluster-wide id.
	NodeID string `msgpack:"node_id"`
	// Cluster names the cluster, when the operator gave it a name.
	Cluster string `msgpack:"cluster,omitempty"`
	// Server names the server software and version, for logs.
	Server string `msgpack:"server,omitempty"`
	// MaxFrameBytes is the largest request frame the server accepts (0:
	// MaxFrameBytes); clients size their batches below it.
	MaxFrameBytes int `msgpack:"max_frame_bytes,omitempty"`
}

// NewHello returns the Hello of this package's protocol version.
func NewHello(client string) Hello {
	return Hello{Magic: Magic, Version: ProtocolVersion, Client: client}
}

// CheckHello is the server's test of a Hello: nil when it can serve the
// client, a CodeMalformed Error when the magic is wrong, a
// CodeProtocolVersion Error naming both versions when they differ.
func CheckHello(h Hello) error {
	if h.Magic != Magic {
		return Errorf(CodeMalformed, "hello without the %q magic", Magic)
	}
	if len(h.Token) > TokenBytesMax {
		return Errorf(CodeInvalidArgument, "hello token of %d bytes, more than %d", len(h.Token), TokenBytesMax)
	}
	if h.Version != ProtocolVersion {
		return Errorf(CodeProtocolVersion, "client speaks version %d, server speaks version %d",
			h.Version, ProtocolVersion)
	}
	return nil
}

// CheckWelcome is the client's test of a Welcome: nil when the server
// chose this package's version, a CodeProtocolVersion Error otherwise.
func CheckWelcome(w Welcome) error {
	if w.Version != ProtocolVersion {
		return Errorf(CodeProtocolVersion, "server chose version %d, client speaks version %d",
			w.Version, ProtocolVersion)
	}
	return nil
}

// ClientHandshake sends hello on w and reads the server's answer from r. It
// returns the Welcome, or the server's refusal as an *Error, or the
// transport's error. The caller sets deadlines and closes the connection on
// error.
func ClientHandshake(w io.Writer, r *Reader, hello Hello) (Welcome, error) {
	if err := WriteFrame(w, hello); err != nil {
		return Welcome{}, err
	}
	resp, err := r.ReadResponse()
	if err != nil {
		return Welcome{}, fmt.Errorf("wire: read welcome: %w", err)
	}
	if resp.ID != 0 {
		return Welcome{}, Errorf(CodeMalformed, "welcome with request id %d", resp.ID)
	}
	var wel Welcome
	if err := resp.Decode(&wel); err != nil {
		return Welcome{}, err
	}
	if err := CheckWelcome(wel); err != nil {
		return Welcome{}, err
	}
	return wel, nil
}

// ServerHandshake reads a Hello from r (with the MaxHelloBytes limit, the
// Reader's own limit restored afterwards), checks it and answers on w:
// welcome when accepted, an error response when the hello is refused or
// unreadable. It returns the Hello, or the reason the connection must be
// closed. The caller sets deadlines and closes the connection on error.
func ServerHandshake(w io.Writer, r *Reader, welcome Welcome) (Hello, error) {
	return ServerHandshakeCheck(w, r, welcome, nil)
}

// ServerHandshakeCheck is ServerHandshake with a further test of the Hello
// (a token check): when check returns an *Error the client gets it in place
// of the welcome, and the error is returned.
func ServerHandshakeCheck(w io.Writer, r *Reader, welcome Welcome, check func(Hello) error) (Hello, error) {
	saved := r.max
	r.max = MaxHelloBytes
	var h Hello
	err := r.Read(&h)
	r.max = saved
	if err == nil {
		err = CheckHello(h)
	}
	if err == nil && check != nil {
		err = check(h)
	}
	if err != nil {
		var we *Error
		if errors.As(err, &we) {
			// Best effort: the peer may not even be a Ferry client.
			_ = WriteFrame(w, ErrorResponse(0, err))
		}
		return h, err
	}
	if welcome.Version == 0 {
		welcome.Version = ProtocolVersion
	}
	resp, err := NewResponse(0, welcome)
	if err != nil {
		return h, err
	}
	return h, WriteFrame(w, resp)
}
