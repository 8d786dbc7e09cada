package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/devpki"
	"github.com/ferrymq/ferry/internal/freeport"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/test/chaos"
)

// sqsProcCluster is a cluster of real ferryd processes whose first node
// serves the SQS API.
type sqsProcCluster struct {
	*chaos.Cluster
	sqsAddr string // of Nodes[0]
}

// startSQSProcCluster starts nodes ferryd processes with TLS and the
// tokens in grants; the first node serves the SQS API with the extra
// flags sqsFlags, under a descriptor limit of maxFiles (0: unchanged).
func startSQSProcCluster(t *testing.T, nodes int, sqsFlags []string, maxFiles int, grants ...auth.FileToken) *sqsProcCluster {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs per-node loopback addresses (127.0.1.x)")
	}
	bin, err := chaos.BuildFerryd(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sc := &sqsProcCluster{}
	first := func(n *chaos.Node) bool { return n.Index == 0 }
	c, err := chaos.NewCluster(chaos.ClusterOptions{Nodes: nodes, Root: t.TempDir(), Bin: bin, TLS: true, Logf: t.Logf,
		NodeArgs: func(n *chaos.Node) []string {
			if !first(n) {
				return nil
			}
			return append([]string{"-sqs-addr", sc.sqsAddr}, sqsFlags...)
		},
		MaxFiles: func(n *chaos.Node) int {
			if first(n) {
				return maxFiles
			}
			return 0
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sc.Cluster = c
	if sc.sqsAddr, err = freeport.Loopback(c.Nodes[0].IP); err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		if err := auth.AddToFile(c.TokensFile, g); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	startFerryds(ctx, t, c)
	untilNil(t, ctx, "the SQS port "+sc.sqsAddr+" open", func() error {
		conn, err := net.DialTimeout("tcp", sc.sqsAddr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	})
	return sc
}

// sqsGrant is a token named key with an SQS secret, allowed everything on
// the queues matching pattern.
func sqsGrant(key, pattern string) auth.FileToken {
	g := grant(key, key+"-native-secret", []string{pattern}, "send", "receive", "admin")
	g.SQSSecretKey = key + "-sqs-secret-access-key"
	return g
}

// sdkClient is an SDK client of the endpoint for key (see sqsGrant), with
// no retries (a throttled call shows), holding up to conns connections.
func (sc *sqsProcCluster) sdkClient(key string, conns int) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("https://" + sc.sqsAddr),
		Credentials:  credentials.NewStaticCredentialsProvider(key, key+"-sqs-secret-access-key", ""),
		Retryer:      aws.NopRetryer{},
		HTTPClient: &http.Client{Timeout: time.Minute, Transport: &http.Transport{
			TLSClientConfig: sc.ClientTLS, MaxIdleConnsPerHost: conns, MaxIdleConns: conns}},
	})
}

// metric reads one unlabelled sample of node i's /metrics (-1 if absent).
func (sc *sqsProcCluster) metric(t *testing.T, i int, name string) float64 {
	t.Helper()
	resp, err := sc.HTTPClient().Get(sc.URL(sc.Nodes[i], "/metrics"))
	if err != nil {
		t.Fatalf("metrics of %s: %v", sc.Nodes[i].ID, err)
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v
		}
	}
	return -1
}

// waitMetric polls node i's metric until ok holds, for at most within.
func (sc *sqsProcCluster) waitMetric(t *testing.T, i int, name string, within time.Duration, ok func(float64) bool) float64 {
	t.Helper()
	var v float64
	testwait.UntilNil(t, within, name+" on "+sc.Nodes[i].ID, func() error {
		if v = sc.metric(t, i, name); !ok(v) {
			return fmt.Errorf("%s is %v", name, v)
		}
		return nil
	})
	return v
}

// isThrottled reports whether err is SQS's RequestThrottled with HTTP 400.
func isThrottled(err error) bool {
	var api smithy.APIError
	var resp *awshttp.ResponseError
	return errors.As(err, &api) && api.ErrorCode() == "RequestThrottled" &&
		errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusBadRequest
}

// hogPolls is how many long polls the greedy caller starts, and
// hogPollsHeld its bound: the most a node serves from one connection (so
// that, on a connection shared by every caller, the held polls alone
// would stop all other requests to the node).
const (
	hogPolls     = 1000
	hogPollsHeld = 256
)

