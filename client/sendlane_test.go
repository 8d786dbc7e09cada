package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// holdSends makes the fake hold every send request after applying it
// until release is closed.
func holdSends(fc *fakeCluster, release <-chan struct{}) {
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		if op == wire.OpSend {
			return fault{hold: release}
		}
		return fault{}
	})
}

// fillLane starts client.LaneInFlight sends that the fake holds, and
// waits until they are all out; it returns their errors' channel.
func fillLane(t *testing.T, fc *fakeCluster, q *client.Queue, ctx context.Context) <-chan error {
	t.Helper()
	out := make(chan error, client.LaneInFlight)
	for i := range client.LaneInFlight {
		go func() {
			_, err := q.Send(ctx, client.Message{ID: fmt.Sprintf("first-%d", i)})
			out <- err
		}()
		// One at a time: sends that met on the lane would share a request.
		testwait.Until(t, 5*time.Second, "the first sends out", func() bool { return len(fc.requests(wire.OpSend)) == i+1 })
	}
	return out
}

// laneFixture is a one-partition queue "q" on a fake cluster whose client
// has sent client.LaneInFlight messages that the fake holds (until
// release is closed, when hooked by holdSends).
type laneFixture struct {
	fc      *fakeCluster
	q       *client.Queue
	ctx     context.Context
	release chan struct{}
	first   <-chan error
}

// newLaneFixture sets the fake's hook with hook(release) and fills the
// lane.
func newLaneFixture(t *testing.T, hook func(fc *fakeCluster, release <-chan struct{})) *laneFixture {
	t.Helper()
	f := &laneFixture{fc: newFake(t, 1), ctx: testCtx(t, 10*time.Second), release: make(chan struct{})}
	f.fc.addQueue("q", wire.QueueConfig{})
	f.q = dial(t, f.fc).Queue("q")
	hook(f.fc, f.release)
	f.first = fillLane(t, f.fc, f.q, f.ctx)
	return f
}

// firstSent checks that the sends that filled the lane succeeded.
func (f *laneFixture) firstSent(t *testing.T) {
	t.Helper()
	for range client.LaneInFlight {
		if err := <-f.first; err != nil {
			t.Fatalf("first send: %v", err)
		}
	}
}

// Sends made while a partition's requests are all out wait, then leave
// together in one request; each gets its own result.
func TestClient_ConcurrentSendsShareOneRequest(t *testing.T) {
	f := newLaneFixture(t, holdSends)
	fc, q, ctx := f.fc, f.q, f.ctx

	const waiting = 30
	type outcome struct {
		res client.SendResult
		err error
	}
	outs := make([]outcome, waiting)
	var wg sync.WaitGroup
	for i := range waiting {
		wg.Go(func() {
			res, err := q.Send(ctx, client.Message{ID: fmt.Sprintf("w-%d", i), Body: []byte{byte(i)}})
			outs[i] = outcome{res, err}
		})
	}
	testwait.Until(t, 5*time.Second, "the sends to wait on the lane", func() bool { return client.LaneWaiting(q, 0) == waiting })
	if n := len(fc.requests(wire.OpSend)); n != client.LaneInFlight {
		t.Fatalf("%d send requests while the lane was full, want %d", n, client.LaneInFlight)
	}
	close(f.release)
	wg.Wait()
	f.firstSent(t)
	seqs := map[uint64]bool{}
	for i, o := range outs {
		if o.err != nil || o.res.ID != fmt.Sprintf("w-%d", i) || o.res.Seq == 0 || o.res.Duplicate || seqs[o.res.Seq] {
			t.Fatalf("send %d: %+v, %v", i, o.res, o.err)
		}
		seqs[o.res.Seq] = true
	}
	ids := sentIDs(fc)
	if len(ids) != client.LaneInFlight+1 || len(ids[client.LaneInFlight]) != waiting {
		t.Fatalf("send requests %v: want %d single ones, then one with all %d waiting messages", ids, client.LaneInFlight, waiting)
	}
}

// A send whose context ends while it waits on the lane is withdrawn: it
// fails with the context's error (not ErrUnconfirmed) and is never sent.
func TestClient_SendWithdrawnFromLaneIsNotSent(t *testing.T) {
	f := newLaneFixture(t, holdSends)
	fc, q, ctx := f.fc, f.q, f.ctx

	short, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := q.Send(short, client.Message{ID: "gone"})
		errc <- err
	}()
	testwait.Until(t, 5*time.Second, "the send to wait", func() bool { return client.LaneWaiting(q, 0) == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || errors.Is(err, client.ErrUnconfirmed) {
		t.Fatalf("withdrawn send: %v, want context.Canceled and not ErrUnconfirmed", err)
	}
	if n := client.LaneWaiting(q, 0); n != 0 {
		t.Fatalf("%d sends still wait after the withdrawal", n)
	}
	close(f.release)
	f.firstSent(t)
	// The lane still works, and "gone" never left.
	if _, err := q.Send(ctx, client.Message{ID: "after"}); err != nil {
		t.Fatalf("send after the withdrawal: %v", err)
	}
	for _, req := range sentIDs(fc) {
		if slices.Contains(req, "gone") {
			t.Fatalf("the withdrawn message was sent: %v", sentIDs(fc))
		}
	}
}

// A caller whose message shares a request with another's returns by its
// own deadline (ErrUnconfirmed: the request was out), and its message is
// not sent again once it gave up; the other caller's is retried.
func TestClient_SharedRequestKeepsEachCallersDeadline(t *testing.T) {
	answer := make(chan struct{})
	var mu sync.Mutex
	merged := false
	f := newLaneFixture(t, func(fc *fakeCluster, release <-chan struct{}) {
		fc.setHook(func(_ int, op wire.Op, body any) fault {
			if op != wire.OpSend {
				return fault{}
			}
			if len(body.(*wire.SendRequest).Messages) == 1 {
				return fault{hold: release}
			}
			mu.Lock()
			defer mu.Unlock()
			if merged {
				return fault{}
			}
			merged = true // the first shared request: every item unavailable, once answered
			return fault{wait: answer, itemCode: wire.CodeUnavailable}
		})
	})
	fc, q, ctx := f.fc, f.q, f.ctx

	short, cancel := context.WithCancel(ctx)
	defer cancel()
	shortErr, longErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := q.Send(short, client.Message{ID: "short"})
		shortErr <- err
	}()
	testwait.Until(t, 5*time.Second, "the short send to wait", func() bool { return client.LaneWaiting(q, 0) == 1 })
	go func() {
		_, err := q.Send(ctx, client.Message{ID: "long"})
		longErr <- err
	}()
	testwait.Until(t, 5*time.Second, "both sends to wait", func() bool { return client.LaneWaiting(q, 0) == 2 })
	close(f.release) // the first sends end; the two waiting ones leave together
	testwait.Until(t, 5*time.Second, "the shared request", func() bool { return len(fc.requests(wire.OpSend)) == client.LaneInFlight+1 })
	cancel()
	if err := <-shortErr; !errors.Is(err, client.ErrUnconfirmed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("short send: %v, want ErrUnconfirmed wrapping context.Canceled", err)
	}
	close(answer)
	if err := <-longErr; err != nil {
		t.Fatalf("long send: %v", err)
	}
	f.firstSent(t)
	ids := sentIDs(fc)
	want := [][]string{{"short", "long"}, {"long"}}
	if got := ids[client.LaneInFlight:]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests after the first ones: %v, want %v", got, want)
	}
}
