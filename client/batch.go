package client

import (
	"context"
	"errors"

	"github.com/ferrymq/ferry/wire"
)

// Batch limits of the protocol's server side.
const (
	// maxBatch is the most items one send, ack, extend, nack or reject
	// request carries.
	maxBatch = 1000
	// maxBatchBytes bounds the payload of one send request; bigger batches
	// are split. Far below the frame limit.
	maxBatchBytes = 4 << 20
)

// batchSpec describes a request over several items of one partition whose
// answer holds one result per item, in order.
type batchSpec[R any] struct {
	rt route
	op wire.Op
	// build returns the request body for the items at idx.
	build func(idx []int) any
	// decode returns the per-item results of an answer (or its refusal).
	decode func(resp wire.Response) ([]R, error)
	// code returns the result code of one item.
	code func(R) wire.Code
	// done records the final outcome of item i: its result r when err is
	// nil. amb tells whether an earlier attempt carrying the item may have
	// taken effect.
	done func(i int, r R, err error, amb bool)
	// stopped, when set, says why item i must not be sent again (its
	// caller gave up), or nil.
	stopped func(i int) error
}

// runBatch sends the items at idx until each has a final outcome: items
// whose result is not-leader, unavailable or timeout are sent again after
// a backoff (a timeout marks them ambiguous); an internal error is final
// and ambiguous; every other result is final.
// When ctx ends first, the remaining items get an error wrapping the stop
// reason. done is called exactly once per item.
func runBatch[R any](ctx context.Context, c *Client, s batchSpec[R], idx []int) {
	var amb map[int]bool // items an earlier attempt may have applied; made on first need
	markAmbiguous := func(i int) {
		if amb == nil {
			amb = make(map[int]bool, len(idx))
		}
		amb[i] = true
	}
	var zero R
	var last error // the last item failure that made us send again
	for attempt := 0; len(idx) > 0; attempt++ {
		resp, a, err := c.callRetry(ctx, s.rt, s.op, s.build(idx))
		if err != nil && last != nil && isContextErr(err) && !errors.As(err, new(*wire.Error)) {
			err = gaveUp(err, last) // say why the items were still pending
		}
		if a {
			for _, i := range idx {
				markAmbiguous(i)
			}
		}
		var rs []R
		if err == nil {
			rs, err = s.decode(resp)
			if errors.Is(err, wire.ErrInternal) {
				// The server failed unexpectedly: what it did is unknown.
				for _, i := range idx {
					markAmbiguous(i)
				}
			}
		}
		if err == nil && len(rs) != len(idx) {
			err = wire.Errorf(wire.CodeMalformed, "%d results for %d items", len(rs), len(idx))
		}
		if err != nil {
			for _, i := range idx {
				s.done(i, zero, err, amb[i])
			}
			return
		}
		var again []int
		for k, i := range idx {
			switch code := s.code(rs[k]); code {
			case wire.CodeInternal:
				s.done(i, zero, unconfirmed(&wire.Error{Code: code, Message: "item failed"}), true)
			case wire.CodeTimeout:
				markAmbiguous(i)
				fallthrough
			case wire.CodeNotLeader, wire.CodeUnavailable:
				last = &wire.Error{Code: code}
				if s.stopped != nil {
					if err := s.stopped(i); err != nil {
						s.done(i, zero, gaveUp(err, last), amb[i])
						continue
					}
				}
				again = append(again, i)
			default:
				s.done(i, rs[k], nil, amb[i])
			}
		}
		idx = again
		if len(idx) == 0 {
			return
		}
		if serr := c.sleep(ctx, attempt); serr != nil {
			for _, i := range idx {
				s.done(i, zero, gaveUp(serr, last), amb[i])
			}
			return
		}
	}
}

// chunk splits idx into runs of at most maxBatch items whose weights (as
// given by weight, nil for none) add up to at most maxBatchBytes; an item
// heavier than that goes alone.
func chunk(idx []int, weight func(i int) int) [][]int {
	var out [][]int
	start, sum := 0, 0
	for k, i := range idx {
		w := 0
		if weight != nil {
			w = weight(i)
		}
		if k > start && (k-start == maxBatch || sum+w > maxBatchBytes) {
			out = append(out, idx[start:k])
			start, sum = k, 0
		}
		sum += w
	}
	if start < len(idx) {
		out = append(out, idx[start:])
	}
	return out
}
