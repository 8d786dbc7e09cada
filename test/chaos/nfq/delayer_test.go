package nfq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferrymq/ferry/internal/testwait"
)

// testChain is the iptables chain these tests use, hooked into OUTPUT only
// (so a packet on lo is queued once). The addresses are 127.0.5.x, apart
// from those of the chaos suite and of other packages' tests.
const testChain = "FERRY-NFQ-TEST"

const (
	addrA = "127.0.5.1"
	addrB = "127.0.5.2"
	addrC = "127.0.5.3"
)

func ipt(args ...string) error {
	bin, err := exec.LookPath("iptables")
	if err != nil {
		bin = "/usr/sbin/iptables"
	}
	out, err := exec.Command(bin, append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func removeTestChain() {
	for i := 0; i < 10 && ipt("-D", "OUTPUT", "-j", testChain) == nil; i++ {
	}
	_ = ipt("-F", testChain)
	_ = ipt("-X", testChain)
}

// needNFQueue skips the test unless it runs as root on a kernel with
// nfnetlink_queue and iptables, and installs the test chain.
func needNFQueue(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN) for NFQUEUE and iptables")
	}
	q, err := Open(7310, 16)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("NFQUEUE unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	removeTestChain()
	if err := ipt("-N", testChain); err != nil {
		t.Skipf("iptables unusable: %v", err)
	}
	if err := ipt("-I", "OUTPUT", "1", "-j", testChain); err != nil {
		removeTestChain()
		t.Fatal(err)
	}
	t.Cleanup(removeTestChain)
}

// queuePair sends UDP from src to dst through queue num.
func queuePair(t *testing.T, src, dst string, num int) {
	t.Helper()
	if err := ipt("-A", testChain, "-s", src, "-d", dst, "-p", "udp", "-j", "NFQUEUE",
		"--queue-num", fmt.Sprint(num), "--queue-bypass"); err != nil {
		t.Fatal(err)
	}
}

func startDelayer(t *testing.T, cfg Config) *Delayer {
	t.Helper()
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	return d
}

func listen(t *testing.T, ip string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dial(t *testing.T, src string, dst *net.UDPConn) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(src)}, dst.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo answers every datagram on c until c closes.
func echo(c *net.UDPConn) {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			return
		}
		c.WriteToUDP(buf[:n], from)
	}
}

// medianRTT measures n round trips over c and returns their median.
func medianRTT(t *testing.T, c *net.UDPConn, n int) time.Duration {
	t.Helper()
	var rtts []time.Duration
	buf := make([]byte, 64)
	for i := range n {
		start := time.Now()
		if _, err := c.Write([]byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("round trip %d from %s: %v", i, c.LocalAddr(), err)
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}

func TestDelayer_DelaysOnlyTheChosenPair(t *testing.T) {
	needNFQueue(t)
	const delay = 80 * time.Millisecond
	d := startDelayer(t, Config{Queue: 7311, Delay: delay, Jitter: 10 * time.Millisecond, Seed: 1})
	queuePair(t, addrA, addrB, 7311)
	srv := listen(t, addrB)
	go echo(srv)
	slow, fast := dial(t, addrA, srv), dial(t, addrC, srv)

	const n = 9
	rttSlow := medianRTT(t, slow, n)
	rttFast := medianRTT(t, fast, n)
	t.Logf("median round trip %s→%s (one way delayed %v±10ms): %v; %s→%s: %v; stats %+v",
		addrA, addrB, delay, rttSlow, addrC, addrB, rttFast, d.Stats())
	if rttSlow < delay-10*time.Millisecond || rttSlow > delay+250*time.Millisecond {
		t.Errorf("delayed pair's median round trip %v, want about %v", rttSlow, delay)
	}
	if rttFast > 30*time.Millisecond {
		t.Errorf("untouched pair's median round trip %v, want well under the %v delay", rttFast, delay)
	}
	if st := d.Stats(); st.Queued != n || st.Accepted != n {
		t.Errorf("queued %d, accepted %d; want %d each (only %s→%s is queued)", st.Queued, st.Accepted, n, addrA, addrB)
	}
}

// sendSeq sends n sequence-numbered datagrams from c, one per millisecond.
func sendSeq(t *testing.T, c *net.UDPConn, from, n int) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := from; i < from+n; i++ {
		if _, err := c.Write(binary.BigEndian.AppendUint32(nil, uint32(i))); err != nil {
			t.Fatal(err)
		}
		<-tick.C
	}
}

// recvSeq reads n sequence numbers from c, failing once deadline passes.
func recvSeq(t *testing.T, c *net.UDPConn, n int, deadline time.Time) []int {
	t.Helper()
	var got []int
	buf := make([]byte, 64)
	c.SetReadDeadline(deadline)
	for len(got) < n {
		k, _, err := c.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("received %d of %d datagrams: %v (got %v)", len(got), n, err, got)
		}
		if k == 4 {
			got = append(got, int(binary.BigEndian.Uint32(buf)))
		}
	}
	return got
}

