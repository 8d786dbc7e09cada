package node

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// startLimitedNode starts a one-node cluster whose config mutate adjusts,
// and waits until it leads the meta group.
func startLimitedNode(t *testing.T, mutate func(*Config)) *Node {
	t.Helper()
	nd := startTestNode(t, t.TempDir(), "lone", 1, nil, mutate)
	waitMetaLeader(t, nd)
	return nd
}

// createServedQueue creates a queue and waits until nd leads its
// partition.
func createServedQueue(t *testing.T, nd *Node, c *rawClient, name string) {
	t.Helper()
	if err := c.call(wire.OpCreateQueue, &wire.CreateQueueRequest{Name: name}, &wire.CreateQueueResponse{}); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	testwait.Until(t, 10*time.Second, "queue "+name+" to get a leader", func() bool {
		p := nd.replicas.get(nd.queueGroup(t, name))
		return p != nil && p.IsLeader()
	})
}

// dialFrom connects from the local IP from and performs the handshake.
func dialFrom(from, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := wire.ClientHandshake(conn, wire.NewReader(conn), wire.NewHello("limits")); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// waitClosed reports whether the server closes conn within d.
func waitClosed(conn net.Conn, d time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

func TestNode_ConnectionLimitsPerIPAndPerNode(t *testing.T) {
	nd := startLimitedNode(t, func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 4, 3 })
	var conns []net.Conn
	for range 3 {
		conn, err := dialFrom("127.0.0.1", nd.ClientAddr())
		if err != nil {
			t.Fatalf("connection within the limits: %v", err)
		}
		defer conn.Close()
		conns = append(conns, conn)
	}
	if _, err := dialFrom("127.0.0.1", nd.ClientAddr()); !errors.Is(err, wire.ErrTooManyConnections) {
		t.Fatalf("fourth connection from one IP: %v, want too many connections", err)
	}
	other, err := dialFrom("127.0.0.2", nd.ClientAddr())
	if err != nil {
		t.Fatalf("first connection from another IP: %v", err)
	}
	defer other.Close()
	if _, err := dialFrom("127.0.0.3", nd.ClientAddr()); !errors.Is(err, wire.ErrTooManyConnections) {
		t.Fatalf("fifth connection to the node: %v, want too many connections", err)
	}
	conns[0].Close()
	testwait.UntilNil(t, 5*time.Second, "the freed slot to be reused", func() error {
		conn, err := dialFrom("127.0.0.1", nd.ClientAddr())
		if err == nil {
			conn.Close()
		}
		return err
	})
}

func TestNode_IdleConnectionCutLongPollKept(t *testing.T) {
	nd := startLimitedNode(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	c := dialRaw(t, nd.ClientAddr())
	createServedQueue(t, nd, c, "orders")
	idle := dialRaw(t, nd.ClientAddr())
	poll := dialRaw(t, nd.ClientAddr())
	start := time.Now()
	var got wire.ReceiveResponse
	if err := poll.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "orders", Max: 1, Wait: 1500 * time.Millisecond}, &got); err != nil {
		t.Fatalf("long-poll over the idle timeout: %v", err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("long-poll answered after %v, want the full wait", waited)
	}
	if !waitClosed(idle.conn, 5*time.Second) {
		t.Fatal("idle connection not closed")
	}
	if !waitClosed(poll.conn, 5*time.Second) {
		t.Fatal("long-poll connection not closed once idle")
	}
}

func TestNode_StalledHalfFrameCut(t *testing.T) {
	nd := startLimitedNode(t, func(c *Config) { c.FrameTimeout = 300 * time.Millisecond })
	c := dialRaw(t, nd.ClientAddr())
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 100)
	if _, err := c.conn.Write(append(hdr[:], 0x83, 0xa2, 'i', 'd')); err != nil {
		t.Fatal(err)
	}
	if !waitClosed(c.conn, 5*time.Second) {
		t.Fatal("connection stalled half-way through a frame not closed")
	}
}

