package transport

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ferrymq/ferry/internal/testwait"
)

// dialFrom opens a raw TCP connection to m from ip, sending nothing, and
// closes it at the end of the test.
func dialFrom(t *testing.T, m *Mux, ip string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: waitTimeout}
	c, err := d.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Connections that never finish their handshake are bounded per remote IP
// and in all: one beyond either bound is closed at once and counted, and a
// freed place admits a connection again.
func TestTransport_HandshakesBoundedPerIPAndInAll(t *testing.T) {
	ips, distinct := nodeIPs(t)
	if !distinct {
		t.Fatal("needs 127.0.0.11-13 bindable (all of 127.0.0.0/8 is loopback on Linux) to tell remote IPs apart")
	}
	m := newTestMux(t, "127.0.0.1", func(c *MuxConfig) {
		c.MaxHandshakesPerIP, c.MaxHandshakes = 2, 3
		c.HandshakeTimeout = time.Minute // only the bounds may close them
	})
	l := mustGroup(t, m, "meta")
	handshaking := func(n int) {
		t.Helper()
		testwait.Until(t, waitTimeout, "handshaking connections", func() bool { return m.Stats().Handshaking == n })
	}
	a1 := dialFrom(t, m, ips[0])
	dialFrom(t, m, ips[0])
	handshaking(2)
	expectClosed(t, dialFrom(t, m, ips[0])) // a third from the same IP
	if s := m.Stats(); s.Busy != 1 || s.Rejected != 1 || s.Handshaking != 2 {
		t.Fatalf("after the per-IP bound: %+v", s)
	}
	dialFrom(t, m, ips[1]) // another IP still gets in
	handshaking(3)
	expectClosed(t, dialFrom(t, m, ips[2])) // beyond the bound in all
	if s := m.Stats(); s.Busy != 2 || s.Handshaking != 3 {
		t.Fatalf("after the bound in all: %+v", s)
	}
	_ = a1.Close()
	handshaking(2)
	// A member dialing now completes its header and reaches the group.
	from := mustGroup(t, newTestMux(t, ips[0], nil), "meta")
	dialed, accepted := connPair(t, from, l)
	roundTrip(t, dialed, accepted, "after the bound")
}

// A node sets up at most MaxDialing connections at once; a dial finding
// every slot taken waits within its timeout, then fails with ErrDialBusy,
// and a freed slot serves the next dial.
func TestTransport_DialsWaitForASlot(t *testing.T) {
	issue := testCA(t)
	m := newTestMux(t, "127.0.0.1", func(c *MuxConfig) {
		withTLS(issue("n1"))(c)
		c.MaxDialing = 1
	})
	l := mustGroup(t, m, "p1")
	// A peer that accepts TCP but never answers the TLS handshake holds
	// the only slot.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := silent.Accept()
		if err == nil {
			held <- c
		}
	}()
	first := make(chan error, 1)
	go func() {
		_, err := l.Dial(raftAddrOf(silent.Addr()), time.Minute)
		first <- err
	}()
	conn := <-held

	start := time.Now()
	_, err = l.Dial(raftAddrOf(silent.Addr()), 200*time.Millisecond)
	if !errors.Is(err, ErrDialBusy) {
		t.Fatalf("dial with every slot taken: %v, want ErrDialBusy", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("dial gave up after %v, before its timeout", waited)
	}
	_ = conn.Close() // the first dial fails and frees its slot
	if err := <-first; err == nil {
		t.Fatal("dial to a peer that closed during the handshake succeeded")
	}
	peer := mustGroup(t, newTestMux(t, "127.0.0.1", withTLS(issue("n2"))), "p1")
	dialed, accepted := connPair(t, l, peer)
	roundTrip(t, dialed, accepted, "slot freed")
}

func raftAddrOf(a net.Addr) raft.ServerAddress { return raft.ServerAddress(a.String()) }
