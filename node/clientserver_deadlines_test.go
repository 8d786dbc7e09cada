package node

import (
	"context"
	"testing"
	"time"
)

func TestRequestDeadlines_ShareWithinAStepAndBoundEachRequest(t *testing.T) {
	d := newRequestDeadlines(context.Background())
	defer d.close()
	t0 := time.Unix(1000, 0)
	ctx1, b1 := d.next(t0)
	ctx2, b2 := d.next(t0.Add(requestDeadlineStep - time.Millisecond))
	if b1 != b2 || ctx1 != ctx2 {
		t.Fatal("requests within one step got different contexts")
	}
	ctx3, b3 := d.next(t0.Add(requestDeadlineStep))
	if b3 == b1 || ctx3 == ctx1 {
		t.Fatal("a request a step later shared the old context")
	}
	for _, c := range []struct {
		ctx   context.Context
		start time.Time
	}{{ctx1, t0}, {ctx2, t0.Add(requestDeadlineStep - time.Millisecond)}, {ctx3, t0.Add(requestDeadlineStep)}} {
		dl, ok := c.ctx.Deadline()
		if !ok {
			t.Fatal("a request context has no deadline")
		}
		if left := dl.Sub(c.start); left > requestTimeoutMax || left < requestTimeoutMax-requestDeadlineStep {
			t.Fatalf("request bound %v, want within [%v, %v]", left, requestTimeoutMax-requestDeadlineStep, requestTimeoutMax)
		}
	}
	// A clock that stepped back starts a new context rather than giving
	// a deadline beyond the bound.
	_, b4 := d.next(t0)
	if b4 == b3 {
		t.Fatal("a request started before the current context's creation shared it")
	}
	b1.release()
	b2.release()
	b3.release()
	b4.release()
}

func TestRequestDeadlines_RetiredContextEndsWithItsLastRequest(t *testing.T) {
	d := newRequestDeadlines(context.Background())
	t0 := time.Now()
	ctxA, a1 := d.next(t0)
	_, a2 := d.next(t0)
	ctxB, b1 := d.next(t0.Add(requestDeadlineStep)) // retires A
	if ctxA.Err() != nil {
		t.Fatal("a retired context was cancelled while two requests used it")
	}
	a1.release()
	if ctxA.Err() != nil {
		t.Fatal("a retired context was cancelled while a request used it")
	}
	a2.release()
	if ctxA.Err() == nil {
		t.Fatal("a retired context outlived its last request (its timer is kept)")
	}
	b1.release()
	if ctxB.Err() != nil {
		t.Fatal("the current context was cancelled when its only request finished")
	}
	d.close()
	if ctxB.Err() == nil {
		t.Fatal("close left the current context, unused, alive")
	}
}

func TestRequestDeadlines_ConnectionEndCancelsEveryRequest(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	d := newRequestDeadlines(parent)
	t0 := time.Now()
	ctxA, a := d.next(t0)
	ctxB, b := d.next(t0.Add(requestDeadlineStep))
	cancel()
	if ctxA.Err() == nil || ctxB.Err() == nil {
		t.Fatal("a request context outlived its connection")
	}
	a.release()
	b.release()
	d.close()
}

func TestRequestDeadlines_ReleasingTooOftenPanics(t *testing.T) {
	d := newRequestDeadlines(context.Background())
	_, b := d.next(time.Now())
	b.release()
	d.close()
	defer func() {
		if recover() == nil {
			t.Fatal("an extra release did not panic")
		}
	}()
	b.release()
}