// A client that keeps sending requests but never reads the answers is cut
// once a write has waited the frame timeout.
func TestNode_ClientNotReadingAnswersCut(t *testing.T) {
	nd := startLimitedNode(t, func(c *Config) { c.FrameTimeout = 300 * time.Millisecond })
	c := dialRaw(t, nd.ClientAddr())
	createServedQueue(t, nd, c, "orders")
	body := make([]byte, 512<<10)
	var sent wire.SendResponse
	if err := c.call(wire.OpSend, &wire.SendRequest{Queue: "orders", Messages: []wire.Message{{ID: "big", Body: body}}}, &sent); err != nil {
		t.Fatal(err)
	}
	c.conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	req, err := wire.NewRequest(1000, wire.OpPeek, &wire.PeekRequest{Queue: "orders", Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.conn.SetWriteDeadline(time.Now().Add(time.Second))
		if err := wire.WriteFrame(c.conn, req); err != nil {
			return // the server closed the connection
		}
	}
	t.Fatal("a client not reading its answers was never cut")
}

func TestNode_AckAttemptBeyond32BitsRefused(t *testing.T) {
	nd := startLimitedNode(t, func(*Config) {})
	c := dialRaw(t, nd.ClientAddr())
	createServedQueue(t, nd, c, "orders")
	var sent wire.SendResponse
	if err := c.call(wire.OpSend, &wire.SendRequest{Queue: "orders", Messages: []wire.Message{{ID: "m1", Body: []byte("x")}}}, &sent); err != nil {
		t.Fatal(err)
	}
	var got wire.ReceiveResponse
	if err := c.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "orders", Max: 1, Wait: time.Second}, &got); err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %+v, %v", got, err)
	}
	d := got.Messages[0]
	if d.Attempt != 1 {
		t.Fatalf("first delivery has attempt %d", d.Attempt)
	}
	type wideReceipt struct {
		Partition int    `msgpack:"partition"`
		Seq       uint64 `msgpack:"seq"`
		Attempt   uint64 `msgpack:"attempt"`
	}
	type wideAck struct {
		Queue    string        `msgpack:"queue"`
		Receipts []wideReceipt `msgpack:"receipts"`
	}
	var acked wire.AckResponse
	err := c.call(wire.OpAck, &wideAck{Queue: "orders", Receipts: []wideReceipt{{Seq: d.Seq, Attempt: 1<<32 + 1}}}, &acked)
	if !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatalf("ack with attempt 2^32+1: %+v, %v; want invalid argument", acked, err)
	}
	var stats wire.QueueStatsResponse
	if err := c.call(wire.OpQueueStats, &wire.QueueStatsRequest{Queue: "orders"}, &stats); err != nil {
		t.Fatal(err)
	}
	if in := stats.Partitions[0].InFlight; in != 1 {
		t.Fatalf("after the refused ack %d messages in flight, want 1", in)
	}
	if err := c.call(wire.OpAck, &wire.AckRequest{Queue: "orders", Receipts: []wire.Receipt{d.Receipt()}}, &acked); err != nil || acked.Results[0].Err() != nil {
		t.Fatalf("ack with the real receipt: %+v, %v", acked, err)
	}
}

// countingReader yields n bytes without holding them.
type countingReader struct{ left int }

func (r *countingReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.left)
	clear(p[:n])
	r.left -= n
	return n, nil
}

func rssBytes(t *testing.T) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func TestNode_HTTPBodyLimitAndPprofOffByDefault(t *testing.T) {
	nd := startLimitedNode(t, func(*Config) {})
	base := "http://" + nd.HTTPAddr()
	before := rssBytes(t)
	const size = 50 << 20
	req, err := http.NewRequest("POST", base+"/debug/pprof/symbol", &countingReader{left: size})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("50 MB POST: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("50 MB POST answered %d, want 413", resp.StatusCode)
	}
	if grown := rssBytes(t) - before; grown > 20<<20 {
		t.Fatalf("RSS grew by %d bytes on a refused body", grown)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/symbol", "/v1/debug/raft"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET %s answered %d without -pprof, want 404", path, resp.StatusCode)
		}
	}
	on := startLimitedNode(t, func(c *Config) { c.Pprof = true })
	resp, err = http.Get("http://" + on.HTTPAddr() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /debug/pprof/ with Pprof answered %d", resp.StatusCode)
	}
	checkRaftDebug(t, "http://"+on.HTTPAddr())
}

// checkRaftDebug checks GET /v1/debug/raft of a single node leading its
// meta group: the group's stats, and the leader's view of itself.
func checkRaftDebug(t *testing.T, base string) {
	t.Helper()
	var view jsonview.RaftDebug
	testwait.Until(t, 10*time.Second, "the meta group leads in /v1/debug/raft", func() bool {
		resp, err := http.Get(base + "/v1/debug/raft?group=meta")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		view = jsonview.RaftDebug{}
		if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
			t.Fatalf("GET /v1/debug/raft: %v", err)
		}
		return len(view.Groups) == 1 && view.Groups[0].Stats["state"] == "Leader"
	})
	g := view.Groups[0]
	if g.Group != "meta" || len(g.Servers) != 1 || g.Servers[0].Abstain != "votes" || g.Servers[0].Suffrage != "Voter" ||
		g.Servers[0].Match == 0 || g.Stats["commit_index"] == "" {
		t.Fatalf("meta group view %+v", g)
	}
}