func inversions(seq []int) int {
	n := 0
	for i := 1; i < len(seq); i++ {
		if seq[i] < seq[i-1] {
			n++
		}
	}
	return n
}

func TestDelayer_Reorders(t *testing.T) {
	needNFQueue(t)
	const n = 60
	for _, tc := range []struct {
		name    string
		num     uint16
		reorder float64
	}{{"reorder-on", 7312, 0.3}, {"reorder-off", 7313, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDelayer(t, Config{Queue: tc.num, Delay: 10 * time.Millisecond, Reorder: tc.reorder,
				ReorderExtra: 60 * time.Millisecond, Seed: 7})
			queuePair(t, addrA, addrB, int(tc.num))
			t.Cleanup(func() { ipt("-F", testChain) })
			srv := listen(t, addrB)
			sendSeq(t, dial(t, addrA, srv), 0, n)
			got := recvSeq(t, srv, n, time.Now().Add(10*time.Second))
			sorted := slices.Sorted(slices.Values(got))
			if !slices.Equal(sorted, seqRange(0, n)) {
				t.Fatalf("received %v, want each of 0..%d once", got, n-1)
			}
			inv := inversions(got)
			t.Logf("%d inversions; order %v; stats %+v", inv, got, d.Stats())
			if tc.reorder > 0 && (inv == 0 || d.Stats().Reordered == 0) {
				t.Errorf("no datagram overtaken with reorder %v", tc.reorder)
			}
			if tc.reorder == 0 && inv != 0 {
				t.Errorf("%d inversions without reordering", inv)
			}
		})
	}
}

