package client

import (
	"context"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// MaxPeek is the most messages one Peek returns.
const MaxPeek = wire.PeekMax

// PeekOptions tune Peek.
type PeekOptions struct {
	// Max is the most messages to return, 1..MaxPeek; 0 means 1.
	Max int
}

// PeekedMessage is a ready message seen by Peek: not leased, nothing
// changed. It carries no receipt, since no delivery took place.
type PeekedMessage struct {
	// ID, Group, Headers and Body are the message's.
	ID      string
	Group   string
	Headers map[string]string
	Body    []byte
	// Partition and Seq identify the message in its queue.
	Partition int
	Seq       uint64
	// EnqueuedAt is when the message was accepted.
	EnqueuedAt time.Time
	// Attempts counts its deliveries so far; 0 for a message never
	// received.
	Attempts uint32
	// Blocked is set for a group message that waits behind an earlier
	// message of its group: a receive does not get it yet.
	Blocked bool
	// Priority is the message's priority, 0..MaxPriority. Peek lists in
	// seq order; a receive takes higher priorities first.
	Priority Priority
}

// Peek returns up to opts.Max ready messages of the queue with their
// headers and bodies, without leasing them: a following Receive gets
// them as if Peek had not happened (attempt 1 for a new message). It asks
// the partitions in order, each answering oldest first from its leader
// (which confirms its leadership, so the answer is not stale); delayed
// and leased messages are not shown. The answer is bounded to about
// wire.PeekBytesMax bytes of headers and bodies in all.
//
//	ms, err := q.Peek(ctx, client.PeekOptions{Max: 10})
func (q *Queue) Peek(ctx context.Context, opts PeekOptions) ([]PeekedMessage, error) {
	if opts.Max < 0 || opts.Max > MaxPeek {
		return nil, invalidArg("peek max %d out of 1..%d", opts.Max, MaxPeek)
	}
	want := max(opts.Max, 1)
	n, err := q.c.partitions(ctx, q.name)
	if err != nil {
		return nil, err
	}
	var out []PeekedMessage
	budget := wire.PeekBytesMax
	for p := 0; p < n && len(out) < want && budget > 0; p++ {
		after := uint64(0)
		for len(out) < want && budget > 0 {
			req := wire.PeekRequest{Queue: q.name, Partition: p, Max: want - len(out), MaxBytes: budget, AfterSeq: after}
			var resp wire.PeekResponse
			if err := q.c.call(ctx, partRoute{q.c, q.name, p}, wire.OpPeek, req, &resp); err != nil {
				return out, err
			}
			for _, m := range resp.Messages {
				out = append(out, PeekedMessage{ID: m.ID, Group: m.Group, Headers: m.Headers, Body: m.Body,
					Partition: m.Partition, Seq: m.Seq, EnqueuedAt: time.Unix(0, m.EnqueuedAt),
					Attempts: m.Attempts, Blocked: m.Blocked, Priority: m.Priority})
				budget -= len(m.Body) + headerBytes(m.Headers)
			}
			if resp.Next == 0 || resp.Next <= after {
				break
			}
			after = resp.Next
		}
	}
	return out[:min(len(out), want)], nil
}

// headerBytes is the size of headers' keys and values.
func headerBytes(h map[string]string) int {
	n := 0
	for k, v := range h {
		n += len(k) + len(v)
	}
	return n
}
