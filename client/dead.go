package client

import (
	"context"
	"fmt"
	"slices"
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
	// Priority is the message's priority, 0..MaxPriority; a redrive
	// keeps it.
	Priority Priority
}

// DeadFilter selects dead letters. Zero fields select everything; every
// set field must match, so a letter named by Seqs or Letters is selected
// only when Reason, Group, Text, From and To (those that are set) match it
// too. DeleteDeadLetters and RedriveDeadLetters never touch a letter the
// filter excludes.
type DeadFilter struct {
	// Partitions restricts the selection to these partitions; nil means
	// every partition.
	Partitions []int
	// Seqs selects exactly these sequence numbers. Sequence numbers are
	// per partition, so Partitions must then name exactly one; use
	// Letters to name dead letters of several partitions.
	Seqs []uint64
	// Letters selects exactly these dead letters (see DeadLetter.Ref),
	// which may lie in different partitions; the client sends each
	// partition its own. With Partitions set, letters of other
	// partitions are not selected. Seqs and Letters exclude each other.
	Letters []LetterRef
	// Reason selects one reason; DeadAny (0) selects all.
	Reason DeadReason
	// Group selects one message group.
	Group string
	// Text selects dead letters whose ReasonText (the consumer's reason
	// for the reject or last nack, or "lease expired") contains it:
	// a case-sensitive substring match, at most MaxDeadTextBytes bytes.
	Text string
	// From and To bound the dead-lettering time to [From, To); a zero
	// time leaves that side open.
	From, To time.Time
	// Limit bounds how many dead letters are returned (or redriven, or
	// deleted) over all partitions; 0 means no bound.
	Limit int
}

// LetterRef names one dead letter: its partition and sequence number.
type LetterRef struct {
	Partition int
	Seq       uint64
}

// Ref returns the reference of the dead letter, for DeadFilter.Letters.
func (l DeadLetter) Ref() LetterRef { return LetterRef{Partition: l.Partition, Seq: l.Seq} }

// MaxDeadTextBytes is the longest DeadFilter.Text; reason texts are kept
// up to this length.
const MaxDeadTextBytes = 256

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

// deadPart is the work of a dead-letter call in one partition: seqs nil
// means every dead letter the filter selects there.
type deadPart struct {
	p    int
	seqs []uint64
}

// deadPlan checks a filter and returns, per partition it covers, the
// sequence numbers it names (sorted), if any.
func (c *Client) deadPlan(ctx context.Context, queue string, f DeadFilter) ([]deadPart, error) {
	switch {
	case len(f.Seqs) > 0 && len(f.Partitions) != 1:
		return nil, invalidArg("a dead-letter filter with Seqs must name exactly one partition (use Letters for several)")
	case len(f.Seqs) > 0 && len(f.Letters) > 0:
		return nil, invalidArg("a dead-letter filter takes Seqs or Letters, not both")
	case f.Limit < 0:
		return nil, invalidArg("negative limit %d", f.Limit)
	case len(f.Text) > MaxDeadTextBytes:
		return nil, invalidArg("dead-letter text filter of %d bytes (at most %d)", len(f.Text), MaxDeadTextBytes)
	case !f.From.IsZero() && !f.To.IsZero() && f.To.Before(f.From):
		return nil, invalidArg("dead-letter time range ends before it starts")
	}
	if len(f.Seqs) > 0 {
		return []deadPart{{p: f.Partitions[0], seqs: sortedSeqs(f.Seqs)}}, nil
	}
	if len(f.Letters) > 0 {
		return lettersByPart(f.Letters, f.Partitions), nil
	}
	if f.Partitions != nil {
		out := make([]deadPart, len(f.Partitions))
		for i, p := range f.Partitions {
			out[i] = deadPart{p: p}
		}
		return out, nil
	}
	n, err := c.partitions(ctx, queue)
	if err != nil {
		return nil, err
	}
	out := make([]deadPart, n)
	for i := range out {
		out[i] = deadPart{p: i}
	}
	return out, nil
}

// lettersByPart splits references per partition, in partition order,
// keeping only the partitions of only (all when only is nil).
func lettersByPart(refs []LetterRef, only []int) []deadPart {
	byPart := make(map[int][]uint64)
	for _, r := range refs {
		if only == nil || slices.Contains(only, r.Partition) {
			byPart[r.Partition] = append(byPart[r.Partition], r.Seq)
		}
	}
	out := make([]deadPart, 0, len(byPart))
	for p, seqs := range byPart {
		out = append(out, deadPart{p: p, seqs: sortedSeqs(seqs)})
	}
	slices.SortFunc(out, func(a, b deadPart) int { return a.p - b.p })
	return out
}

// sortedSeqs returns a sorted copy of seqs without repeats.
func sortedSeqs(seqs []uint64) []uint64 {
	out := slices.Clone(seqs)
	slices.Sort(out)
	return slices.Compact(out)
}

