package client_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/wire"
)

// inspectSetup makes queue "jobs" on a fake with 2 partitions holding
// two messages of group a and three of group b (header tenant = the
// group) and one delayed message, and leases each group's head.
func inspectSetup(t *testing.T) (*fakeCluster, *client.Client, *client.Queue, []*client.Delivery) {
	fc := newFake(t, 1)
	c := dial(t, fc)
	ctx := testCtx(t, 10*time.Second)
	if err := c.CreateQueue(ctx, "jobs", client.Partitions(2)); err != nil {
		t.Fatal(err)
	}
	q := c.Queue("jobs")
	var msgs []client.Message
	for _, g := range []string{"a", "a", "b", "b", "b"} {
		msgs = append(msgs, client.Message{Group: g, Body: []byte(g), Headers: map[string]string{"tenant": g}})
	}
	msgs = append(msgs, client.Message{Body: []byte("later"), Delay: time.Hour})
	if _, err := q.SendBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	held, err := q.Receive(ctx, client.ReceiveOptions{Max: 10, Visibility: time.Minute})
	if err != nil || len(held) != 2 { // the head of each group
		t.Fatalf("receive: %d, %v", len(held), err)
	}
	return fc, c, q, held
}

// Peek shows leased and delayed messages when asked, with the holder and
// deadline, and filters by group, header and age; a bad state is refused
// before anything is sent.
func TestClient_PeekStatesAndFilters(t *testing.T) {
	_, _, q, _ := inspectSetup(t)
	ctx := testCtx(t, 10*time.Second)
	all := client.MessageFilter{States: []string{client.StateAll}}
	ps, err := q.Peek(ctx, client.PeekOptions{Max: 100, MessageFilter: all})
	if err != nil || len(ps) != 6 {
		t.Fatalf("peek all: %d, %v", len(ps), err)
	}
	states := map[string]int{}
	for _, p := range ps {
		states[p.State]++
		if p.State == client.StateLeased && (p.Consumer == "" || p.VisibleAt.IsZero()) {
			t.Fatalf("leased without holder or deadline: %+v", p)
		}
		if p.State == client.StateDelayed && p.VisibleAt.Before(time.Now().Add(50*time.Minute)) {
			t.Fatalf("delayed visible at %v", p.VisibleAt)
		}
	}
	if states[client.StateLeased] != 2 || states[client.StateReady] != 3 || states[client.StateDelayed] != 1 {
		t.Fatalf("states %v", states)
	}
	if ps, _ := q.Peek(ctx, client.PeekOptions{Max: 100}); len(ps) != 3 {
		t.Fatalf("default peek showed %d, want the 3 ready ones", len(ps))
	}
	hdr := client.MessageFilter{States: []string{client.StateLeased}, HeaderKey: "tenant", HeaderValue: "b"}
	if ps, _ := q.Peek(ctx, client.PeekOptions{Max: 100, MessageFilter: hdr}); len(ps) != 1 || ps[0].Group != "b" {
		t.Fatalf("leased of tenant b: %+v", ps)
	}
	if ps, _ := q.Peek(ctx, client.PeekOptions{Max: 100, MessageFilter: client.MessageFilter{States: []string{"all"},
		OlderThan: time.Hour}}); len(ps) != 0 {
		t.Fatalf("older than an hour: %+v", ps)
	}
	if _, err := q.Peek(ctx, client.PeekOptions{Max: 1, MessageFilter: client.MessageFilter{States: []string{"dead"}}}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("peek of state dead: %v", err)
	}

}

// DeleteMatching counts on a dry run without changing anything, then
// deletes exactly the matching messages in their states; a purge with
// leased messages makes the holders' acks fail with ErrMessageNotFound.
func TestClient_DeleteMatchingAndPurgeLeased(t *testing.T) {
	fc, c, q, held := inspectSetup(t)
	ctx := testCtx(t, 10*time.Second)
	all := client.MessageFilter{States: []string{client.StateAll}}
	groupB := client.MessageFilter{States: []string{client.StateAll}, Group: "b"}
	// A leader that does not apply the filter as asked lists another
	// group: the client notices, and nothing is deleted.
	fc.setHook(func(_ int, op wire.Op, body any) fault {
		if r, ok := body.(*wire.PeekRequest); ok && op == wire.OpPeek {
			r.Group = "a"
		}
		return fault{}
	})
	if res, err := c.DeleteMatching(ctx, "jobs", groupB, false); !errors.Is(err, client.ErrMalformed) || res.Deleted != 0 {
		t.Fatalf("delete through a leader ignoring filters: %+v, %v", res, err)
	}
	fc.setHook(nil)
	dry, err := c.DeleteMatching(ctx, "jobs", groupB, true)
	if err != nil || dry.Matched != 3 || dry.Deleted != 0 || len(dry.Sample) != 3 {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	if ps, _ := q.Peek(ctx, client.PeekOptions{Max: 100, MessageFilter: all}); len(ps) != 6 {
		t.Fatalf("a dry run deleted: %d left", len(ps))
	}
	before := len(fc.requests(wire.OpDeleteMessages))
	res, err := c.DeleteMatching(ctx, "jobs", groupB, false)
	if err != nil || res.Matched != 3 || res.Deleted != 3 {
		t.Fatalf("delete group b: %+v, %v", res, err)
	}
	if n := len(fc.requests(wire.OpDeleteMessages)) - before; n != 1 {
		t.Fatalf("%d delete requests for one page", n)
	}
	ps, _ := q.Peek(ctx, client.PeekOptions{Max: 100, MessageFilter: all})
	var groups []string
	for _, p := range ps {
		groups = append(groups, p.Group)
	}
	if !slices.Equal(groups, []string{"a", "a", ""}) && !slices.Equal(groups, []string{"", "a", "a"}) {
		t.Fatalf("left after the delete: %v", groups)
	}
	for _, d := range held {
		if d.Group == "b" {
			if err := d.Ack(ctx); !errors.Is(err, client.ErrMessageNotFound) {
				t.Fatalf("ack of a deleted lease: %v", err)
			}
		}
	}

	n, err := c.Purge(ctx, "jobs", client.IncludeLeased())
	if err != nil || n != 3 {
		t.Fatalf("purge with leased: %d, %v", n, err)
	}
	for _, d := range held {
		if d.Group == "a" {
			if err := d.Ack(ctx); !errors.Is(err, client.ErrMessageNotFound) {
				t.Fatalf("ack after the purge: %v", err)
			}
		}
	}
	if _, err := c.DeleteMatching(ctx, "jobs", client.MessageFilter{HeaderValue: "x"}, true); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("header value without key: %v", err)
	}
}
