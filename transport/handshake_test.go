package transport

import (
	"net"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

// rawDial opens a plain TCP connection to m, bypassing StreamLayer.Dial.
func rawDial(t testing.TB, m *Mux) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", m.Addr().String(), time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", m.Addr(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// checkGroupStillServes proves m keeps routing after a rejection: a good
// connection for l gets through.
func checkGroupStillServes(t testing.TB, m *Mux, l *StreamLayer) {
	t.Helper()
	from := mustGroup(t, newTestMux(t, "127.0.0.1", nil), l.ID())
	d, a := connPair(t, from, l)
	roundTrip(t, d, a, "hello")
}

func TestTransport_BadHeadersAreClosed(t *testing.T) {
	m := newTestMux(t, "127.0.0.1", nil)
	l := mustGroup(t, m, "p1")
	cases := map[string][]byte{
		"unknown group": appendHeader(nil, "p2"),
		"garbage":       []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"bad version":   []byte("FRYR\x07\x02p1"),
		"empty id":      []byte("FRYR\x01\x00"),
		"bad id byte":   []byte("FRYR\x01\x02p\x00"),
	}
	rejected := uint64(0)
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			c := rawDial(t, m)
			if _, err := c.Write(b); err != nil {
				t.Fatalf("write: %v", err)
			}
			expectClosed(t, c)
			rejected++
			testwait.Until(t, waitTimeout, "rejection to be counted", func() bool { return m.Stats().Rejected == rejected })
		})
	}
	if s := m.Stats(); s.Accepted != 0 || s.Handshaking != 0 || s.Groups != 1 {
		t.Fatalf("Stats = %+v, want nothing accepted or pending", s)
	}
	checkGroupStillServes(t, m, l)
}

func TestTransport_SlowHandshakeDropped(t *testing.T) {
	const timeout = 300 * time.Millisecond
	m := newTestMux(t, "127.0.0.1", func(c *MuxConfig) { c.HandshakeTimeout = timeout })
	l := mustGroup(t, m, "p1")

	start := time.Now() // before the dials, so before the server's deadlines
	silent := rawDial(t, m)
	partial := rawDial(t, m)
	if _, err := partial.Write([]byte("FRYR\x01\x02p")); err != nil { // one id byte missing
		t.Fatalf("write: %v", err)
	}
	testwait.Until(t, waitTimeout, "both connections to be handshaking", func() bool { return m.Stats().Handshaking == 2 })
	// Meanwhile a well-behaved dialer is not held up by them.
	checkGroupStillServes(t, m, l)

	for _, c := range []net.Conn{silent, partial} {
		expectClosed(t, c)
	}
	if elapsed := time.Since(start); elapsed < timeout {
		t.Fatalf("dropped after %v, before HandshakeTimeout %v", elapsed, timeout)
	}
	testwait.Until(t, waitTimeout, "handshakes to be cleared", func() bool {
		s := m.Stats()
		return s.Handshaking == 0 && s.Rejected == 2
	})
}

func TestTransport_HeaderDeadlineCleared(t *testing.T) {
	const timeout = 200 * time.Millisecond
	m := newTestMux(t, "127.0.0.1", func(c *MuxConfig) { c.HandshakeTimeout = timeout })
	l := mustGroup(t, m, "p1")
	from := mustGroup(t, newTestMux(t, "127.0.0.1", nil), "p1")
	d, a := connPair(t, from, l)
	// Idle for longer than the handshake deadline: the accepted
	// connection must not time out, as raft sets no deadline of its own.
	time.Sleep(2 * timeout)
	roundTrip(t, d, a, "late but fine")
}

func TestTransport_CloseReleasesBlockedReader(t *testing.T) {
	for _, closeMux := range []bool{false, true} {
		name := "group close"
		if closeMux {
			name = "mux close"
		}
		t.Run(name, func(t *testing.T) {
			m := newTestMux(t, "127.0.0.1", nil)
			l := mustGroup(t, m, "p1")
			// An untracked peer that never closes its side, as a remote
			// raft leader with a pooled connection would not.
			peer := rawDial(t, m)
			ch := acceptAsync(l)
			if _, err := peer.Write(appendHeader(nil, "p1")); err != nil {
				t.Fatalf("write header: %v", err)
			}
			accepted := acceptOne(t, ch)
			readErr := make(chan error, 1)
			go func() {
				var b [1]byte
				_, err := accepted.Read(b[:]) // blocks: no deadline, no data
				readErr <- err
			}()
			if closeMux {
				_ = m.Close()
			} else {
				_ = l.Close()
			}
			select {
			case err := <-readErr:
				if err == nil {
					t.Fatal("read returned data, want an error")
				}
			case <-time.After(waitTimeout):
				t.Fatal("blocked reader not released by Close")
			}
			expectClosed(t, peer)
			if s := m.Stats(); s.Accepted != 0 {
				t.Fatalf("Stats after close = %+v, want no accepted connections", s)
			}
		})
	}
}
