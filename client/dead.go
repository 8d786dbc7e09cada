package client

import (
	"context"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// DeadReason says why a message was dead-lettered.
type DeadReason = wire.DeadReason

// Dead-letter reasons.
const (
	// DeadAny selects every reason in a DeadFilter.
	DeadAny = wire.DeadAny
	// DeadRejected: a consumer rejected the message.
	DeadRejected = wire.DeadRejected
	// DeadRetriesExhausted: it was nacked on its last allowed receive.
	DeadRetriesExhausted = wire.DeadRetriesExhausted
	// DeadLeaseExpired: its last allowed lease expired.
	DeadLeaseExpired = wire.DeadLeaseExpired
)

// EventKind names an entry of a dead letter's history.
type EventKind = wire.EventKind

// Event kinds.
const (
	// EventNacked: a consumer asked for a retry.
	EventNacked = wire.EventNacked
	// EventLeaseExpired: the lease ran out.
	EventLeaseExpired = wire.EventLeaseExpired
	// EventRejected: a consumer rejected the message.
	EventRejected = wire.EventRejected
	// EventRedriven: an operator moved it back from the dead letters.
	EventRedriven = wire.EventRedriven
)

// Event is one entry of a dead letter's failure history.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// At is when it happened.
	At time.Time
	// Attempt is the delivery attempt the event ended.
	Attempt uint32
	// Consumer held that delivery, if any.
	Consumer string
	// Reason is the consumer's reason text, if any.
	Reason string
}

// DeadLetter is one dead-lettered message with its history. Zero times
// mean "never".
type DeadLetter struct {
	// Partition and Seq identify the message in its queue.
	Partition int
	Seq       uint64
	// ID and Group are the message's.
	ID    string
	Group string
	// Headers and Body are set by PeekDeadLetters only.
	Headers map[string]string
	Body    []byte
	// Bytes is the stored size of headers and body.
	Bytes int
	// Attempts counts the deliveries the message had.
	Attempts uint32
	// FirstEnqueuedAt is when the message was first sent; it differs
	// from EnqueuedAt for a message redriven before.
	FirstEnqueuedAt time.Time
	EnqueuedAt      time.Time
	// FirstDeliveredAt and LastDeliveredAt bound its deliveries.
	FirstDeliveredAt time.Time
	LastDeliveredAt  time.Time
	// DeadAt is when it was dead-lettered, and Reason why.
	DeadAt time.Time
	Reason DeadReason
	// ReasonText is the consumer's reason for a reject or last nack.
	ReasonText string
	// LastConsumer held its last delivery.
	LastConsumer string
	// History holds the newest failure events, oldest first.
	History []Event
}

// DeadFilter selects dead letters. Zero fields select everything; set
// fields must all match.
type DeadFilter struct {
	// Partitions restricts the selection to these partitions; nil means
	// every partition.
	Partitions []int
	// Seqs selects exactly these sequence numbers. Sequence numbers are
	// per partition, so Partitions must then name exactly one.
	Seqs []uint64
	// Reason selects one reason; DeadAny (0) selects all.
	Reason DeadReason
	// Group selects one message group.
	Group string
	// From and To bound the dead-lettering time to [From, To); a zero
	// time leaves that side open.
	From, To time.Time
	// Limit bounds how many dead letters are returned (or redriven, or
	// deleted) over all partitions; 0 means no bound.
	Limit int
}

// Page sizes of the dead-letter loops.
const (
	deadListPage = 1000
	deadPeekPage = 16 // bodies may be up to the queue's message limit each
	deadSeqBatch = 1000
)

// DeadLetters lists the dead letters selected by f, without headers and
// bodies, partition by partition in sequence order.
//
//	letters, err := c.DeadLetters(ctx, "orders", client.DeadFilter{Reason: client.DeadRejected})
//	for _, l := range letters {
//		fmt.Println(l.ID, l.ReasonText)
//	}
func (c *Client) DeadLetters(ctx context.Context, queue string, f DeadFilter) ([]DeadLetter, error) {
	return c.listDead(ctx, queue, f, wire.OpDeadList, deadListPage)
}

