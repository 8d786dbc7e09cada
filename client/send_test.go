package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/wire"
)

// onFirst returns a hook that answers the first request of op with f and
// lets every other request through.
func onFirst(op wire.Op, f fault) func(int, wire.Op, any) fault {
	done := false
	return func(_ int, o wire.Op, _ any) fault {
		if o != op || done {
			return fault{}
		}
		done = true
		return f
	}
}

func TestClient_SendRetriesDroppedConnectionWithSameID(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	// The server stores the message, then the connection dies before the
	// confirm: the retry must carry the same id and be a duplicate.
	fc.setHook(onFirst(wire.OpSend, fault{dropAfter: true}))
	res, err := c.Queue("q").Send(ctx, client.Message{Body: []byte("once")})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if !res.Duplicate || res.Seq != 1 {
		t.Fatalf("result %+v, want the duplicate of seq 1", res)
	}
	ids := sentIDs(fc)
	if len(ids) != 2 || ids[0][0] != res.ID || ids[1][0] != res.ID {
		t.Fatalf("sent ids %v, want [%s] twice", ids, res.ID)
	}
	st, err := c.QueueStats(ctx, "q")
	if err != nil || st.Total().Ready != 1 {
		t.Fatalf("stats %+v, %v: want exactly one stored message", st.Total(), err)
	}
}

func TestClient_SendBatchKeepsIDsAcrossRetries(t *testing.T) {
	fc := newFake(t, 2)
	fc.addQueue("q", wire.QueueConfig{Partitions: 4})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	// Every partition's first request times out after being applied, its
	// second loses the connection before applying, its third goes through.
	seen := map[int]int{}
	fc.setHook(func(_ int, op wire.Op, body any) fault {
		if op != wire.OpSend {
			return fault{}
		}
		p := body.(*wire.SendRequest).Partition
		seen[p]++
		switch seen[p] {
		case 1:
			return fault{codeAfter: wire.CodeTimeout}
		case 2:
			return fault{drop: true}
		}
		return fault{}
	})
	msgs := make([]client.Message, 40)
	msgs[3].ID = "caller-chosen"
	res, err := c.Queue("q").SendBatch(ctx, msgs)
	if err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	if res[3].ID != "caller-chosen" {
		t.Fatalf("caller's id replaced by %q", res[3].ID)
	}
	byPart := map[int][][]string{}
	for _, r := range fc.requests(wire.OpSend) {
		req := r.body.(*wire.SendRequest)
		var ids []string
		for _, m := range req.Messages {
			ids = append(ids, m.ID)
		}
		byPart[req.Partition] = append(byPart[req.Partition], ids)
	}
	for p, attempts := range byPart {
		// A dropped connection also fails the other partitions' requests
		// in flight on it, so some partitions need more attempts.
		if len(attempts) < 3 {
			t.Fatalf("partition %d: %d attempts", p, len(attempts))
		}
		for _, ids := range attempts[1:] {
			if len(ids) != len(attempts[0]) {
				t.Fatalf("partition %d: attempts carried %v and %v", p, attempts[0], ids)
			}
			for i := range ids {
				if ids[i] != attempts[0][i] {
					t.Fatalf("partition %d: id changed on retry: %v then %v", p, attempts[0], ids)
				}
			}
		}
	}
	for i, r := range res {
		if !r.Duplicate || r.Seq == 0 {
			t.Fatalf("message %d: %+v, want a duplicate of the first (applied) attempt", i, r)
		}
	}
}

func TestClient_SendUnconfirmedWhenAmbiguousUntilDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    fault
	}{
		{"timeout code", fault{codeAfter: wire.CodeTimeout}},
		{"connection lost after apply", fault{dropAfter: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFake(t, 1)
			fc.addQueue("q", wire.QueueConfig{})
			c := dial(t, fc)
			fc.setHook(func(_ int, op wire.Op, _ any) fault {
				if op == wire.OpSend {
					return tc.f
				}
				return fault{}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			res, err := c.Queue("q").Send(ctx, client.Message{Body: []byte("x")})
			if !errors.Is(err, client.ErrUnconfirmed) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Send: %v, want ErrUnconfirmed and DeadlineExceeded", err)
			}
			ids := sentIDs(fc)
			if len(ids) < 2 {
				t.Fatalf("only %d attempts", len(ids))
			}
			for _, a := range ids {
				if a[0] != res.ID {
					t.Fatalf("attempt carried id %s, want %s", a[0], res.ID)
				}
			}
		})
	}
}

func TestClient_SendUnavailableUntilDeadlineIsNotUnconfirmed(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	// The deadline falls in the first backoff, not during an attempt
	// (whose outcome would be unknown).
	c := dial(t, fc, client.WithRetryBackoff(400*time.Millisecond, 400*time.Millisecond))
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		if op == wire.OpSend {
			return fault{code: wire.CodeUnavailable}
		}
		return fault{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Queue("q").Send(ctx, client.Message{Body: []byte("x")})
	if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrUnconfirmed) ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send: %v, want ErrUnavailable and DeadlineExceeded, not ErrUnconfirmed", err)
	}
}

func TestClient_SendPerMessageQueueFull(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{MaxDepth: 2})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	res, err := q.SendBatch(ctx, make([]client.Message, 3))
	var be *client.BatchError
	if !errors.As(err, &be) || len(be.Errors) != 3 {
		t.Fatalf("SendBatch: %v, want a *BatchError of 3", err)
	}
	if be.Errors[0] != nil || be.Errors[1] != nil || !errors.Is(be.Errors[2], client.ErrQueueFull) {
		t.Fatalf("per-message errors %v", be.Errors)
	}
	if !errors.Is(err, client.ErrQueueFull) || errors.Is(err, client.ErrUnconfirmed) {
		t.Fatalf("batch error %v should match ErrQueueFull only", err)
	}
	if res[0].Seq != 1 || res[1].Seq != 2 || res[2].ID == "" {
		t.Fatalf("results %+v", res)
	}
	if n := len(fc.requests(wire.OpSend)); n != 1 {
		t.Fatalf("%d send requests: queue full must not be retried by the client", n)
	}
	_, err = q.Send(ctx, client.Message{Body: []byte("more")})
	if !errors.Is(err, client.ErrQueueFull) {
		t.Fatalf("Send: %v, want ErrQueueFull", err)
	}
	var we *wire.Error
	if errors.As(err, &be) || !errors.As(err, &we) {
		t.Fatalf("Send error %T should be the message's own error", err)
	}
}

func TestClient_SendRefusals(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{MaxMessageBytes: 10})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	_, err := c.Queue("q").Send(ctx, client.Message{Body: make([]byte, 11)})
	if !errors.Is(err, client.ErrMessageTooLarge) {
		t.Fatalf("Send: %v, want ErrMessageTooLarge", err)
	}
	_, err = c.Queue("q").Send(ctx, client.Message{Delay: -time.Second})
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Send with negative delay: %v", err)
	}
	if res, err := c.Queue("q").SendBatch(ctx, nil); res != nil || err != nil {
		t.Fatalf("empty SendBatch: %v %v", res, err)
	}
}