// On a real ferryd with the SQS API, one caller starts 1,000 long polls
// on its own empty queue: it holds its bound of them (256, at the
// maximum), gets RequestThrottled (HTTP 400) for every other one, and
// meanwhile another tenant's SendMessage through the same node answers
// within 100 ms each time. Once both callers are idle past
// -sqs-caller-idle-timeout, their state and cluster connections are
// dropped (the node counts a closed connection until the long polls it
// was serving have run out, up to 20 s).
func TestCluster_SQSLongPollsOfOneCallerDoNotStallAnother(t *testing.T) {
	sc := startSQSProcCluster(t, 1, []string{"-sqs-max-conns", "1200", "-sqs-max-conns-per-ip", "1200",
		"-sqs-caller-requests", strconv.Itoa(hogPollsHeld), "-sqs-caller-long-polls", strconv.Itoa(hogPollsHeld),
		"-sqs-caller-idle-timeout", "2s"}, 0, sqsGrant("hog", "hog-*"), sqsGrant("app", "app-*"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hog, app := sc.sdkClient("hog", hogPolls), sc.sdkClient("app", 4)
	hogQ, err := hog.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("hog-q")})
	if err != nil {
		t.Fatal(err)
	}
	appQ, err := app.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("app-q")})
	if err != nil {
		t.Fatal(err)
	}
	send := func() time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := app.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: appQ.QueueUrl, MessageBody: aws.String("work")}); err != nil {
			t.Fatalf("app's SendMessage: %v", err)
		}
		return time.Since(start)
	}
	send() // app's own connections (to the endpoint, and the endpoint's to the cluster) are made
	pollCtx, stopPolls := context.WithCancel(ctx)
	var throttled, failed atomic.Int32
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for range hogPolls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil { // an answered poll (empty after 20 s) is made again
				_, err := hog.ReceiveMessage(pollCtx, &awssqs.ReceiveMessageInput{QueueUrl: hogQ.QueueUrl, WaitTimeSeconds: 20})
				switch {
				case err == nil || pollCtx.Err() != nil:
				case isThrottled(err):
					throttled.Add(1)
					return
				default:
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
					return
				}
			}
		}()
	}
	defer func() { stopPolls(); wg.Wait() }()
	testwait.UntilNil(t, 15*time.Second, fmt.Sprintf("%d of the greedy caller's polls throttled", hogPolls-hogPollsHeld), func() error {
		if n := throttled.Load() + failed.Load(); n < hogPolls-hogPollsHeld {
			return fmt.Errorf("%d throttled, %d failed", throttled.Load(), failed.Load())
		}
		return nil
	})
	if failed.Load() > 0 {
		t.Fatalf("%d of the greedy caller's polls failed otherwise than throttled: %v", failed.Load(), firstFailure.Load())
	}
	var slowest time.Duration
	for range 20 {
		slowest = max(slowest, send())
	}
	t.Logf("with %d long polls of another caller held (%d throttled): slowest of 20 SendMessage %v",
		hogPollsHeld, throttled.Load(), slowest)
	if slowest >= 100*time.Millisecond {
		t.Fatalf("another tenant's SendMessage took %v while one caller held %d long polls, want < 100ms", slowest, hogPollsHeld)
	}
	if got := throttled.Load(); got != hogPolls-hogPollsHeld {
		t.Fatalf("%d polls throttled, want %d: the held ones ended early", got, hogPolls-hogPollsHeld)
	}
	got, err := app.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: appQ.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil || len(got.Messages) == 0 {
		t.Fatalf("app's ReceiveMessage beside the held polls: %d messages, %v", len(got.Messages), err)
	}
	if v := sc.metric(t, 0, "ferry_sqs_requests_throttled_total"); v != hogPolls-hogPollsHeld {
		t.Fatalf("ferry_sqs_requests_throttled_total %v, want %d", v, hogPolls-hogPollsHeld)
	}
	conns := sc.metric(t, 0, "ferry_client_connections")
	t.Logf("client connections of the node with both callers: %v", conns)
	stopPolls()
	wg.Wait()
	sc.waitMetric(t, 0, "ferry_sqs_callers", 15*time.Second, func(v float64) bool { return v == 0 })
	sc.waitMetric(t, 0, "ferry_client_connections", 30*time.Second, func(v float64) bool { return v <= conns-2 })
}

