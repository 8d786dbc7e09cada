package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/freeport"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// lowFDEnv makes the test binary run as a node with a file descriptor limit
// of lowFDLimit (see runLowFDChild), for
// TestNode_FloodUnderLowFDLimitStillServes.
const (
	lowFDEnv   = "FERRY_TEST_LOWFD_NODE_DIR"
	lowFDLimit = 256
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(lowFDEnv); dir != "" {
		os.Exit(runLowFDChild(dir))
	}
	os.Exit(m.Run())
}

// runLowFDChild lowers the process's RLIMIT_NOFILE (soft and hard, so that
// nothing raises it again), starts a one-node cluster in dir, prints
// "ADDRS client http" and runs until its stdin closes.
func runLowFDChild(dir string) int {
	lim := syscall.Rlimit{Cur: lowFDLimit, Max: lowFDLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 1
	}
	gossipAddr, err := freeport.Loopback("127.0.0.1") // below the ephemeral range
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := DefaultConfig("lowfd", dir, "127.0.0.1", 0)
	cfg.Insecure = true
	cfg.RaftAddr, cfg.ClientAddr, cfg.HTTPAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", gossipAddr
	cfg.BootstrapExpect = 1
	cfg.GossipFast = true
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	nd, err := Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		return 1
	}
	defer nd.Close()
	fmt.Printf("ADDRS %s %s\n", nd.ClientAddr(), nd.HTTPAddr())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startLowFDChild runs the test binary as a node under the low fd limit
// and returns its client and HTTP addresses and the file its log goes to.
func startLowFDChild(t *testing.T) (clientAddr, httpAddr, logFile string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), lowFDEnv+"="+filepath.Join(dir, "data"))
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			log, _ := os.ReadFile(stderr.Name())
			t.Logf("child stderr (tail):\n%s", tail(string(log), 3000))
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ADDRS ") {
				lines <- sc.Text()
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lines:
		f := strings.Fields(line)
		return f[1], f[2], stderr.Name()
	case <-exited:
		t.Fatal("child node exited before it started")
	case <-time.After(30 * time.Second):
		t.Fatal("child node did not start in time")
	}
	return "", "", ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// flood opens count connections to addr (each sends a hello and waits),
// and returns them.
func flood(addr string, count int) []net.Conn {
	var mu sync.Mutex
	var conns []net.Conn
	hello, _ := wire.EncodeBody(wire.NewHello("flood"))
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
				if err != nil {
					continue
				}
				conn.SetWriteDeadline(time.Now().Add(time.Second))
				wire.WriteFrame(conn, hello)
				mu.Lock()
				conns = append(conns, conn)
				mu.Unlock()
			}
		}()
	}
	for range count {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	return conns
}

// metricValue reads one unlabelled sample from /metrics ("" if absent).
func metricValue(httpAddr, name string) string {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	return ""
}

// tryServe runs a create, send and receive on a fresh connection, with
// deadlines.
func tryServe(addr, queue string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := wire.NewReader(bufio.NewReader(conn))
	if _, err := wire.ClientHandshake(conn, r, wire.NewHello("after-flood")); err != nil {
		return err
	}
	call := func(id uint64, op wire.Op, body, out any) error {
		req, err := wire.NewRequest(id, op, body)
		if err != nil {
			return err
		}
		if err := wire.WriteFrame(conn, req); err != nil {
			return err
		}
		resp, err := r.ReadResponse()
		if err != nil {
			return err
		}
		return resp.Decode(out)
	}
	err = call(1, wire.OpCreateQueue, &wire.CreateQueueRequest{Name: queue}, &wire.CreateQueueResponse{})
	if err != nil && !errors.Is(err, wire.ErrQueueExists) {
		return err
	}
	var sent wire.SendResponse
	if err := call(2, wire.OpSend, &wire.SendRequest{Queue: queue, Messages: []wire.Message{{ID: "m1", Body: []byte("x")}}}, &sent); err != nil {
		return err
	}
	var got wire.ReceiveResponse
	if err := call(3, wire.OpReceive, &wire.ReceiveRequest{Queue: queue, Max: 1, Wait: time.Second}, &got); err != nil {
		return err
	}
	if len(got.Messages) != 1 {
		return fmt.Errorf("received %d messages", len(got.Messages))
	}
	return nil
}

// 2,000 connections against a node limited to 256 file descriptors: the
// accept loop runs out of descriptors, backs off and carries on, and once
// the flood is gone the node serves normal clients again and says ready.
func TestNode_FloodUnderLowFDLimitStillServes(t *testing.T) {
	clientAddr, httpAddr, logFile := startLowFDChild(t)
	waitReady(t, httpAddr, 20*time.Second)
	conns := flood(clientAddr, 2000)
	t.Logf("flood: %d of 2000 connections established", len(conns))
	// The connections wait in the listen backlog until the node accepts
	// them; a node slow to accept (a loaded machine) must meet them while
	// they are still open, so they stay open until it says it ran out.
	testwait.UntilNil(t, 30*time.Second, "the node to run out of descriptors accepting the flood", func() error {
		log, err := os.ReadFile(logFile)
		if err == nil && !strings.Contains(string(log), "client accept failed") {
			err = errors.New("no failed accept logged yet")
		}
		return err
	})
	for _, c := range conns {
		c.Close()
	}
	testwait.UntilNil(t, 30*time.Second, "the node to serve a client again after the flood", func() error {
		return tryServe(clientAddr, "after-flood")
	})
	waitReady(t, httpAddr, 10*time.Second)
	n, _ := strconv.ParseFloat(metricValue(httpAddr, "ferry_client_accept_errors_total"), 64)
	if n == 0 {
		t.Fatal("no accept errors counted: the flood never exhausted the descriptors")
	}
	t.Logf("accept errors counted: %v", n)
}

func waitReady(t *testing.T, httpAddr string, within time.Duration) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	testwait.UntilNil(t, within, "/readyz to answer 200", func() error {
		resp, err := c.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", resp.StatusCode)
		}
		return nil
	})
}
