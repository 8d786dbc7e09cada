package transport

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// sendQueueEmptyOf returns a check of whether the kernel's send queue of
// conn is empty: every byte written to it has been acknowledged by the
// peer. It returns nil for a connection without a socket (net.Pipe).
func sendQueueEmptyOf(conn net.Conn) func() bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() bool {
		queued, qerr := -1, error(nil)
		cerr := rc.Control(func(fd uintptr) {
			queued, qerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		})
		return cerr == nil && qerr == nil && queued == 0
	}
}
