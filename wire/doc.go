// Package wire is Ferry's client protocol: the one contract shared by the
// server (node) and the Go client library (client).
//
// It owns:
//
//   - framing: a frame is a 4-byte big-endian payload length followed by a
//     msgpack payload of at most MaxFrameBytes (WriteFrame, AppendFrame,
//     ReadFrame, Reader);
//   - the handshake: the client's Hello and the server's Welcome, answered
//     in a Response with ID 0 (ClientHandshake, ServerHandshake);
//   - the envelopes: Request{ID, Op, Body} and Response{ID, Code, Error,
//     Leader, Body}, where Body is the msgpack encoding of the op's
//     XxxRequest or XxxResponse (EncodeBody, DecodeBody);
//   - the op codes (Op), every request and response body type, and the
//     stable numeric result codes (Code) with their Error type.
//
// A connection starts with the handshake; then the client sends requests
// and the server answers each with one response carrying the same ID. Many
// requests may be in flight on one connection and responses may come back
// in any order.
//
// Compatibility rules: Op and Code numbers and ConfigFields bits are
// append-only and never reused; msgpack field names never change meaning;
// decoders ignore unknown fields, so a newer peer may add fields without a
// new ProtocolVersion.
//
// The package must never import another Ferry package (the client depends
// on nothing else), hold connection state, apply queue defaults or business
// rules (the server does), or panic or allocate without bound on any input:
// every payload is checked structurally (MaxItems, MaxNesting) before it is
// decoded, and a frame length above the reader's limit is refused before
// any payload byte is read.
package wire
