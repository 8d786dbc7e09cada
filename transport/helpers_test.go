package transport

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// waitTimeout bounds every polled condition in the tests.
const waitTimeout = 10 * time.Second

// testLogger is silent unless FERRY_TEST_LOG is set, in which case it
// writes debug logs to stderr.
func testLogger() *slog.Logger {
	if os.Getenv("FERRY_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// nodeIPs returns one IP per node: 127.0.0.11, .12, .13 when this machine
// lets the test bind them (all of 127.0.0.0/8 is loopback on Linux), and
// 127.0.0.1 three times otherwise. distinct reports which.
func nodeIPs(t testing.TB) (ips []string, distinct bool) {
	t.Helper()
	candidates := []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}
	for _, ip := range candidates {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Logf("cannot bind %s (%v): all nodes use 127.0.0.1", ip, err)
			return []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, false
		}
		_ = ln.Close()
	}
	return candidates, true
}

// newTestMux starts a Mux on ip with a free port and a silent logger,
// applies edit to the config when not nil, and closes the Mux at the end
// of the test.
func newTestMux(t testing.TB, ip string, edit func(*MuxConfig)) *Mux {
	t.Helper()
	cfg := DefaultMuxConfig(net.JoinHostPort(ip, "0"))
	cfg.Logger = testLogger()
	if edit != nil {
		edit(&cfg)
	}
	m, err := NewMux(cfg)
	if err != nil {
		t.Fatalf("NewMux(%s): %v", cfg.BindAddr, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// mustGroup registers id on m, failing the test on error.
func mustGroup(t testing.TB, m *Mux, id string) *StreamLayer {
	t.Helper()
	l, err := m.Group(id)
	if err != nil {
		t.Fatalf("Group(%q): %v", id, err)
	}
	return l
}

// acceptResult is one StreamLayer.Accept outcome.
type acceptResult struct {
	conn net.Conn
	err  error
}

// acceptAsync runs one Accept on l in the background.
func acceptAsync(l *StreamLayer) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		c, err := l.Accept()
		ch <- acceptResult{c, err}
	}()
	return ch
}

// acceptOne waits for one accepted connection on l and closes it at the
// end of the test.
func acceptOne(t testing.TB, ch <-chan acceptResult) net.Conn {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Accept: %v", r.err)
		}
		t.Cleanup(func() { _ = r.conn.Close() })
		return r.conn
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for Accept")
		return nil
	}
}

// connPair dials from group `from` to the Mux of group `to` and returns
// both ends: dialed and accepted.
func connPair(t testing.TB, from, to *StreamLayer) (dialed, accepted net.Conn) {
	t.Helper()
	ch := acceptAsync(to)
	d, err := from.Dial(raftAddr(to), time.Second)
	if err != nil {
		t.Fatalf("Dial %s: %v", to.Addr(), err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, acceptOne(t, ch)
}

// expectClosed fails the test unless a read on c reports that the peer
// closed it (EOF or reset) within waitTimeout.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	var buf [64]byte
	for {
		_, err := c.Read(buf[:])
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %v", waitTimeout)
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			t.Logf("read ended with %v", err)
		}
		return
	}
}

// roundTrip writes msg on a and expects to read it on b.
func roundTrip(t testing.TB, a, b net.Conn, msg string) {
	t.Helper()
	if _, err := a.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = b.SetReadDeadline(time.Now().Add(waitTimeout))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	_ = b.SetReadDeadline(time.Time{})
	if string(got) != msg {
		t.Fatalf("read %q, want %q", got, msg)
	}
}

// raftAddr returns l's advertised address as raft would store it.
func raftAddr(l *StreamLayer) raft.ServerAddress { return raft.ServerAddress(l.Addr().String()) }
