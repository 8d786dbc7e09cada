package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// Queue is the handle of one named queue, from Client.Queue. It is cheap,
// safe for concurrent use, and carries the queue's receive buffer.
type Queue struct {
	c    *Client
	name string
	rr   atomic.Uint64 // rotates the partition receives start with

	mu       sync.Mutex
	buf      []bufferedLease   // leases received but not yet returned (see Receive)
	bufReady chan struct{}     // closed when leases are buffered; nil until asked for
	bufTimer *time.Timer       // releases buffered leases nobody took in time
	orphans  map[int]int       // by partition: polls of returned Receive calls still waiting (receive_orphans.go)
	lanes    map[int]*sendLane // by partition: concurrent sends merged (see sendLane)
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Message is a message to send.
type Message struct {
	// ID is the idempotency key: a second send of the same id within the
	// queue's dedup window is not enqueued again and reports Duplicate.
	// When empty, the client assigns a fresh time-ordered id (26
	// characters) before the first attempt and keeps it for every retry.
	ID string
	// Group, when set, keeps the messages of one group (an order id, an
	// account id) in one partition and delivers them one at a time in send
	// order.
	Group string
	// Headers are free-form string pairs delivered with the message.
	Headers map[string]string
	// Body is the payload.
	Body []byte
	// Delay keeps the message invisible this long after it is accepted,
	// up to MaxDelay.
	Delay time.Duration
	// DeliverAt, when set, keeps the message invisible until that time
	// instead (at most MaxDelay ahead; a time already past delivers at
	// once). The client turns it into a delay when it sends, by its own
	// clock, so the partition's clock and the client's may differ by
	// their skew. Set at most one of Delay and DeliverAt.
	DeliverAt time.Time
	// Priority is 0 (the default) to MaxPriority, the most urgent: a
	// receive takes the highest priority ready first, oldest first within
	// a priority, while a guard keeps lower priorities moving (see
	// docs/flow-control.md). A group's messages are still delivered in
	// send order whatever their priorities. Out of range, the whole call
	// fails with ErrInvalidPriority.
	Priority Priority
}

// MaxDelay is the longest a message may be delayed (Delay, DeliverAt):
// 366 days.
const MaxDelay = 366 * 24 * time.Hour

// delayOf returns the delay of m, message i of a call: Delay, or the time
// until DeliverAt from now.
func (m *Message) delayOf(i int, now time.Time) (time.Duration, error) {
	d := m.Delay
	if !m.DeliverAt.IsZero() {
		if m.Delay != 0 {
			return 0, invalidArg("message %d: both a delay (%v) and a delivery time (%v)", i, m.Delay, m.DeliverAt)
		}
		d = max(m.DeliverAt.Sub(now), 0)
	}
	if d < 0 || d > MaxDelay {
		return 0, invalidArg("message %d: delay %v (want 0..%v)", i, d, MaxDelay)
	}
	return d, nil
}

// Priority is a message's priority, 0 (the default) to MaxPriority.
type Priority = wire.Priority

// MaxPriority is the highest (most urgent) message priority.
const MaxPriority = wire.PriorityMax

// SendResult is the confirmed outcome of one sent message.
type SendResult struct {
	// ID is the message's id, the caller's or the one the client
	// assigned. It is set even when the send failed, so that the message
	// can be sent again with the same id.
	ID string
	// Partition is the partition the message was routed to.
	Partition int
	// Seq is the message's sequence number in its partition; for a
	// duplicate, the original message's.
	Seq uint64
	// Duplicate is set when the id had already been accepted within the
	// dedup window: the message was not enqueued a second time.
	Duplicate bool
}

// Send enqueues one message and returns once a majority of the partition's
// replicas has stored it. Transient failures (not leader, unavailable, lost
// connection, server timeout) are retried with the same message id until
// ctx is done. If the client then cannot tell whether the message was
// stored, the error wraps ErrUnconfirmed: sending it again with the
// returned result's ID is safe. Refusals are returned as they are:
// ErrQueueFull (not retried by the client: back off and send again if the
// message must go through), ErrMessageTooLarge (over the queue's
// max_message_bytes, or over the protocol's frame limit, which the client
// checks before sending), ErrInvalidArgument, ErrQueueNotFound.
//
// Sends from many goroutines share requests: while two requests to a
// partition are out, further sends to it wait and then leave together,
// so concurrent callers cost one request and one raft round between
// them; a lone send leaves at once.
//
//	res, err := c.Queue("orders").Send(ctx, client.Message{
//		Group: order.CustomerID,
//		Body:  payload,
//	})
//	if errors.Is(err, client.ErrUnconfirmed) {
//		// unknown outcome: resend later with ID res.ID
//	}
func (q *Queue) Send(ctx context.Context, m Message) (SendResult, error) {
	res, err := q.SendBatch(ctx, []Message{m})
	var be *BatchError
	if errors.As(err, &be) {
		return res[0], be.Errors[0]
	}
	if err != nil {
		return SendResult{}, err
	}
	return res[0], nil
}

// SendBatch enqueues several messages. Each is routed to its partition
// (by group when it has one, else by id) and each partition's messages go
// to its leader in requests of up to 1000 messages and about 4 MiB, in
// order; partitions are sent to concurrently. A partition's messages that
// fit one request may share it with concurrent sends, as for Send. Ids are assigned, and
// retries made, as for Send. A message too big for the protocol's frame
// limit fails alone with ErrMessageTooLarge; the others are still sent.
//
// The results are in the order of msgs. When some messages failed the
// error is a *BatchError holding one error per message (nil for those that
// were sent), and the results of the sent messages are still valid. Errors
// that concern the whole call (an unknown queue, a closed client, an
// invalid message) are returned alone, with nil results.
//
//	res, err := q.SendBatch(ctx, msgs)
//	var be *client.BatchError
//	if errors.As(err, &be) {
//		for i, e := range be.Errors {
//			if e != nil {
//				log.Printf("message %s: %v", res[i].ID, e)
//			}
//		}
//	}
func (q *Queue) SendBatch(ctx context.Context, msgs []Message) ([]SendResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	if q.c.isClosed() {
		return nil, ErrClosed
	}
	wms := make([]wire.Message, len(msgs))
	now := time.Now()
	for i, m := range msgs {
		delay, err := m.delayOf(i, now)
		if err != nil {
			return nil, err
		}
		if m.Priority > MaxPriority {
			return nil, invalidPriority(fmt.Sprintf("message %d: ", i), m.Priority)
		}
		id := m.ID
		if id == "" {
			id = newID()
		}
		wms[i] = wire.Message{ID: id, Group: m.Group, Headers: m.Headers, Body: m.Body, Delay: delay,
			Priority: m.Priority}
	}
	n, err := q.c.partitions(ctx, q.name)
	if err != nil {
		return nil, err
	}
	results := make([]SendResult, len(msgs))
	errs := make([]error, len(msgs))
	byPart := routeBatch(wms, n, results, errs)
	// One partition's chunks go one after the other, keeping the order of
	// its groups; partitions go in parallel, the last one on this
	// goroutine (a batch for one partition starts no goroutine at all).
	sendPart := func(p int, idx []int) {
		if len(idx) == 1 { // one message is one chunk
			q.sendShared(ctx, p, idx, wms, results, errs)
			return
		}
		chunks := chunk(idx, func(i int) int { return messageWeight(wms[i]) })
		if len(chunks) == 1 {
			q.sendShared(ctx, p, idx, wms, results, errs)
			return
		}
		for _, ch := range chunks {
			q.sendChunk(ctx, p, ch, wms, results, errs)
		}
	}
	if byPart == nil {
		if idx := sendable(errs); len(idx) > 0 {
			sendPart(results[idx[0]].Partition, idx)
		}
	}
	var wg sync.WaitGroup
	left := len(byPart)
	for p, idx := range byPart {
		if left--; left == 0 {
			sendPart(p, idx)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sendPart(p, idx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return results, &BatchError{Errors: errs}
		}
	}
	return results, nil
}

// routeBatch records each message's id and partition (of n) in results,
// and in errs ErrMessageTooLarge for one over the protocol's frame limit.
// It returns the indexes of the others by partition, or nil when they all
// go to one partition (always for a single message), which spares a map
// on the path of every Send.
func routeBatch(wms []wire.Message, n int, results []SendResult, errs []error) map[int][]int {
	single, first := true, -1
	for i, m := range wms {
		key := m.Group
		if key == "" {
			key = m.ID
		}
		p := wire.PartitionFor(key, n)
		results[i] = SendResult{ID: m.ID, Partition: p}
		if w := messageWeight(m); w > maxFrameMessageBytes {
			errs[i] = wire.Errorf(wire.CodeMessageTooLarge,
				"message %d of about %d bytes exceeds the protocol's frame limit of %d", i, w, maxFrameMessageBytes)
			continue
		}
		if first < 0 {
			first = p
		} else if p != first {
			single = false
		}
	}
	if single {
		return nil
	}
	byPart := make(map[int][]int)
	for i := range wms {
		if errs[i] == nil {
			byPart[results[i].Partition] = append(byPart[results[i].Partition], i)
		}
	}
	return byPart
}

// sendable returns the indexes of the messages routeBatch found no error
// in.
func sendable(errs []error) []int {
	idx := make([]int, 0, len(errs))
	for i, err := range errs {
		if err == nil {
			idx = append(idx, i)
		}
	}
	return idx
}

// sendChunk sends the messages at idx to partition p and records their
// outcomes in results and errs.
func (q *Queue) sendChunk(ctx context.Context, p int, idx []int, wms []wire.Message,
	results []SendResult, errs []error) {
	runBatch(ctx, q.c, q.sendSpec(p, wms, func(i int, r wire.SendResult, err error, amb bool) {
		if errs[i] = sendOutcome(r, err, amb); errs[i] == nil {
			results[i].Seq, results[i].Duplicate = r.Seq, r.Duplicate
		}
	}), idx)
}

// sendSpec is the batchSpec of send requests to partition p carrying the
// messages of wms that runBatch's indexes name.
func (q *Queue) sendSpec(p int, wms []wire.Message, done func(i int, r wire.SendResult, err error, amb bool)) batchSpec[wire.SendResult] {
	return batchSpec[wire.SendResult]{
		rt: partRoute{q.c, q.name, p},
		op: wire.OpSend,
		build: func(idx []int) any {
			req := wire.SendRequest{Queue: q.name, Partition: p, Messages: make([]wire.Message, len(idx))}
			for k, i := range idx {
				req.Messages[k] = wms[i]
			}
			return req
		},
		decode: func(resp wire.Response) ([]wire.SendResult, error) {
			var sr wire.SendResponse
			err := resp.Decode(&sr)
			return sr.Results, err
		},
		code: func(r wire.SendResult) wire.Code { return r.Code },
		done: done,
	}
}

// sendOutcome is the error of one sent message: err (wrapped in
// ErrUnconfirmed when an attempt may have stored it) or its refusal. A
// refusal after an ambiguous attempt is still a refusal: the server checks
// the dedup window first, so a stored message would have been reported as
// a duplicate.
func sendOutcome(r wire.SendResult, err error, amb bool) error {
	switch {
	case err != nil && amb:
		return unconfirmed(err)
	case err != nil:
		return err
	default:
		return r.Err()
	}
}

// maxFrameMessageBytes is the largest message (as messageWeight counts
// it) that fits in a request frame, with room for the envelope.
const maxFrameMessageBytes = wire.MaxFrameBytes - 4<<10

// messageWeight approximates a message's encoded size.
func messageWeight(m wire.Message) int {
	n := len(m.ID) + len(m.Group) + len(m.Body) + 32
	for k, v := range m.Headers {
		n += len(k) + len(v) + 4
	}
	return n
}
