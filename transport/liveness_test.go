package transport

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ferrymq/ferry/internal/testwait"
)

func fastProbes(c *SharedConfig) {
	c.ProbeInterval = 20 * time.Millisecond
	c.ProbeTimeout = 200 * time.Millisecond
}

// waitAlive polls PeerAlive until it reports the peer up, and returns the
// channel that closes when it is lost.
func waitAlive(t *testing.T, s *Shared, addr raft.ServerAddress) <-chan struct{} {
	t.Helper()
	var lost <-chan struct{}
	testwait.Until(t, waitTimeout, "the peer to be reported alive", func() bool {
		var alive bool
		alive, lost = s.PeerAlive("b", addr)
		return alive && lost != nil
	})
	return lost
}

func waitClosed(t *testing.T, what string, ch <-chan struct{}, within time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("after %v: %s", within, what)
	}
}

// A peer is reported alive once it answers probes, and lost (its channel
// closed) as soon as its node goes away.
func TestShared_PeerAliveFollowsThePeerNode(t *testing.T) {
	p := newSharedPair(t, fastProbes)
	if alive, lost := p.a.PeerAlive("b", p.target()); alive || lost != nil {
		t.Fatal("a peer never probed is reported alive")
	}
	lost := waitAlive(t, p.a, p.target())
	select {
	case <-lost:
		t.Fatal("lost closed while the peer answers")
	case <-time.After(5 * fastProbeTimeout()):
	}
	if l := p.a.Liveness(); len(l) != 1 || l[0].Addr != string(p.target()) || !l[0].Watched || !l[0].Alive || l[0].Links == 0 {
		t.Fatalf("liveness of an answering peer: %+v", l)
	}
	_ = p.b.Close()
	_ = p.mb.Close()
	waitClosed(t, "lost never closed after the peer node stopped", lost, 2*time.Second)
	if alive, _ := p.a.PeerAlive("b", p.target()); alive {
		t.Fatal("a stopped peer is reported alive")
	}
	if l := p.a.Liveness(); len(l) != 1 || l[0].Alive || !l[0].Watched {
		t.Fatalf("liveness of a stopped peer: %+v", l)
	}
}

func fastProbeTimeout() time.Duration {
	var c SharedConfig
	fastProbes(&c)
	return c.ProbeTimeout
}

// A peer whose connection stays open but stops answering (a partition that
// drops packets) is lost after ProbeTimeout, and alive again once answers
// come back.
func TestShared_PeerAliveLostWhenThePeerGoesSilent(t *testing.T) {
	p := newSharedPair(t, fastProbes)
	proxy := newFreezingProxy(t, p.mb.Addr().String())
	addr := raft.ServerAddress(proxy.addr())
	lost := waitAlive(t, p.a, addr)
	proxy.freeze(true)
	start := time.Now()
	waitClosed(t, "lost never closed with the peer silent", lost, 2*time.Second)
	if d := time.Since(start); d < fastProbeTimeout()/2 {
		t.Fatalf("lost after %v, before the probe timeout %v", d, fastProbeTimeout())
	}
	back := p.a.PeerBack("b", addr)
	if back == nil {
		t.Fatal("PeerBack is nil while the peer is lost")
	}
	proxy.freeze(false)
	waitClosed(t, "back never closed once the peer answered again", back, 2*time.Second)
	waitAlive(t, p.a, addr)
	if p.a.PeerBack("b", addr) != nil {
		t.Fatal("PeerBack is not nil while the peer is alive")
	}
}

// Many groups asking about the same peer share one probe stream: one
// control connection, whatever the number of askers.
func TestShared_PeerAliveSharesOneControlConnection(t *testing.T) {
	p := newSharedPair(t, fastProbes)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() { waitAlive(t, p.a, p.target()) })
	}
	wg.Wait()
	if _, dialed := p.a.connCounts(); dialed != 1 {
		t.Fatalf("%d connections dialed for liveness, want 1", dialed)
	}
}

// freezingProxy forwards TCP connections to a target and can stop
// forwarding without closing them.
type freezingProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
}

func newFreezingProxy(t *testing.T, target string) *freezingProxy {
	t.Helper()
	host, _, _ := net.SplitHostPort(target)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	fp := &freezingProxy{ln: ln}
	fp.cond = sync.NewCond(&fp.mu)
	t.Cleanup(func() {
		_ = ln.Close()
		fp.freeze(false)
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			go fp.pipe(c, up)
			go fp.pipe(up, c)
		}
	}()
	return fp
}

func (fp *freezingProxy) addr() string { return fp.ln.Addr().String() }

func (fp *freezingProxy) freeze(on bool) {
	fp.mu.Lock()
	fp.frozen = on
	fp.mu.Unlock()
	fp.cond.Broadcast()
}

func (fp *freezingProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		fp.mu.Lock()
		for fp.frozen {
			fp.cond.Wait()
		}
		fp.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
