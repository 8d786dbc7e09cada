// Package connlimit bounds the connections an HTTP port keeps open, in all
// and per remote IP address, refusing the ones over a bound as soon as
// they are accepted. The node's admin port and the SQS port use it.
//
// An HTTP server has no such bound of its own: without it, idle
// connections (or ones stuck in a TLS handshake) can be opened faster than
// the header timeout closes them, until the process runs out of file
// descriptors and its other ports (raft, client) fail to accept too.
package connlimit

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Listener is a net.Listener that keeps at most a fixed number of
// accepted connections open, and fewer from any one IP address. A
// connection over a bound is closed at once and counted; Accept then
// waits for the next one.
type Listener struct {
	net.Listener
	max, maxPerIP int
	onRefuse      func(ip string, open, fromIP int)

	mu      sync.Mutex
	open    int
	perIP   map[string]int // entries only for IPs with open connections
	refused atomic.Uint64
}

// New wraps ln so that at most maxConns accepted connections are open,
// at most maxPerIP of them from one IP; onRefuse (may be nil) hears of
// every refusal, outside the listener's lock, with the counts at that
// moment. Wrap the plain TCP listener (before TLS), so that a refused
// connection costs no handshake.
func New(ln net.Listener, maxConns, maxPerIP int, onRefuse func(ip string, open, fromIP int)) *Listener {
	return &Listener{Listener: ln, max: maxConns, maxPerIP: maxPerIP, onRefuse: onRefuse, perIP: make(map[string]int)}
}

// Accept returns the next connection within the bounds, closing the ones
// over them.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := RemoteIP(c)
		l.mu.Lock()
		over := l.open >= l.max || l.perIP[ip] >= l.maxPerIP
		if !over {
			l.open++
			l.perIP[ip]++
		}
		open, fromIP := l.open, l.perIP[ip]
		l.mu.Unlock()
		if !over {
			return &conn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		l.refused.Add(1)
		_ = c.Close()
		if l.onRefuse != nil {
			l.onRefuse(ip, open, fromIP)
		}
	}
}

// release counts one of ip's connections closed.
func (l *Listener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// Counts returns the connections open now and the refusals so far.
func (l *Listener) Counts() (open int, refused uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.refused.Load()
}

// conn gives its place back once, at its first Close.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and frees its place.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// RemoteIP is the IP address of the connection's peer ("" when it has
// none, as for a pipe).
func RemoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return ""
	}
	return host
}

// RefusalLogEvery is the least time between two log lines of a
// LogRefusals hook.
const RefusalLogEvery = 10 * time.Second

// LogRefusals returns a refusal hook for New that warns on logger at most
// every RefusalLogEvery, naming the port ("admin", "SQS").
func LogRefusals(logger *slog.Logger, port string) func(ip string, open, fromIP int) {
	var last atomic.Int64
	msg := port + " connection refused: too many open"
	return func(ip string, open, fromIP int) {
		now := time.Now().UnixNano()
		if prev := last.Load(); now-prev < int64(RefusalLogEvery) || !last.CompareAndSwap(prev, now) {
			return
		}
		logger.Warn(msg, "remote", ip, "open", open, "open_from_remote", fromIP)
	}
}

// Metrics returns the two series of a limited port for /metrics: the
// gauge name (connections open now) and the counter name_refused_total
// (connections closed at once at a bound). counts reads them; it may
// report zeros while the port is not open yet. port names the port in
// the help texts ("HTTP admin", "SQS API").
func Metrics(name, port string, counts func() (open int, refused uint64)) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: name, Help: fmt.Sprintf("%s connections open now.", port),
		}, func() float64 {
			open, _ := counts()
			return float64(open)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: name + "_refused_total", Help: fmt.Sprintf("%s connections closed at once at the node or per-address limit.", port),
		}, func() float64 {
			_, refused := counts()
			return float64(refused)
		}),
	}
}
