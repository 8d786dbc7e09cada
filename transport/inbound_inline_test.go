package transport

import (
	"bufio"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (ours, theirs net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	theirs, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ours = <-accepted
	if ours == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	return ours, theirs
}

// socketInbound returns a bulk inbound connection over a real loopback
// socket (closed at the test's end) and the peer's end; it skips the test
// where the send queue cannot be read.
func socketInbound(t *testing.T) (*inbound, net.Conn) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the send queue is read on Linux only")
	}
	ours, theirs := tcpPair(t)
	in := newInbound(&Shared{cfg: DefaultSharedConfig()}, ours, ours, classBulk)
	t.Cleanup(in.close)
	return in, theirs
}

// readAnswers reads n append answers from r and checks that each request
// id in 1..n is answered exactly once, with the LastLog it was given.
func readAnswers(t *testing.T, r *bufio.Reader, n uint64) {
	t.Helper()
	seen := make(map[uint64]bool, n)
	for range n {
		f, err := readFrame(r, DefaultMaxFrameBytes)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(seen), err)
		}
		var resp raft.AppendEntriesResponse
		d := &decoder{b: f.payload}
		decodeAppendResponse(d, &resp)
		if f.kind != kindReply || f.id < 1 || f.id > n || seen[f.id] || d.end() != nil || resp.LastLog != f.id || !resp.Success {
			t.Fatalf("answer kind %d id %d %+v (seen before: %v)", f.kind, f.id, resp, seen[f.id])
		}
		seen[f.id] = true
	}
}

// TestInbound_AnswersAreWrittenInlineWhenTheSendQueueIsEmpty: with a peer
// that reads, raft's goroutine writes a small answer itself when nothing
// waits and the socket's send queue is empty, and every answer arrives.
func TestInbound_AnswersAreWrittenInlineWhenTheSendQueueIsEmpty(t *testing.T) {
	in, theirs := socketInbound(t)
	r := bufio.NewReader(theirs)
	const n, size = 20, 100
	for i := range uint64(n) {
		in.queued.Add(size)
		req := &inboundRPC{in: in, id: i + 1, kind: kindAppend, size: size}
		req.answerQueued(&raft.AppendEntriesResponse{Term: 2, LastLog: i + 1, Success: true}, nil)
		f, err := readFrame(r, DefaultMaxFrameBytes)
		if err != nil || f.id != i+1 {
			t.Fatalf("answer %d: id %d, %v", i+1, f.id, err)
		}
		// The next answer finds the queue empty once the peer's kernel
		// acknowledged this one; wait for that as a synchronous peer does
		// (its next request comes after the answer).
		waitSendQueueEmpty(t, in)
	}
	if got := in.inlineAnswers.Load(); got != n {
		t.Fatalf("%d of %d answers written inline, want all (the send queue was empty before each)", got, n)
	}
	if q := in.queued.Load(); q != 0 {
		t.Fatalf("%d request bytes still counted after every answer was written", q)
	}
}

// waitSendQueueEmpty polls until in's socket has no unacknowledged bytes.
func waitSendQueueEmpty(t *testing.T, in *inbound) {
	t.Helper()
	for deadline := time.Now().Add(waitTimeout); !in.sendQueueEmpty(); {
		if time.Now().After(deadline) {
			t.Fatal("the send queue never emptied")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestInbound_InlineAnswersNeverWaitOnAPeerThatStoppedReading: over a
// real socket whose peer reads nothing, raft hands over far more answers
// than the socket buffers hold, at once: answers are written inline only
// while the send queue is empty, then queued for the answer writer; once
// the peer reads, every answer arrives exactly once.
func TestInbound_InlineAnswersNeverWaitOnAPeerThatStoppedReading(t *testing.T) {
	in, theirs := socketInbound(t)
	const n, size = 100_000, 100 // about 6 MB of answers
	in.queued.Add(n * size)
	start := time.Now()
	for i := range uint64(n) {
		req := &inboundRPC{in: in, id: i + 1, kind: kindAppend, size: size}
		req.answerQueued(&raft.AppendEntriesResponse{Term: 2, LastLog: i + 1, Success: true}, nil)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("handing over %d answers took %v with nobody reading", n, took)
	}
	if got := in.inlineAnswers.Load(); got == 0 || got == n {
		t.Fatalf("%d of %d answers written inline; want the first ones, until the send queue filled", got, n)
	}
	readAnswers(t, bufio.NewReader(theirs), n)
	for deadline := time.Now().Add(waitTimeout); in.queued.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d request bytes still counted after every answer was read", in.queued.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