// PeekDeadLetters is DeadLetters with headers and bodies.
//
//	letters, err := c.PeekDeadLetters(ctx, "orders", client.DeadFilter{Limit: 10})
func (c *Client) PeekDeadLetters(ctx context.Context, queue string, f DeadFilter) ([]DeadLetter, error) {
	return c.listDead(ctx, queue, f, wire.OpDeadPeek, deadPeekPage)
}

// RedriveDeadLetters moves the dead letters selected by f back to ready,
// with attempts reset and id and group kept, and returns how many were
// moved. It works through every selected partition in pages of the
// letters dead at the time it reaches them, so messages that fail again
// while it runs are not picked up twice.
//
//	n, err := c.RedriveDeadLetters(ctx, "orders", client.DeadFilter{Group: "customer-42"})
func (c *Client) RedriveDeadLetters(ctx context.Context, queue string, f DeadFilter) (int, error) {
	return c.applyDead(ctx, queue, f, wire.OpDeadRedrive)
}

// DeleteDeadLetters deletes the dead letters selected by f and returns how
// many were deleted.
//
//	n, err := c.DeleteDeadLetters(ctx, "orders", client.DeadFilter{
//		Partitions: []int{letter.Partition}, Seqs: []uint64{letter.Seq},
//	})
func (c *Client) DeleteDeadLetters(ctx context.Context, queue string, f DeadFilter) (int, error) {
	return c.applyDead(ctx, queue, f, wire.OpDeadDelete)
}

// deadParts returns the partitions a filter covers.
func (c *Client) deadParts(ctx context.Context, queue string, f DeadFilter) ([]int, error) {
	if len(f.Seqs) > 0 && len(f.Partitions) != 1 {
		return nil, invalidArg("a dead-letter filter with Seqs must name exactly one partition")
	}
	if f.Limit < 0 {
		return nil, invalidArg("negative limit %d", f.Limit)
	}
	if f.Partitions != nil {
		return f.Partitions, nil
	}
	n, err := c.partitions(ctx, queue)
	if err != nil {
		return nil, err
	}
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	return parts, nil
}

// toWire converts f, without its limit.
func (f DeadFilter) toWire() wire.DeadFilter {
	w := wire.DeadFilter{Seqs: f.Seqs, Reason: f.Reason, Group: f.Group}
	if !f.From.IsZero() {
		w.FromAt = f.From.UnixNano()
	}
	if !f.To.IsZero() {
		w.ToAt = f.To.UnixNano()
	}
	return w
}

// listDead pages through the selected dead letters of every partition.
func (c *Client) listDead(ctx context.Context, queue string, f DeadFilter, op wire.Op, page int) ([]DeadLetter, error) {
	parts, err := c.deadParts(ctx, queue, f)
	if err != nil {
		return nil, err
	}
	var out []DeadLetter
	for _, p := range parts {
		wf := f.toWire()
		for {
			limit := page
			if f.Limit > 0 {
				limit = min(page, f.Limit-len(out))
			}
			if limit <= 0 {
				return out, nil
			}
			wf.Limit = limit
			letters, err := c.deadPage(ctx, queue, p, op, wf)
			if err != nil {
				return out, err
			}
			for _, l := range letters {
				out = append(out, deadLetterFromWire(l))
			}
			if len(letters) < limit {
				break
			}
			wf.AfterSeq = letters[len(letters)-1].Seq
		}
	}
	return out, nil
}

