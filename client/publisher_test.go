package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

func TestPublisher_BatchesAndConfirmsEveryMessage(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{Partitions: 2})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	p, err := c.Queue("q").Publisher(client.PublisherOptions{BatchMessages: 10, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var fs []*client.PublishFuture
	for i := range 25 {
		f, err := p.Publish(ctx, client.Message{Body: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
		fs = append(fs, f)
	}
	// Two full batches left at once; the last five wait for the (hour
	// long) linger until Close flushes them.
	testwait.Until(t, 5*time.Second, "two full batches", func() bool { return len(fc.requests(wire.OpSend)) >= 2 })
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	seen := map[string]bool{}
	for i, f := range fs {
		res, err := f.Wait(ctx)
		if err != nil || res.Seq == 0 || res.ID == "" || seen[res.ID] {
			t.Fatalf("message %d: %+v, %v", i, res, err)
		}
		seen[res.ID] = true
	}
	total := 0
	for _, ids := range sentIDs(fc) {
		total += len(ids)
	}
	if total != 25 {
		t.Fatalf("%d messages sent, want 25 (each once)", total)
	}
	if _, err := p.Publish(ctx, client.Message{}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Publish after Close: %v, want ErrClosed", err)
	}
}

func TestPublisher_LingerSendsAPartialBatch(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	p, err := c.Queue("q").Publisher(client.PublisherOptions{Linger: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	f, err := p.Publish(ctx, client.Message{Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := f.Wait(ctx); err != nil || res.Seq != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
}

func TestPublisher_BoundsMessagesInFlight(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	release := make(chan struct{})
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		if op == wire.OpSend {
			return fault{hold: release}
		}
		return fault{}
	})
	p, err := c.Queue("q").Publisher(client.PublisherOptions{MaxInFlightMessages: 4, BatchMessages: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := p.Publish(ctx, client.Message{}); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.Publish(short, client.Message{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fifth Publish with 4 in flight: %v, want it blocked until its context ended", err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := p.Publish(ctx, client.Message{})
		got <- err
	}()
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("Publish once room freed: %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPublisher_KeepsIDsAcrossRetriesAndReportsUnconfirmedPerMessage(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	ctx := testCtx(t, 5*time.Second)
	// The first send is applied, then its connection dies: the retry
	// carries the same ids and reports duplicates. Later sends time out
	// forever, so their outcome stays unknown.
	n := 0
	fc.setHook(func(_ int, op wire.Op, _ any) fault {
		if op != wire.OpSend {
			return fault{}
		}
		n++
		if n == 1 {
			return fault{dropAfter: true}
		}
		if n > 2 {
			return fault{codeAfter: wire.CodeTimeout}
		}
		return fault{}
	})
	p, err := c.Queue("q").Publisher(client.PublisherOptions{BatchMessages: 3, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var fs []*client.PublishFuture
	for range 3 {
		f, err := p.Publish(ctx, client.Message{})
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	for i, f := range fs {
		res, err := f.Wait(ctx)
		if err != nil || !res.Duplicate {
			t.Fatalf("message %d: %+v, %v; want a confirmed duplicate after the retry", i, res, err)
		}
	}
	ids := sentIDs(fc)
	if len(ids) != 2 || fmt.Sprint(ids[0]) != fmt.Sprint(ids[1]) {
		t.Fatalf("sent ids %v, want the same batch twice", ids)
	}
	late, err := p.Publish(ctx, client.Message{ID: "late"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := late.Wait(ctx)
	if !errors.Is(err, client.ErrUnconfirmed) || res.ID != "late" {
		t.Fatalf("%+v, %v: want ErrUnconfirmed with the id kept", res, err)
	}
}

func TestPublisher_RefusesBadOptionsAndMessages(t *testing.T) {
	fc := newFake(t, 1)
	fc.addQueue("q", wire.QueueConfig{})
	c := dial(t, fc)
	if _, err := c.Queue("q").Publisher(client.PublisherOptions{BatchMessages: -1}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("negative option: %v", err)
	}
	p, err := c.Queue("q").Publisher(client.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 5*time.Second)
	if _, err := p.Publish(ctx, client.Message{Delay: -time.Second}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("negative delay: %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
