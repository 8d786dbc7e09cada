package node

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

// rawHTTPConn opens a TCP connection from IP from to addr that sends
// nothing, closed at the end of the test.
func rawHTTPConn(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The admin port keeps at most MaxHTTPConns connections open, and
// MaxHTTPConnsPerIP from one IP: idle connections beyond either are closed
// at once and counted, the client port keeps serving, and the admin port
// serves again once connections close.
func TestNode_HTTPConnectionsBoundedPerIPAndInAll(t *testing.T) {
	nd := startLimitedNode(t, func(c *Config) { c.MaxHTTPConns, c.MaxHTTPConnsPerIP = 3, 2 })
	addr := nd.HTTPAddr()
	open := func(n int) {
		t.Helper()
		testwait.UntilNil(t, 5*time.Second, fmt.Sprintf("%d admin connections open", n), func() error {
			if got, _ := nd.httpConns.Counts(); got != n {
				return fmt.Errorf("%d open", got)
			}
			return nil
		})
	}
	first := rawHTTPConn(t, "127.0.0.1", addr)
	rawHTTPConn(t, "127.0.0.1", addr)
	open(2)
	if !waitClosed(rawHTTPConn(t, "127.0.0.1", addr), 5*time.Second) {
		t.Fatal("a third idle connection from one IP was kept")
	}
	rawHTTPConn(t, "127.0.0.2", addr)
	open(3)
	if !waitClosed(rawHTTPConn(t, "127.0.0.3", addr), 5*time.Second) {
		t.Fatal("a connection beyond the node's bound was kept")
	}
	if _, refused := nd.httpConns.Counts(); refused != 2 {
		t.Fatalf("%d refusals counted, want 2", refused)
	}
	// The client port is untouched.
	c, err := dialFrom("127.0.0.1", nd.ClientAddr())
	if err != nil {
		t.Fatalf("client connection while the admin port is full: %v", err)
	}
	c.Close()
	first.Close()
	open(2)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("admin request after a connection closed: %v", err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "ferry_http_connections_refused_total 2") {
		t.Fatalf("metrics: %s, want 200 with ferry_http_connections_refused_total 2", resp.Status)
	}
}
