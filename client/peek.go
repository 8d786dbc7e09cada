package client

import (
	"context"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// MaxPeek is the most messages one Peek returns.
const MaxPeek = wire.PeekMax

// Message states, as MessageFilter.States and PeekedMessage.State name
// them; StateAll selects every live state.
const (
	StateReady   = wire.StateReady
	StateDelayed = wire.StateDelayed
	StateLeased  = wire.StateLeased
	StateAll     = wire.StateAll
)

// MessageFilter selects live messages for Peek and DeleteMatching: those
// in States that match every other criterion set. Group, headers and
// enqueue time never change, and age only grows, so a message matching
// them keeps matching; only its state moves.
type MessageFilter struct {
	// States lists the states to select (StateReady, StateDelayed,
	// StateLeased, StateAll); none means ready only.
	States []string
	// Group, when set, selects the messages of this group (exact).
	Group string
	// HeaderKey, when set, selects the messages whose header HeaderKey is
	// exactly HeaderValue.
	HeaderKey, HeaderValue string
	// OlderThan, when set, selects the messages enqueued at least this
	// long ago (by their partition's clock).
	OlderThan time.Duration
}

// check refuses what a server would refuse before any request is sent.
func (f MessageFilter) check() error {
	if len(f.States) > wire.PeekStatesMax {
		return invalidArg("%d states (at most %d)", len(f.States), wire.PeekStatesMax)
	}
	for _, s := range f.States {
		switch s {
		case StateReady, StateDelayed, StateLeased, StateAll:
		default:
			return invalidArg("message state %q (want ready, delayed, leased or all)", s)
		}
	}
	if f.OlderThan < 0 {
		return invalidArg("older than %v: negative", f.OlderThan)
	}
	if f.HeaderKey == "" && f.HeaderValue != "" {
		return invalidArg("header filter has a value but no key")
	}
	return nil
}

// isSet reports whether the filter asks for more than the ready messages.
func (f MessageFilter) isSet() bool {
	return len(f.States) > 0 || f.Group != "" || f.HeaderKey != "" || f.OlderThan != 0
}

// checkAnswer refuses a message that a server which knows filters cannot
// have answered: one without a state (servers from before filters show
// ready messages and ignore the filter), or of another group.
func (f MessageFilter) checkAnswer(m wire.PeekedMessage) error {
	if f.isSet() && (m.State == "" || (f.Group != "" && m.Group != f.Group)) {
		return wire.Errorf(wire.CodeMalformed, "partition %d answered a filtered peek with message %d (state %q, group %q): "+
			"its leader does not apply message filters", m.Partition, m.Seq, m.State, m.Group)
	}
	return nil
}

// request fills a peek request's filter fields.
func (f MessageFilter) request(r *wire.PeekRequest) {
	r.States, r.Group, r.HeaderKey, r.HeaderValue, r.OlderThan = f.States, f.Group, f.HeaderKey, f.HeaderValue, f.OlderThan
}

// PeekOptions tune Peek.
type PeekOptions struct {
	// Max is the most messages to return, 1..MaxPeek; 0 means 1.
	Max int
	// MessageFilter selects the messages shown (ready ones by default).
	MessageFilter
}

// PeekedMessage is a message seen by Peek: not leased, nothing changed.
// It carries no receipt, since no delivery took place.
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
	// State is StateReady, StateDelayed or StateLeased.
	State string
	// VisibleAt is when a delayed message becomes ready, or when a
	// leased one's lease runs out; zero for a ready one.
	VisibleAt time.Time
	// Consumer is the consumer holding a leased message.
	Consumer string
}

// Peek returns up to opts.Max messages of the queue that opts selects
// (ready ones by default; leased and delayed ones when asked, with their
// holder and lease deadline or the time they become visible) with their
// headers and bodies, without leasing them: a following Receive gets
// them as if Peek had not happened (attempt 1 for a new message). It asks
// the partitions in order, each answering oldest first from its leader
// (which confirms its leadership, so the answer is not stale). Dead
// letters are not shown (see PeekDeadLetters). The answer is bounded to
// about wire.PeekBytesMax bytes of headers and bodies in all.
//
//	ms, err := q.Peek(ctx, client.PeekOptions{Max: 10})
//	held, err := q.Peek(ctx, client.PeekOptions{Max: 100,
//		MessageFilter: client.MessageFilter{States: []string{client.StateLeased}, Group: "acct-42"}})
func (q *Queue) Peek(ctx context.Context, opts PeekOptions) ([]PeekedMessage, error) {
	if opts.Max < 0 || opts.Max > MaxPeek {
		return nil, invalidArg("peek max %d out of 1..%d", opts.Max, MaxPeek)
	}
	if err := opts.check(); err != nil {
		return nil, err
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
			opts.request(&req)
			var resp wire.PeekResponse
			if err := q.c.call(ctx, partRoute{q.c, q.name, p}, wire.OpPeek, req, &resp); err != nil {
				return out, err
			}
			for _, m := range resp.Messages {
				if err := opts.checkAnswer(m); err != nil {
					return out, err
				}
				out = append(out, peekedOf(m))
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

// peekedOf converts a peeked message; a server that names no state shows
// ready messages only.
func peekedOf(m wire.PeekedMessage) PeekedMessage {
	out := PeekedMessage{ID: m.ID, Group: m.Group, Headers: m.Headers, Body: m.Body,
		Partition: m.Partition, Seq: m.Seq, EnqueuedAt: time.Unix(0, m.EnqueuedAt),
		Attempts: m.Attempts, Blocked: m.Blocked, Priority: m.Priority, State: m.State, Consumer: m.Consumer}
	if out.State == "" {
		out.State = StateReady
	}
	if m.VisibleAt != 0 {
		out.VisibleAt = time.Unix(0, m.VisibleAt)
	}
	return out
}

// PeekMessages is Queue(queue).Peek: the admin form, naming the queue.
func (c *Client) PeekMessages(ctx context.Context, queue string, opts PeekOptions) ([]PeekedMessage, error) {
	return c.Queue(queue).Peek(ctx, opts)
}