func seqRange(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// waitHeld polls until d holds n packets.
func waitHeld(t *testing.T, d *Delayer, n int) {
	t.Helper()
	testwait.UntilNil(t, 5*time.Second, fmt.Sprintf("%d packets held", n), func() error {
		if held := d.Held(); held != n {
			return fmt.Errorf("holding %d packets (stats %+v)", held, d.Stats())
		}
		return nil
	})
}

func TestDelayer_StopReleasesHeldPackets(t *testing.T) {
	needNFQueue(t)
	const long = 20 * time.Second
	d := startDelayer(t, Config{Queue: 7314, Delay: long, Seed: 3})
	queuePair(t, addrA, addrB, 7314)
	srv := listen(t, addrB)
	cli := dial(t, addrA, srv)
	sendSeq(t, cli, 0, 5)
	waitHeld(t, d, 5)
	start := time.Now()
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	got := recvSeq(t, srv, 5, start.Add(3*time.Second))
	t.Logf("released %v %v after Stop; stats %+v", got, time.Since(start), d.Stats())
	if st := d.Stats(); st.Flushed != 5 {
		t.Errorf("flushed %d, want 5", st.Flushed)
	}
	// The rule stays; with no queue bound, --queue-bypass lets traffic by.
	sendSeq(t, cli, 5, 3)
	if got := recvSeq(t, srv, 3, time.Now().Add(3*time.Second)); !slices.Equal(got, []int{5, 6, 7}) {
		t.Errorf("after Stop got %v, want [5 6 7]", got)
	}
}

func TestDelayer_KilledQueueFailsOpen(t *testing.T) {
	needNFQueue(t)
	d := startDelayer(t, Config{Queue: 7315, Delay: 20 * time.Second, Seed: 4})
	queuePair(t, addrA, addrB, 7315)
	srv := listen(t, addrB)
	cli := dial(t, addrA, srv)
	sendSeq(t, cli, 0, 3)
	waitHeld(t, d, 3)
	d.Kill()
	// The kernel drops what it held for the dead socket; what comes next
	// passes the rule through --queue-bypass.
	sendSeq(t, cli, 100, 3)
	got := recvSeq(t, srv, 3, time.Now().Add(3*time.Second))
	if !slices.Equal(got, []int{100, 101, 102}) {
		t.Errorf("after Kill got %v, want [100 101 102]", got)
	}
}

func TestDelayer_OverflowAcceptsAtOnce(t *testing.T) {
	needNFQueue(t)
	d := startDelayer(t, Config{Queue: 7316, Delay: 20 * time.Second, MaxHeld: 2, Seed: 5})
	queuePair(t, addrA, addrB, 7316)
	srv := listen(t, addrB)
	sendSeq(t, dial(t, addrA, srv), 0, 5)
	got := recvSeq(t, srv, 3, time.Now().Add(3*time.Second))
	if !slices.Equal(got, []int{2, 3, 4}) || d.Held() != 2 || d.Stats().Overflow != 3 {
		t.Errorf("got %v, holding %d, stats %+v; want [2 3 4] through at once, 2 held, overflow 3", got, d.Held(), d.Stats())
	}
}

func TestOpen_SecondBindOfQueueIsBusy(t *testing.T) {
	needNFQueue(t)
	q, err := Open(7317, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q2, err := Open(7317, 16); !errors.Is(err, ErrQueueBusy) {
		if q2 != nil {
			q2.Close()
		}
		t.Fatalf("second Open: %v, want ErrQueueBusy", err)
	}
}

func TestConfig_Bounds(t *testing.T) {
	for _, c := range []Config{
		{Delay: -time.Millisecond}, {Delay: MaxDelay + 1}, {Jitter: time.Hour}, {ReorderExtra: -1},
		{Reorder: 1.5}, {Reorder: -0.1}, {MaxHeld: -1}, {MaxHeld: MaxHeldCap + 1},
	} {
		if _, err := Start(c); !errors.Is(err, ErrConfig) {
			t.Errorf("Start(%+v): %v, want ErrConfig", c, err)
		}
	}
	if _, err := Open(1, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("Open with queue length 0: %v, want ErrConfig", err)
	}
}

func TestDraw_StaysWithinJitterAndReorders(t *testing.T) {
	d := &Delayer{cfg: Config{Delay: 50 * time.Millisecond, Jitter: 20 * time.Millisecond, Reorder: 0.25,
		ReorderExtra: time.Second}, rng: rand.New(rand.NewPCG(9, 9))}
	const n = 4000
	extra := 0
	for range n {
		v := d.draw()
		if v >= time.Second {
			extra++
			v -= time.Second
		}
		if v < 30*time.Millisecond || v > 70*time.Millisecond {
			t.Fatalf("drew %v, want 50ms±20ms", v)
		}
	}
	if f := float64(extra) / n; f < 0.2 || f > 0.3 || uint64(extra) != d.reordered.Load() {
		t.Errorf("reordered fraction %.3f (counted %d of %d), want about 0.25", f, d.reordered.Load(), n)
	}
	d.cfg = Config{Delay: 10 * time.Millisecond, Jitter: 50 * time.Millisecond, Normal: true}
	for range n {
		if v := d.draw(); v < 0 {
			t.Fatalf("drew negative delay %v", v)
		}
	}
}

func TestPacketID_ParsesAndRejects(t *testing.T) {
	hdr := []byte{0, 0, 0x12, 0x34, 0x08, 0x00, 3} // id 0x1234, hw protocol, hook
	attrs := append(attr(9, []byte{1, 2, 3}), attr(nfqaPacketHdr|unix.NLA_F_NET_BYTEORDER, hdr)...)
	if id, ok := packetID(attrs); !ok || id != 0x1234 {
		t.Errorf("packetID = %#x, %v; want 0x1234", id, ok)
	}
	for _, bad := range [][]byte{nil, {1, 0}, {200, 0, 1, 0, 0, 0, 0, 0}, {2, 0, 1, 0}, attr(9, []byte{1})} {
		if _, ok := packetID(bad); ok {
			t.Errorf("packetID(%v) found an id", bad)
		}
	}
	// A message whose length runs past the buffer is not walked.
	msg := make([]byte, nlmsgHdrLen)
	binary.NativeEndian.PutUint32(msg, 400)
	walk(msg, func(uint16, uint32, []byte) { t.Error("walked a truncated message") })
}
