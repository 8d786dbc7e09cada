package connlimit

import (
	"io"
	"net"
	"testing"
	"time"
)

// dialFrom opens a connection from IP from to addr, closed at the end of
// the test.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the peer closes c within d.
func closedByPeer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF
}

// The listener hands out connections within both bounds, closes and
// counts the others at once, reports every refusal, and gives a place
// back when a connection closes.
func TestListener_BoundsInAllAndPerIP(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusals := make(chan string, 8)
	l := New(raw, 3, 2, func(ip string, open, fromIP int) { refusals <- ip })
	defer l.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	take := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no connection accepted")
		}
		return nil
	}
	addr := raw.Addr().String()
	dialFrom(t, "127.0.0.1", addr)
	a := take()
	dialFrom(t, "127.0.0.1", addr)
	take()
	if c := dialFrom(t, "127.0.0.1", addr); !closedByPeer(c, 5*time.Second) {
		t.Fatal("a third connection from one IP was kept")
	}
	if ip := <-refusals; ip != "127.0.0.1" {
		t.Fatalf("refusal reported for %q", ip)
	}
	dialFrom(t, "127.0.0.2", addr)
	take()
	if c := dialFrom(t, "127.0.0.3", addr); !closedByPeer(c, 5*time.Second) {
		t.Fatal("a connection beyond the bound in all was kept")
	}
	if open, refused := l.Counts(); open != 3 || refused != 2 {
		t.Fatalf("counts: %d open, %d refused; want 3 and 2", open, refused)
	}
	a.Close()
	a.Close() // a second Close gives nothing back
	if open, _ := l.Counts(); open != 2 {
		t.Fatalf("%d open after one closed, want 2", open)
	}
	dialFrom(t, "127.0.0.1", addr)
	take()
	if open, refused := l.Counts(); open != 3 || refused != 2 {
		t.Fatalf("counts: %d open, %d refused; want 3 and 2", open, refused)
	}
}