// flakyListener fails Accept with EMFILE while failing is set, counting
// the calls, then hands out the connections sent on conns.
type flakyListener struct {
	failing atomic.Bool
	calls   atomic.Int64
	conns   chan net.Conn
	done    chan struct{}
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.calls.Add(1)
	if l.failing.Load() {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *flakyListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *flakyListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func TestClientServer_AcceptErrorsBackOffAndRecover(t *testing.T) {
	cfg := DefaultConfig("lone", t.TempDir(), "127.0.0.1", 0)
	cfg.Insecure = true
	n := &Node{cfg: cfg, logger: slog.New(slog.DiscardHandler), closing: make(chan struct{})}
	n.metrics = newMetrics(n)
	ln := &flakyListener{conns: make(chan net.Conn), done: make(chan struct{})}
	ln.failing.Store(true)
	s := newClientServer(clientDeps{cfg: &n.cfg, logger: n.logger, metrics: n.metrics, auth: &n.auth, handle: n.handle,
		closing: n.closing}, ln, nil)
	n.clients = s
	s.wg.Add(1)
	start := time.Now()
	go s.serve()
	defer func() { close(n.closing); s.close() }()
	// The loop keeps trying after failures, and pauses between tries
	// twice as long every time from 5 ms: the sixth Accept comes after
	// pauses of 5+10+20+40+80 ms at least.
	const tries, pausedAtLeast = 6, 155 * time.Millisecond
	testwait.Until(t, 10*time.Second, fmt.Sprintf("%d failed accepts", tries), func() bool { return ln.calls.Load() >= tries })
	if took := time.Since(start); took < pausedAtLeast {
		t.Fatalf("%d failed accepts in %v: want an exponential backoff from 5ms (at least %v)", tries, took, pausedAtLeast)
	}
	if !s.acceptTrouble() {
		t.Fatal("failing accepts not reported")
	}
	ln.failing.Store(false)
	server, client := net.Pipe()
	defer client.Close()
	select {
	case ln.conns <- server:
	case <-time.After(5 * time.Second):
		t.Fatal("accept loop gave up after the failures")
	}
	client.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := wire.ClientHandshake(client, wire.NewReader(client), wire.NewHello("t")); err != nil {
		t.Fatalf("handshake after the failures: %v", err)
	}
	testwait.Until(t, 5*time.Second, "accept trouble no longer reported after accepts recovered", func() bool { return !s.acceptTrouble() })
}

func TestConfig_ValidateNamesBadConnectionLimits(t *testing.T) {
	for field, mutate := range map[string]func(*Config){
		"MaxConns":          func(c *Config) { c.MaxConns = -1 },
		"MaxConnsPerIP":     func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 10, 11 },
		"IdleTimeout":       func(c *Config) { c.IdleTimeout = time.Millisecond },
		"FrameTimeout":      func(c *Config) { c.FrameTimeout = -time.Second },
		"MaxHTTPConns":      func(c *Config) { c.MaxHTTPConns = -1 },
		"MaxHTTPConnsPerIP": func(c *Config) { c.MaxHTTPConns, c.MaxHTTPConnsPerIP = 10, 11 },
	} {
		cfg := DefaultConfig("n1", t.TempDir(), "127.0.0.1", 0)
		cfg.Insecure = true
		mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Config."+field) {
			t.Errorf("%s: %v, want an invalid config error naming it", field, err)
		}
	}
	cfg := DefaultConfig("n1", t.TempDir(), "127.0.0.1", 0)
	cfg.Insecure = true
	cfg.MaxConns, cfg.MaxConnsPerIP, cfg.IdleTimeout, cfg.FrameTimeout = 0, 0, 0, 0
	cfg.MaxHTTPConns, cfg.MaxHTTPConnsPerIP = 0, 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("zero limits (defaults): %v", err)
	}
	if d := cfg.WithDefaults(); d.MaxConns != DefaultMaxConns || d.MaxConnsPerIP != DefaultMaxConnsPerIP ||
		d.IdleTimeout != DefaultIdleTimeout || d.FrameTimeout != DefaultFrameTimeout ||
		d.MaxHTTPConns != DefaultMaxHTTPConns || d.MaxHTTPConnsPerIP != DefaultMaxHTTPConnsPerIP {
		t.Fatalf("defaults not applied: %+v", d)
	}
}

