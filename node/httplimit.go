package node

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// httpConnLimiter bounds the admin port's open connections, in all and per
// remote IP. The HTTP server itself has no such bound: without it, idle
// connections (or ones stuck in a TLS handshake) can be opened faster than
// the header timeout closes them, until the process runs out of file
// descriptors and its raft and client ports fail too. A connection over a
// bound is closed as soon as it is accepted, so the admin port refuses
// while the node's other ports keep working.
type httpConnLimiter struct {
	net.Listener
	max, maxPerIP int
	onRefuse      func(ip string, open, fromIP int)

	mu      sync.Mutex
	open    int
	perIP   map[string]int
	refused atomic.Uint64
}

// newHTTPConnLimiter wraps ln; onRefuse (may be nil) hears of every
// refusal, outside the limiter's lock.
func newHTTPConnLimiter(ln net.Listener, maxConns, maxPerIP int, onRefuse func(ip string, open, fromIP int)) *httpConnLimiter {
	return &httpConnLimiter{Listener: ln, max: maxConns, maxPerIP: maxPerIP, onRefuse: onRefuse, perIP: make(map[string]int)}
}

// Accept returns the next connection within the bounds, closing the ones
// over them.
func (l *httpConnLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		over := l.open >= l.max || l.perIP[ip] >= l.maxPerIP
		if !over {
			l.open++
			l.perIP[ip]++
		}
		open, fromIP := l.open, l.perIP[ip]
		l.mu.Unlock()
		if !over {
			return &limitedConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		l.refused.Add(1)
		_ = c.Close()
		if l.onRefuse != nil {
			l.onRefuse(ip, open, fromIP)
		}
	}
}

// release counts one of ip's connections closed.
func (l *httpConnLimiter) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// counts returns the open connections and the refusals so far.
func (l *httpConnLimiter) counts() (open int, refused uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.refused.Load()
}

// limitedConn gives its place back once, at its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and frees its place.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// httpRefusalLogEvery is the least time between two log lines about
// refused admin connections.
const httpRefusalLogEvery = 10 * time.Second

// httpRefusal returns the limiter's refusal hook: a warning at most every
// httpRefusalLogEvery. It must not read n's fields that Start sets later.
func (n *Node) httpRefusal() func(ip string, open, fromIP int) {
	var last atomic.Int64
	logger := n.logger
	return func(ip string, open, fromIP int) {
		now := time.Now().UnixNano()
		if prev := last.Load(); now-prev < int64(httpRefusalLogEvery) || !last.CompareAndSwap(prev, now) {
			return
		}
		logger.Warn("admin connection refused: too many open", "remote", ip, "open", open, "open_from_remote", fromIP)
	}
}
