package client

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// ReceiveAck acks the deliveries of acks and receives as Receive does, in
// fewer requests: the acks of a partition ride on that partition's
// receive, and the server applies them and leases in one raft entry. It
// returns the deliveries, one error per delivery of acks (nil when acked,
// as AckBatch reports) and Receive's error.
//
// The partitions that hold acks are asked first, without waiting, for
// what is still missing of opts.Max; once opts.Max is reached the
// remaining acks go as AckBatch would send them. When those receives
// leased nothing, it goes on as Receive (with opts.Wait). Acks are retried
// through transient failures until ctx ends, as AckBatch does; a server
// that predates receives carrying acks gets them in an ack request instead.
//
//	var done []*client.Delivery
//	for {
//		ds, ackErrs, err := q.ReceiveAck(ctx, done, client.ReceiveOptions{Max: 100, Wait: time.Second})
//		...
//		done = process(ds)
//	}
func (q *Queue) ReceiveAck(ctx context.Context, acks []*Delivery, opts ReceiveOptions) ([]*Delivery, []error, error) {
	if len(acks) == 0 {
		ds, err := q.Receive(ctx, opts)
		return ds, nil, err
	}
	if err := opts.normalize(q.c); err != nil {
		return nil, fill(len(acks), err), err
	}
	if q.c.isClosed() {
		return nil, fill(len(acks), ErrClosed), ErrClosed
	}
	errs := make([]error, len(acks))
	byPart := make(map[int][]int)
	for i, d := range acks {
		if d == nil || d.q != q {
			errs[i] = invalidArg("delivery %d was not received from queue %q", i, q.name)
			continue
		}
		byPart[d.Partition] = append(byPart[d.Partition], i)
	}
	out := q.takeBuffered(opts.Max)
	var rest []*Delivery
	var restIdx []int
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		for _, idx := range chunk(byPart[p], nil) {
			if len(out) >= opts.Max {
				for _, i := range idx {
					rest, restIdx = append(rest, acks[i]), append(restIdx, i)
				}
				continue
			}
			ds := pickDeliveries(acks, idx)
			req := q.receiveRequest(p, opts.Max-len(out), opts)
			r, ackErrs := q.pollAcks(ctx, req, ds, time.Time{})
			for k, i := range idx {
				errs[i] = ackErrs[k]
			}
			out = append(out, r.ds...)
		}
	}
	if len(rest) > 0 {
		for k, err := range q.AckBatch(ctx, rest) {
			errs[restIdx[k]] = err
		}
	}
	if len(out) > 0 {
		return out, errs, nil
	}
	ds, err := q.Receive(ctx, opts)
	return ds, errs, err
}

// pickDeliveries returns the deliveries of ds at idx.
func pickDeliveries(ds []*Delivery, idx []int) []*Delivery {
	out := make([]*Delivery, len(idx))
	for k, i := range idx {
		out[k] = ds[i]
	}
	return out
}

// pollAcks performs one partition's receive carrying the acks of acks (at
// most maxBatch, all of req's partition) and returns the receive's result
// and one error per ack, as AckBatch reports them. Transient failures are
// retried until ctx ends (each attempt waiting for what is left until
// until, when set); an attempt that may have been applied makes a later
// "message not found" an ack's success.
func (q *Queue) pollAcks(ctx context.Context, req wire.ReceiveRequest, acks []*Delivery, until time.Time) (pollResult, []error) {
	req.Acks = make([]wire.Receipt, len(acks))
	for i, d := range acks {
		req.Acks[i] = d.receipt()
	}
	ack := settleReq{op: wire.OpAck}
	errs := make([]error, len(acks))
	fail := func(err error, amb bool) []error {
		for i := range errs {
			errs[i] = ack.outcome(wire.ItemResult{}, err, amb)
		}
		return errs
	}
	rt := partRoute{q.c, q.name, req.Partition}
	amb := false
	for attempt := 0; ; attempt++ {
		req.Wait = 0
		if !until.IsZero() {
			req.Wait = max(min(time.Until(until), MaxWait), 0)
		}
		resp, cl, err := q.c.callOnce(ctx, rt, wire.OpReceive, req)
		amb = amb || cl == classAmbiguous
		if cl == classDone {
			var rr wire.ReceiveResponse
			if err == nil {
				err = resp.Decode(&rr)
			}
			if errors.Is(err, wire.ErrInternal) {
				amb = true
			}
			if err != nil {
				return pollResult{cl: classDone, err: err}, fail(err, amb)
			}
			ds := q.deliveries(rr.Messages)
			if len(rr.AckResults) != len(req.Acks) {
				// A server that does not know acks on a receive applied
				// none of them.
				return pollResult{ds: ds}, q.AckBatch(ctx, acks)
			}
			for i, r := range rr.AckResults {
				errs[i] = ack.outcome(r, nil, amb)
			}
			return pollResult{ds: ds}, errs
		}
		if serr := q.c.sleep(ctx, attempt); serr != nil {
			err = gaveUp(serr, err)
			return pollResult{cl: classRetry, err: err}, fail(err, amb)
		}
	}
}