// Requests the FSM would refuse are refused before they are proposed:
// they leave the partition's raft log untouched.
func TestNode_InvalidRequestsNeverProposed(t *testing.T) {
	nd := startLimitedNode(t, func(*Config) {})
	c := dialRaw(t, nd.ClientAddr())
	createServedQueue(t, nd, c, "orders")
	if err := c.call(wire.OpSend, &wire.SendRequest{Queue: "orders", Messages: []wire.Message{{ID: "m1", Body: []byte("x")}}}, &wire.SendResponse{}); err != nil {
		t.Fatal(err)
	}
	var got wire.ReceiveResponse
	if err := c.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "orders", Max: 1}, &got); err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %+v, %v", got, err)
	}
	receipt := got.Messages[0].Receipt()
	if err := c.call(wire.OpSend, &wire.SendRequest{Queue: "orders", Messages: []wire.Message{{ID: "m2", Body: []byte("y")}}}, &wire.SendResponse{}); err != nil {
		t.Fatal(err)
	}
	p := nd.replicas.get(nd.queueGroup(t, "orders"))
	before := p.Status().AppliedIndex
	calls := []struct {
		name string
		op   wire.Op
		body any
		out  any
	}{
		{"receive max 5000", wire.OpReceive, &wire.ReceiveRequest{Queue: "orders", Max: 5000}, &wire.ReceiveResponse{}},
		{"receive visibility -1s", wire.OpReceive, &wire.ReceiveRequest{Queue: "orders", Max: 1, Visibility: -time.Second}, &wire.ReceiveResponse{}},
		{"extend by 0", wire.OpExtend, &wire.ExtendRequest{Queue: "orders", Items: []wire.ExtendItem{{Receipt: receipt}}}, &wire.ExtendResponse{}},
		{"release with a delay", wire.OpNack, &wire.NackRequest{Queue: "orders", Items: []wire.NackItem{{Receipt: receipt, Release: true, ExplicitDelay: true}}}, &wire.NackResponse{}},
		{"empty reject", wire.OpReject, &wire.RejectRequest{Queue: "orders"}, &wire.RejectResponse{}},
		{"receive wait -1s", wire.OpReceive, &wire.ReceiveRequest{Queue: "orders", Max: 1, Wait: -time.Second}, &wire.ReceiveResponse{}},
		{"nack delay over the longest", wire.OpNack, &wire.NackRequest{Queue: "orders", Items: []wire.NackItem{{Receipt: receipt, ExplicitDelay: true, Delay: 13 * time.Hour}}}, &wire.NackResponse{}},
		{"redrive limit -1", wire.OpDeadRedrive, &wire.DeadRedriveRequest{Queue: "orders", Filter: wire.DeadFilter{Limit: -1}}, &wire.DeadRedriveResponse{}},
		{"delete dead in a backwards time range", wire.OpDeadDelete, &wire.DeadDeleteRequest{Queue: "orders", Filter: wire.DeadFilter{FromAt: 2, ToAt: 1}}, &wire.DeadDeleteResponse{}},
	}
	for _, k := range calls {
		err := c.call(k.op, k.body, k.out)
		if err == nil {
			err = firstItemErr(k.out)
		}
		if !errors.Is(err, wire.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", k.name, err)
		}
	}
	if after := p.Status().AppliedIndex; after != before {
		t.Fatalf("refused requests moved the applied index from %d to %d", before, after)
	}
}

// firstItemErr is the first per-item failure of a settle response.
func firstItemErr(out any) error {
	var results []wire.ItemResult
	switch r := out.(type) {
	case *wire.ExtendResponse:
		results = r.Results
	case *wire.NackResponse:
		results = r.Results
	case *wire.RejectResponse:
		results = r.Results
	}
	for _, res := range results {
		if err := res.Err(); err != nil {
			return err
		}
	}
	return nil
}

// The Go client reports a refusal at the limit with its own sentinel.
func TestNode_ClientSeesTooManyConnections(t *testing.T) {
	nd := startLimitedNode(t, func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 1, 1 })
	dialRaw(t, nd.ClientAddr())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{nd.ClientAddr()})
	if err == nil {
		c.Close()
		t.Fatal("a client over the node's connection limit was served")
	}
	if !errors.Is(err, client.ErrTooManyConnections) {
		t.Fatalf("dial over the limit: %v, want ErrTooManyConnections", err)
	}
}
