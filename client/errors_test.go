package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wire"
)

// codeSentinels says which exported error each non-OK wire code must match
// once it reaches a caller.
var codeSentinels = map[wire.Code]error{
	wire.CodeInternal:           client.ErrInternal,
	wire.CodeMalformed:          client.ErrMalformed,
	wire.CodeProtocolVersion:    client.ErrProtocolVersion,
	wire.CodeInvalidArgument:    client.ErrInvalidArgument,
	wire.CodeInvalidConfig:      client.ErrInvalidConfig,
	wire.CodeQueueNotFound:      client.ErrQueueNotFound,
	wire.CodeQueueExists:        client.ErrQueueExists,
	wire.CodeNotLeader:          client.ErrUnavailable, // retried; in the end no leader could serve
	wire.CodeUnavailable:        client.ErrUnavailable,
	wire.CodeTimeout:            client.ErrTimeout,
	wire.CodeQueueFull:          client.ErrQueueFull,
	wire.CodeMessageTooLarge:    client.ErrMessageTooLarge,
	wire.CodeLeaseLost:          client.ErrLeaseLost,
	wire.CodeMessageNotFound:    client.ErrMessageNotFound,
	wire.CodeFrameTooLarge:      client.ErrMessageTooLarge,
	wire.CodeLimitExceeded:      client.ErrLimitExceeded,
	wire.CodeTooManyConnections: client.ErrTooManyConnections,
	wire.CodeUnauthorized:       client.ErrUnauthorized,
}

// checkErrorText fails when err's text repeats the "ferry:" prefix or the
// name of code.
func checkErrorText(t *testing.T, what string, code wire.Code, err error) {
	t.Helper()
	text := err.Error()
	if n := strings.Count(text, "ferry:"); n > 1 {
		t.Errorf("%s: %q has %d \"ferry:\" prefixes", what, text, n)
	}
	if n := strings.Count(text, code.String()); n > 1 {
		t.Errorf("%s: %q names %q %d times", what, text, code, n)
	}
}

// Every wire code, answered for a whole request and for single items, with
// a server text that repeats the code's name, reaches the caller as an
// error that matches its exported sentinel and names its kind once.
func TestClient_EveryWireCodeMatchesAnExportedError(t *testing.T) {
	n := 0
	for code := wire.Code(1); code.Known(); code++ {
		n++
		if codeSentinels[code] == nil {
			t.Fatalf("no exported error expected for %s", code)
		}
	}
	if n != len(codeSentinels) {
		t.Fatalf("%d codes, %d expectations", n, len(codeSentinels))
	}
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	// Receives go to a queue that stays empty: a retry that outlives its
	// call and succeeds once the fault is lifted then leases nothing, so
	// the Queue's buffer never answers a later receive without an error.
	fc.addQueue("empty", wire.QueueConfig{})
	c := dial(t, fc, client.WithRetryBackoff(time.Millisecond, 5*time.Millisecond))
	q := c.Queue("q")
	empty := c.Queue("empty")
	setup := testCtx(t, 5*time.Second)
	if _, err := q.SendBatch(setup, make([]client.Message, 3)); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	ds := receiveAll(t, q, 3)
	for code, want := range codeSentinels {
		msg := "ferry: " + code.String() + ": injected detail"
		calls := []struct {
			name  string
			op    wire.Op
			fault fault
			call  func(ctx context.Context) error
		}{
			{"send", wire.OpSend, fault{code: code, msg: msg}, func(ctx context.Context) error {
				_, err := q.Send(ctx, client.Message{Body: []byte("x")})
				return err
			}},
			{"send item", wire.OpSend, fault{itemCode: code, msg: msg}, func(ctx context.Context) error {
				_, err := q.Send(ctx, client.Message{Body: []byte("x")})
				return err
			}},
			{"batch item", wire.OpSend, fault{itemCode: code, msg: msg}, func(ctx context.Context) error {
				_, err := q.SendBatch(ctx, make([]client.Message, 2))
				return err
			}},
			{"ack", wire.OpAck, fault{code: code, msg: msg}, func(ctx context.Context) error { return ds[0].Ack(ctx) }},
			{"ack item", wire.OpAck, fault{itemCode: code, msg: msg}, func(ctx context.Context) error { return ds[1].Ack(ctx) }},
			{"receive", wire.OpReceive, fault{code: code, msg: msg}, func(ctx context.Context) error {
				_, err := empty.Receive(ctx, client.ReceiveOptions{})
				return err
			}},
			{"dead letters", wire.OpDeadList, fault{code: code, msg: msg}, func(ctx context.Context) error {
				_, err := c.DeadLetters(ctx, "q", client.DeadFilter{})
				return err
			}},
			{"create queue", wire.OpCreateQueue, fault{code: code, msg: msg}, func(ctx context.Context) error {
				return c.CreateQueue(ctx, "other")
			}},
		}
		for _, k := range calls {
			fc.setHook(func(_ int, op wire.Op, _ any) fault {
				if op != k.op {
					return fault{}
				}
				return k.fault
			})
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			err := k.call(ctx)
			cancel()
			fc.setHook(nil)
			what := k.name + " answered " + code.String()
			if err == nil {
				t.Errorf("%s: no error", what)
				continue
			}
			if !errors.Is(err, want) {
				t.Errorf("%s: %q does not match %v", what, err, want)
			}
			checkErrorText(t, what, code, err)
		}
	}
}

