package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/wire"
)

func TestClient_PriorityTravelsAndOrdersReceives(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	q := c.Queue("q")
	_, err := q.SendBatch(ctx, []client.Message{
		{ID: "low", Body: []byte("l")}, {ID: "urgent", Body: []byte("u"), Priority: client.MaxPriority},
		{ID: "mid", Body: []byte("m"), Priority: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	reqs := fc.requests(wire.OpSend)
	if len(reqs) != 1 {
		t.Fatalf("%d send requests", len(reqs))
	}
	ms := reqs[0].body.(*wire.SendRequest).Messages
	if ms[0].Priority != 0 || ms[1].Priority != 9 || ms[2].Priority != 4 {
		t.Fatalf("sent %+v", ms)
	}
	ds := receiveAll(t, q, 3)
	var got []string
	for _, d := range ds {
		got = append(got, d.ID)
	}
	if got[0] != "urgent" || got[1] != "mid" || got[2] != "low" || ds[0].Priority != 9 || ds[1].Priority != 4 || ds[2].Priority != 0 {
		t.Fatalf("received %v with priorities %d %d %d", got, ds[0].Priority, ds[1].Priority, ds[2].Priority)
	}
	// A dead letter keeps its priority.
	if err := ds[1].Reject(ctx, "no"); err != nil {
		t.Fatal(err)
	}
	letters, err := c.DeadLetters(ctx, "q", client.DeadFilter{})
	if err != nil || len(letters) != 1 || letters[0].Priority != 4 {
		t.Fatalf("dead letters %+v, %v", letters, err)
	}
}

func TestClient_PriorityOutOfRangeRefusedBeforeSending(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	_, err := c.Queue("q").SendBatch(ctx, []client.Message{{Body: []byte("ok")}, {Body: []byte("x"), Priority: 10}})
	if !errors.Is(err, client.ErrInvalidPriority) || !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("err %v, want ErrInvalidPriority and ErrInvalidArgument", err)
	}
	if errors.Is(invalidArgOther(), client.ErrInvalidPriority) {
		t.Fatal("any invalid argument matches ErrInvalidPriority")
	}
	if n := len(fc.requests(wire.OpSend)); n != 0 {
		t.Fatalf("%d send requests went out", n)
	}
}

// invalidArgOther is an invalid-argument error about something else.
func invalidArgOther() error { return wire.Errorf(wire.CodeInvalidArgument, "negative wait") }

// A Publisher refuses an out-of-range priority at Publish, so the message
// never joins (and fails) a batch; a valid one travels.
func TestPublisher_Priority(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	p, err := c.Queue("q").Publisher(client.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(ctx, client.Message{Priority: client.MaxPriority + 1}); !errors.Is(err, client.ErrInvalidPriority) {
		t.Fatalf("Publish with priority 10: %v", err)
	}
	f, err := p.Publish(ctx, client.Message{ID: "p7", Priority: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	ds := receiveAll(t, c.Queue("q"), 1)
	if ds[0].ID != "p7" || ds[0].Priority != 7 {
		t.Fatalf("received %s at priority %d", ds[0].ID, ds[0].Priority)
	}
}