// deadPage fetches one page of a partition's dead letters.
func (c *Client) deadPage(ctx context.Context, queue string, p int, op wire.Op, wf wire.DeadFilter) ([]wire.DeadLetter, error) {
	rt := partRoute{c, queue, p}
	if op == wire.OpDeadPeek {
		var resp wire.DeadPeekResponse
		err := c.call(ctx, rt, op, wire.DeadPeekRequest{Queue: queue, Partition: p, Filter: wf}, &resp)
		return resp.Letters, err
	}
	var resp wire.DeadListResponse
	err := c.call(ctx, rt, wire.OpDeadList, wire.DeadListRequest{Queue: queue, Partition: p, Filter: wf}, &resp)
	return resp.Letters, err
}

// applyDead redrives or deletes the selected dead letters: by the given
// sequence numbers, or page by page of a listing.
func (c *Client) applyDead(ctx context.Context, queue string, f DeadFilter, op wire.Op) (int, error) {
	parts, err := c.deadParts(ctx, queue, f)
	if err != nil {
		return 0, err
	}
	total := 0
	left := func() int {
		if f.Limit > 0 {
			return f.Limit - total
		}
		return deadListPage
	}
	for _, p := range parts {
		wf := f.toWire()
		for left() > 0 {
			var seqs []uint64
			last := false
			if len(f.Seqs) > 0 {
				seqs = f.Seqs[:min(len(f.Seqs), deadSeqBatch, left())]
				f.Seqs = f.Seqs[len(seqs):]
				last = len(f.Seqs) == 0
			} else {
				wf.Limit = min(deadListPage, left())
				letters, err := c.deadPage(ctx, queue, p, wire.OpDeadList, wf)
				if err != nil {
					return total, err
				}
				for _, l := range letters {
					seqs = append(seqs, l.Seq)
				}
				last = len(letters) < wf.Limit
				if len(letters) > 0 {
					wf.AfterSeq = letters[len(letters)-1].Seq
				}
			}
			if len(seqs) > 0 {
				n, err := c.deadBySeqs(ctx, queue, p, op, seqs)
				total += n
				if err != nil {
					return total, err
				}
			}
			if last {
				break
			}
		}
	}
	return total, nil
}

// deadBySeqs redrives or deletes the given dead letters of a partition.
func (c *Client) deadBySeqs(ctx context.Context, queue string, p int, op wire.Op, seqs []uint64) (int, error) {
	rt := partRoute{c, queue, p}
	wf := wire.DeadFilter{Seqs: seqs, Limit: len(seqs)}
	if op == wire.OpDeadRedrive {
		var resp wire.DeadRedriveResponse
		err := c.call(ctx, rt, op, wire.DeadRedriveRequest{Queue: queue, Partition: p, Filter: wf}, &resp)
		return resp.Count, err
	}
	var resp wire.DeadDeleteResponse
	err := c.call(ctx, rt, wire.OpDeadDelete, wire.DeadDeleteRequest{Queue: queue, Partition: p, Filter: wf}, &resp)
	return resp.Count, err
}

func deadLetterFromWire(w wire.DeadLetter) DeadLetter {
	l := DeadLetter{
		Partition: w.Partition, Seq: w.Seq, ID: w.ID, Group: w.Group,
		Headers: w.Headers, Body: w.Body, Bytes: w.Bytes, Attempts: w.Attempts,
		FirstEnqueuedAt: unixTime(w.FirstEnqueuedAt), EnqueuedAt: unixTime(w.EnqueuedAt),
		FirstDeliveredAt: unixTime(w.FirstDeliveredAt), LastDeliveredAt: unixTime(w.LastDeliveredAt),
		DeadAt: unixTime(w.DeadAt), Reason: w.Reason, ReasonText: w.ReasonText,
		LastConsumer: w.LastConsumer,
	}
	for _, e := range w.History {
		l.History = append(l.History, Event{
			Kind: e.Kind, At: unixTime(e.At), Attempt: e.Attempt, Consumer: e.Consumer, Reason: e.Reason,
		})
	}
	return l
}

// unixTime converts Unix nanoseconds, keeping 0 as the zero time.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