// The server's error text often starts with the code's name; the client
// does not say it twice.
func TestClient_ErrorTextNamesItsKindOnce(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{MaxDepth: 1})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	if _, err := q.Send(ctx, client.Message{Body: []byte("a")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		if op == wire.OpSend {
			return fault{itemCode: wire.CodeQueueFull, msg: "queue full: partition holds max_depth 1"}
		}
		return fault{}
	})
	_, err := q.Send(ctx, client.Message{Body: []byte("b")})
	if !errors.Is(err, client.ErrQueueFull) || err.Error() != "ferry: queue full: partition holds max_depth 1" {
		t.Fatalf("queue full: %q", err)
	}
	_, err = q.SendBatch(ctx, make([]client.Message, 2))
	if want := "ferry: 2 of 2 messages failed; first: queue full: partition holds max_depth 1"; !errors.Is(err, client.ErrQueueFull) || err.Error() != want {
		t.Fatalf("batch: %q, want %q", err, want)
	}
	fc.setHook(nil)
	_, err = c.Queue("nope").Send(ctx, client.Message{Body: []byte("c")})
	if !errors.Is(err, client.ErrQueueNotFound) || strings.Count(err.Error(), "ferry:") != 1 ||
		strings.Count(err.Error(), "queue not found") != 1 {
		t.Fatalf("unknown queue: %q", err)
	}
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		if op == wire.OpSend {
			return fault{code: wire.CodeTimeout, msg: "ferry: timeout: commit not confirmed"}
		}
		return fault{}
	})
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = q.Send(short, client.Message{Body: []byte("d")})
	if !errors.Is(err, client.ErrUnconfirmed) || !errors.Is(err, client.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: %q", err)
	}
	checkErrorText(t, "timeout", wire.CodeTimeout, err)
}

// A body over the frame limit fails with ErrMessageTooLarge before it is
// sent, alone: the rest of its batch goes through.
func TestClient_MessageOverFrameLimitIsTooLarge(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{MaxMessageBytes: fsm.MessageBytesLimit})
	c := dial(t, fc)
	ctx := testCtx(t, 10*time.Second)
	q := c.Queue("q")
	huge := bytes.Repeat([]byte{'x'}, wire.MaxFrameBytes+1)
	_, err := q.Send(ctx, client.Message{Body: huge})
	if !errors.Is(err, client.ErrMessageTooLarge) {
		t.Fatalf("Send of %d bytes: %v", len(huge), err)
	}
	checkErrorText(t, "huge send", wire.CodeMessageTooLarge, err)
	res, err := q.SendBatch(ctx, []client.Message{{Body: []byte("small")}, {Body: huge}})
	var be *client.BatchError
	if !errors.As(err, &be) || be.Errors[0] != nil || !errors.Is(be.Errors[1], client.ErrMessageTooLarge) || res[0].Seq == 0 {
		t.Fatalf("batch with a huge message: %v, %+v", err, res)
	}
	if k := len(fc.requests(wire.OpSend)); k != 1 {
		t.Fatalf("%d send requests reached the server, want 1 (the small message)", k)
	}
}

// A Dial that reaches no seed says so on one line, names every address
// once, and matches ErrUnavailable.
func TestClient_DialErrorIsOneLineAndUnavailable(t *testing.T) {
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close()
	}
	_, err := client.Dial(testCtx(t, 5*time.Second), addrs)
	if err == nil || !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("Dial: %v", err)
	}
	text := err.Error()
	if strings.Contains(text, "\n") || strings.Count(text, "ferry:") != 1 {
		t.Fatalf("Dial error %q: want one line with one prefix", text)
	}
	for _, a := range addrs {
		if strings.Count(text, a) != 1 {
			t.Fatalf("Dial error %q names %s %d times", text, a, strings.Count(text, a))
		}
	}
	if !strings.Contains(text, "connection refused") {
		t.Fatalf("Dial error %q does not say why", text)
	}
}