// floodConns opens count connections to addr (64 at a time) that send
// nothing, and returns them.
func floodConns(addr string, count int) []net.Conn {
	var mu sync.Mutex
	var conns []net.Conn
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

// closedWithin reports whether the peer closed (or reset) conn within d.
func closedWithin(conn net.Conn, d time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	return err == nil || errors.Is(err, syscall.ECONNRESET) // Copy takes EOF as success
}

// A ferryd under a 512-descriptor limit (soft and hard) gets 2,000
// connections on its SQS port, held open: the port keeps at most its
// bound (by default a quarter of the descriptor limit) and refuses the
// rest at accept, counted in /metrics; meanwhile the node's client port
// serves a new client (create, send, receive, ack) without a failed
// accept, its raft port completes a new peer handshake, and its admin
// port answers. Every flood connection, having sent no request, is closed
// within the header timeout, and a connection whose one request is
// unsigned is closed right after the answer.
func TestCluster_SQSPortFloodUnderLowFDLimitSparesTheOtherPorts(t *testing.T) {
	sc := startSQSProcCluster(t, 3, nil, 512)
	n1 := sc.Nodes[0]
	if v := sc.metric(t, 0, "process_max_fds"); v != 512 {
		t.Fatalf("%s runs with a descriptor limit of %v, want 512", n1.ID, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	flood := floodConns(sc.sqsAddr, 2000)
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	t.Logf("flood: %d of 2000 connections made", len(flood))

	cl, err := client.Dial(ctx, []string{n1.ClientAddr}, client.WithTLS(sc.ClientTLS), client.WithToken(sc.AdminToken),
		client.WithDialTimeout(2*time.Second))
	if err != nil {
		t.Fatalf("new client through %s's client port during the flood: %v", n1.ID, err)
	}
	defer cl.Close()
	if err := cl.CreateQueue(ctx, "during-flood"); err != nil {
		t.Fatalf("create during the flood: %v", err)
	}
	q := cl.Queue("during-flood")
	if _, err := q.Send(ctx, client.Message{Body: []byte("x")}); err != nil {
		t.Fatalf("send during the flood: %v", err)
	}
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 5 * time.Second})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive during the flood: %d, %v", len(ds), err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("ack during the flood: %v", err)
	}
	pki := devpki.Files{Dir: filepath.Join(sc.Root, "pki")}
	peer, err := tlsconf.Load(pki.Cert("n2"), pki.Key("n2"), pki.CA())
	if err != nil {
		t.Fatal(err)
	}
	raft, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", n1.RaftAddr, peer.PeerClient())
	if err != nil {
		t.Fatalf("peer handshake on %s's raft port during the flood: %v", n1.ID, err)
	}
	raft.Close()
	if !sc.Ready(ctx) {
		t.Fatal("a node is not ready during the flood")
	}
	if v := sc.metric(t, 0, "ferry_client_accept_errors_total"); v != 0 {
		t.Fatalf("%v failed accepts on %s's client port during the flood", v, n1.ID)
	}
	refused := sc.waitMetric(t, 0, "ferry_sqs_connections_refused_total", 10*time.Second, func(v float64) bool { return v > 0 })
	t.Logf("refused at accept so far: %v", refused)
	if open := sc.metric(t, 0, "ferry_sqs_connections"); open > 128 {
		t.Fatalf("%v SQS connections open, above the default bound under 512 descriptors (128)", open)
	}
	closed := 0
	for _, c := range flood {
		if closedWithin(c, 15*time.Second) {
			closed++
		}
	}
	if closed != len(flood) {
		t.Fatalf("%d of %d flood connections closed by the node within the header timeout", closed, len(flood))
	}
	unsignedCloses(t, sc.sqsAddr, sc.ClientTLS)
}

// unsignedCloses sends one unsigned request on a new connection and
// checks that the answer (IncompleteSignature) closes it.
func unsignedCloses(t *testing.T, addr string, cfg *tls.Config) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := "{}"
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nX-Amz-Target: AmazonSQS.ListQueues\r\nContent-Type: application/x-amz-json-1.0\r\n"+
		"Content-Length: %d\r\n\r\n%s", addr, len(body), body)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(answer), "IncompleteSignature") {
		t.Fatalf("unsigned request: %s %s", resp.Status, answer)
	}
	start := time.Now()
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("connection after an unsigned request: read %v, want EOF", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("connection closed %v after the answer to an unsigned request", d)
	}
}
