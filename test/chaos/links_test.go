package chaos

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/test/chaos/nfq"
)

// The tests here use their own chain and NFQUEUE number, and never touch
// tc, so that they can run beside a chaos run.
const (
	testLinkChain = "FERRY-CHAOS-LINKTEST"
	testLinkQueue = 7318
)

func TestDrawShape_Ranges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		sh := drawShape(rng)
		if sh.Delay < 20*time.Millisecond || sh.Delay > 150*time.Millisecond ||
			sh.Jitter < 5*time.Millisecond || sh.Jitter > 30*time.Millisecond ||
			sh.Reorder <= 0 || sh.Reorder > 0.25 || sh.Loss <= 0 || sh.Loss > 0.15 || sh.Rate == "" {
			t.Fatalf("drew %+v, outside the documented ranges", sh)
		}
	}
}

// oneWay measures the median latency of n datagrams from src to dst (one
// clock: both ends are on this machine).
func oneWay(t *testing.T, src, dst string, n int) time.Duration {
	t.Helper()
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(dst)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(src)}, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range n {
		if _, err := c.Write(binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))); err != nil {
			t.Fatal(err)
		}
	}
	var lat []time.Duration
	buf := make([]byte, 64)
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(lat) < n {
		k, err := srv.Read(buf)
		if err != nil {
			t.Fatalf("%s→%s: %d of %d datagrams: %v", src, dst, len(lat), n, err)
		}
		if k == 8 {
			lat = append(lat, time.Since(time.Unix(0, int64(binary.BigEndian.Uint64(buf)))))
		}
	}
	slices.Sort(lat)
	return lat[n/2]
}

// TestShaper_DelaysOneWayThroughTheChain slows one direction of a pair
// the way a slow-link-one-way fault does on a kernel without netem (loss
// rule, queueing rule, delayer), without the htb part, and checks that
// only that direction is delayed and that healing stops the delayer.
func TestShaper_DelaysOneWayThroughTheChain(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for iptables and NFQUEUE")
	}
	if q, err := nfq.Open(testLinkQueue, 16); err != nil {
		t.Skipf("NFQUEUE unavailable: %v", err)
	} else {
		q.Close()
	}
	fw := newFirewall(testLinkChain)
	if !fw.Available() {
		t.Skipf("iptables unavailable: %s", fw.Reason())
	}
	defer fw.Close()
	a := &Node{ID: "a", IP: "127.0.5.21"}
	b := &Node{ID: "b", IP: "127.0.5.22"}
	c := &Node{ID: "c", IP: "127.0.5.23"}
	s := &Shaper{ok: true, queue: testLinkQueue}
	const delay = 60 * time.Millisecond
	detail := s.startDelayer(LinkShape{Delay: delay, Jitter: 5 * time.Millisecond, Reorder: 0.1, Seed: 1})
	if s.delayer == nil || !strings.Contains(detail, "delay 60ms ±5ms") || !strings.Contains(detail, "reorder 10%") {
		t.Fatalf("delayer not started, or detail does not state what it applies: %q", detail)
	}
	defer s.stopDelayer()
	if err := s.pairRules(fw, [][2]*Node{{a, b}}, 0); err != nil {
		t.Fatal(err)
	}
	const n = 21
	slow, back, other := oneWay(t, a.IP, b.IP, n), oneWay(t, b.IP, a.IP, n), oneWay(t, c.IP, b.IP, n)
	t.Logf("median one-way latency: a→b %v, b→a %v, c→b %v (detail: %s)", slow, back, other, detail)
	if slow < delay-10*time.Millisecond || slow > 2*delay+250*time.Millisecond {
		t.Errorf("a→b median latency %v, want about %v", slow, delay)
	}
	if back > 30*time.Millisecond || other > 30*time.Millisecond {
		t.Errorf("b→a median latency %v, c→b %v; want both well under %v", back, other, delay)
	}
	if err := errors.Join(fw.Heal(), s.stopDelayer()); err != nil {
		t.Fatal(err)
	}
	st, ok := s.LastDelayStats()
	if !ok || st.Queued != n || st.Accepted != n {
		t.Errorf("delayer stats %+v (%v), want the %d datagrams a→b queued and accepted", st, ok, n)
	}
	if fast := oneWay(t, a.IP, b.IP, n); fast > 30*time.Millisecond {
		t.Errorf("a→b median latency %v after heal, want well under %v", fast, delay)
	}
}

// TestShaper_WithoutDelayerSaysSo checks that a link slowed where the
// delayer cannot run gets no queueing rules and a detail that says why.
func TestShaper_WithoutDelayerSaysSo(t *testing.T) {
	t.Run("turned-off", func(t *testing.T) {
		t.Setenv("FERRY_CHAOS_NO_NFQUEUE", "1")
		s := &Shaper{ok: true, queue: testLinkQueue}
		if d := s.startDelayer(LinkShape{Delay: 50 * time.Millisecond}); s.delayer != nil ||
			!strings.Contains(d, "no delay or reordering") || !strings.Contains(d, "FERRY_CHAOS_NO_NFQUEUE=1") {
			t.Errorf("detail %q, delayer %v; want no delayer and the reason", d, s.delayer)
		}
	})
	t.Run("queue-busy", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root for NFQUEUE")
		}
		q, err := nfq.Open(testLinkQueue, 16)
		if err != nil {
			t.Skipf("NFQUEUE unavailable: %v", err)
		}
		defer q.Close()
		s := &Shaper{ok: true, queue: testLinkQueue}
		if d := s.startDelayer(LinkShape{Delay: 50 * time.Millisecond}); s.delayer != nil ||
			!strings.Contains(d, "no delay or reordering") || !strings.Contains(d, "already bound") {
			t.Errorf("detail %q, delayer %v; want no delayer and the reason", d, s.delayer)
		}
	})
}