// toWire converts the fields of f every partition's request carries: all
// but the partitions, sequence numbers and limit.
func (f DeadFilter) toWire() wire.DeadFilter {
	w := wire.DeadFilter{Reason: f.Reason, Group: f.Group, Text: f.Text}
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
	plan, err := c.deadPlan(ctx, queue, f)
	if err != nil {
		return nil, err
	}
	var out []DeadLetter
	for _, dp := range plan {
		for _, seqs := range seqChunks(dp.seqs) {
			wf := f.toWire()
			wf.Seqs = seqs
			for {
				limit := page
				if f.Limit > 0 {
					limit = min(page, f.Limit-len(out))
				}
				if limit <= 0 {
					return out, nil
				}
				wf.Limit = limit
				letters, next, err := c.deadPage(ctx, queue, dp.p, op, wf)
				if err != nil {
					return out, err
				}
				for _, l := range letters {
					out = append(out, deadLetterFromWire(l))
				}
				if next != 0 { // the answer's byte budget ended the page
					wf.AfterSeq = next
					continue
				}
				if len(letters) < limit {
					break
				}
				wf.AfterSeq = letters[len(letters)-1].Seq
			}
		}
	}
	return out, nil
}

// seqChunks cuts sorted sequence numbers into requests of at most
// deadSeqBatch; nil (no numbers named) gives one nil chunk.
func seqChunks(seqs []uint64) [][]uint64 {
	if seqs == nil {
		return [][]uint64{nil}
	}
	var out [][]uint64
	for len(seqs) > 0 {
		k := min(len(seqs), deadSeqBatch)
		out = append(out, seqs[:k:k])
		seqs = seqs[k:]
	}
	return out
}

// deadPage fetches one page of a partition's dead letters, and for a peek
// the AfterSeq to go on from when the server's byte budget ended the page
// (0 otherwise).
func (c *Client) deadPage(ctx context.Context, queue string, p int, op wire.Op, wf wire.DeadFilter) ([]wire.DeadLetter, uint64, error) {
	rt := partRoute{c, queue, p}
	if op == wire.OpDeadPeek {
		var resp wire.DeadPeekResponse
		err := c.call(ctx, rt, op, wire.DeadPeekRequest{Queue: queue, Partition: p, Filter: wf}, &resp)
		if err == nil && resp.Next != 0 && (len(resp.Letters) == 0 || resp.Next <= wf.AfterSeq) {
			return nil, 0, fmt.Errorf("%w: a dead-letter page goes on at %d, not after %d", ErrMalformed, resp.Next, wf.AfterSeq)
		}
		return resp.Letters, resp.Next, err
	}
	var resp wire.DeadListResponse
	err := c.call(ctx, rt, wire.OpDeadList, wire.DeadListRequest{Queue: queue, Partition: p, Filter: wf}, &resp)
	return resp.Letters, 0, err
}

// applyDead redrives or deletes the selected dead letters: by the named
// sequence numbers, or page by page of a listing. Every request carries
// the whole filter besides the sequence numbers, so the server checks
// each letter against it again.
func (c *Client) applyDead(ctx context.Context, queue string, f DeadFilter, op wire.Op) (int, error) {
	plan, err := c.deadPlan(ctx, queue, f)
	if err != nil {
		return 0, err
	}
	total := 0
	// left says how many more letters one request may handle, given done
	// handled so far in the current partition.
	left := func(done int) int {
		if f.Limit > 0 {
			return f.Limit - total - done
		}
		return deadListPage
	}
	for _, dp := range plan {
		var n int
		var err error
		if dp.seqs != nil {
			n, err = c.applyDeadSeqs(ctx, queue, f, op, dp, left)
		} else {
			n, err = c.applyDeadListed(ctx, queue, f, op, dp.p, left)
		}
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// applyDeadSeqs redrives or deletes named dead letters of one partition,
// in requests of at most deadSeqBatch and never more than left allows.
func (c *Client) applyDeadSeqs(ctx context.Context, queue string, f DeadFilter, op wire.Op, dp deadPart, left func(done int) int) (int, error) {
	total := 0
	seqs := dp.seqs
	for len(seqs) > 0 {
		k := min(len(seqs), deadSeqBatch, left(total))
		if k <= 0 {
			break
		}
		n, err := c.deadBySeqs(ctx, queue, dp.p, op, f.toWire(), seqs[:k:k])
		total += n
		if err != nil {
			return total, err
		}
		seqs = seqs[k:]
	}
	return total, nil
}

// applyDeadListed redrives or deletes, page by page, the dead letters of
// one partition that a listing with the filter returns.
func (c *Client) applyDeadListed(ctx context.Context, queue string, f DeadFilter, op wire.Op, p int, left func(done int) int) (int, error) {
	total := 0
	wf := f.toWire()
	for {
		wf.Limit = min(deadListPage, left(total))
		if wf.Limit <= 0 {
			return total, nil
		}
		letters, _, err := c.deadPage(ctx, queue, p, wire.OpDeadList, wf)
		if err != nil {
			return total, err
		}
		if len(letters) > 0 {
			seqs := make([]uint64, len(letters))
			for i, l := range letters {
				seqs[i] = l.Seq
			}
			n, err := c.deadBySeqs(ctx, queue, p, op, f.toWire(), seqs)
			total += n
			if err != nil {
				return total, err
			}
			wf.AfterSeq = letters[len(letters)-1].Seq
		}
		if len(letters) < wf.Limit {
			return total, nil
		}
	}
}

// deadBySeqs redrives or deletes the given dead letters of a partition
// that also match wf.
func (c *Client) deadBySeqs(ctx context.Context, queue string, p int, op wire.Op, wf wire.DeadFilter, seqs []uint64) (int, error) {
	rt := partRoute{c, queue, p}
	wf.Seqs, wf.Limit, wf.AfterSeq = seqs, len(seqs), 0
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
		LastConsumer: w.LastConsumer, Priority: w.Priority,
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
