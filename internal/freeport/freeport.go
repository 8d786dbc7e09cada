// Package freeport picks loopback addresses for test clusters whose port
// must be known before the listener opens (gossip binds TCP and UDP on one
// port, so port 0 will not do).
//
// A port the kernel hands out for port 0 comes from the ephemeral range,
// where the source ports of outgoing connections come from too: between
// the pick and the bind, any connection on the machine may take it. The
// ports picked here lie below that range, at random, so only another
// picker can race for them, and rarely.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
)

// Bounds of the picked ports: below Linux's default ephemeral range
// (32768-60999), above the ports of common services.
const (
	portMin  = 20000
	portMax  = 32000
	triesMax = 200
)

// ErrNone: no free port was found in triesMax tries.
var ErrNone = errors.New("freeport: no free port found")

// Loopback returns "ip:port" where port is free for TCP and UDP on ip at
// the moment of the call.
func Loopback(ip string) (string, error) {
	for range triesMax {
		addr := net.JoinHostPort(ip, strconv.Itoa(portMin+rand.IntN(portMax-portMin)))
		if free(addr) {
			return addr, nil
		}
	}
	return "", ErrNone
}

func free(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	return pc.Close() == nil
}
