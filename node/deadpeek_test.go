package node

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// TestNode_DeadPeekAnswerStaysWithinItsByteBudget checks that a dead-letter
// peek asking for many letters with large bodies gets an answer of about
// wire.PeekBytesMax at most, with Next saying where the listing goes on,
// and that following Next returns every letter once.
func TestNode_DeadPeekAnswerStaysWithinItsByteBudget(t *testing.T) {
	c := newLeaderCaller(t, "dp")
	const total, size = 6, 900 << 10 // 5.4 MiB of bodies: more than one answer
	msgs := make([]wire.Message, total)
	for i := range msgs {
		msgs[i] = wire.Message{ID: fmt.Sprintf("m%d", i), Body: bytes.Repeat([]byte{byte('a' + i)}, size)}
	}
	// Sends of messages with ids may be repeated: under -race on a busy
	// machine a leader change while the 5.4 MiB commit can leave the
	// outcome unknown, and the dedup window answers a repeat.
	var sent wire.SendResponse
	testwait.UntilNil(t, 60*time.Second, "the send confirmed", func() error {
		err := c.call(wire.OpSend, &wire.SendRequest{Queue: "dp", Messages: msgs}, &sent)
		if wire.CodeOf(err) == wire.CodeTimeout {
			c.c = nil // ask for the leader again
			return err
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	})
	var got wire.ReceiveResponse
	if err := c.call(wire.OpReceive, &wire.ReceiveRequest{Queue: "dp", Max: total, Visibility: time.Minute}, &got); err != nil || len(got.Messages) != total {
		t.Fatalf("receive: %v, %d messages", err, len(got.Messages))
	}
	items := make([]wire.RejectItem, total)
	for i, m := range got.Messages {
		items[i] = wire.RejectItem{Receipt: m.Receipt(), Reason: "poison"}
	}
	var rejected wire.RejectResponse
	if err := c.call(wire.OpReject, &wire.RejectRequest{Queue: "dp", Items: items}, &rejected); err != nil {
		t.Fatal(err)
	}
	var ids []string
	after, pages := uint64(0), 0
	for {
		var page wire.DeadPeekResponse
		req := &wire.DeadPeekRequest{Queue: "dp", Filter: wire.DeadFilter{Limit: 1000, AfterSeq: after}}
		if err := c.call(wire.OpDeadPeek, req, &page); err != nil {
			t.Fatal(err)
		}
		pages++
		held := 0
		for _, l := range page.Letters {
			ids = append(ids, l.ID)
			held += len(l.Body)
		}
		if held > wire.PeekBytesMax {
			t.Fatalf("page %d holds %d bytes of bodies, budget %d", pages, held, wire.PeekBytesMax)
		}
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	if pages < 2 || fmt.Sprint(ids) != "[m0 m1 m2 m3 m4 m5]" {
		t.Fatalf("%d pages with %v", pages, ids)
	}
}
