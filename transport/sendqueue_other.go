//go:build !linux

package transport

import "net"

// sendQueueEmptyOf returns nil: only Linux reports a socket's send queue
// here, so elsewhere raft's answers always go through the answer writer.
func sendQueueEmptyOf(net.Conn) func() bool { return nil }
