package client

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Receipt names one delivery attempt of one message: the handle that
// settles it. It lets a program settle a message it received earlier
// without keeping the Delivery: store Receipt().String(), and later
// ParseReceipt it and pass it to Client.AckReceipts (or NackReceipts,
// ExtendReceipts, RejectReceipts). A receipt whose attempt is no longer
// the message's current one fails with ErrLeaseLost.
type Receipt struct {
	// Queue is the name of the message's queue.
	Queue string
	// Partition and Seq identify the message in its queue.
	Partition int
	Seq       uint64
	// Attempt is the delivery attempt, 1 for the first.
	Attempt uint32
}

// receiptSep separates the fields of a receipt's text form. Queue names
// cannot contain it.
const receiptSep = ":"

// String returns the receipt's text form, QUEUE:PARTITION:SEQ:ATTEMPT, for
// example "orders:0:17:1". ParseReceipt reads it back.
func (r Receipt) String() string {
	return r.Queue + receiptSep + strconv.Itoa(r.Partition) + receiptSep +
		strconv.FormatUint(r.Seq, 10) + receiptSep + strconv.FormatUint(uint64(r.Attempt), 10)
}

// ParseReceipt reads the text form that Receipt.String writes. A malformed
// receipt fails with ErrInvalidArgument.
//
//	r, err := client.ParseReceipt("orders:0:17:1")
func ParseReceipt(s string) (Receipt, error) {
	parts := strings.Split(s, receiptSep)
	if len(parts) != 4 || parts[0] == "" {
		return Receipt{}, invalidArg("receipt %q: want QUEUE:PARTITION:SEQ:ATTEMPT", s)
	}
	part, err1 := strconv.ParseUint(parts[1], 10, 16)
	seq, err2 := strconv.ParseUint(parts[2], 10, 64)
	attempt, err3 := strconv.ParseUint(parts[3], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil || seq == 0 || attempt == 0 {
		return Receipt{}, invalidArg("receipt %q: partition, seq and attempt must be numbers (seq and attempt from 1)", s)
	}
	return Receipt{Queue: parts[0], Partition: int(part), Seq: seq, Attempt: uint32(attempt)}, nil
}

// Receipt returns the delivery's receipt.
func (d *Delivery) Receipt() Receipt {
	r := Receipt{Partition: d.Partition, Seq: d.Seq, Attempt: d.Attempt}
	if d.q != nil {
		r.Queue = d.q.name
	}
	return r
}

// AckReceipts acks the deliveries the receipts name (see Delivery.Ack),
// which may belong to several queues; one error per receipt, nil for
// success.
//
//	errs := c.AckReceipts(ctx, []client.Receipt{r})
func (c *Client) AckReceipts(ctx context.Context, rs []Receipt) []error {
	return c.settleReceipts(rs, func(q *Queue, ds []*Delivery) []error { return q.AckBatch(ctx, ds) })
}

// NackReceipts nacks the deliveries the receipts name, with the same
// options (see Delivery.Nack); one error per receipt.
func (c *Client) NackReceipts(ctx context.Context, rs []Receipt, opts NackOptions) []error {
	return c.settleReceipts(rs, func(q *Queue, ds []*Delivery) []error { return q.NackBatch(ctx, ds, opts) })
}

// ExtendReceipts moves the deadlines of the leases the receipts name to now
// plus visibility (see Delivery.Extend); one error per receipt.
func (c *Client) ExtendReceipts(ctx context.Context, rs []Receipt, visibility time.Duration) []error {
	return c.settleReceipts(rs, func(q *Queue, ds []*Delivery) []error { return q.ExtendBatch(ctx, ds, visibility) })
}

// RejectReceipts dead-letters the deliveries the receipts name, with the
// same reason (see Delivery.Reject); one error per receipt.
func (c *Client) RejectReceipts(ctx context.Context, rs []Receipt, reason string) []error {
	return c.settleReceipts(rs, func(q *Queue, ds []*Delivery) []error { return q.RejectBatch(ctx, ds, reason) })
}

// settleReceipts runs a batch operation per queue over the deliveries the
// receipts stand for, and puts the errors back in receipt order.
func (c *Client) settleReceipts(rs []Receipt, run func(q *Queue, ds []*Delivery) []error) []error {
	errs := make([]error, len(rs))
	byQueue := make(map[string][]int)
	var order []string
	for i, r := range rs {
		if r.Queue == "" || r.Partition < 0 || r.Seq == 0 || r.Attempt == 0 {
			errs[i] = invalidArg("receipt %q is incomplete", r.String())
			continue
		}
		if _, ok := byQueue[r.Queue]; !ok {
			order = append(order, r.Queue)
		}
		byQueue[r.Queue] = append(byQueue[r.Queue], i)
	}
	for _, name := range order {
		q := c.Queue(name)
		idx := byQueue[name]
		ds := make([]*Delivery, len(idx))
		for k, i := range idx {
			ds[k] = &Delivery{Partition: rs[i].Partition, Seq: rs[i].Seq, Attempt: rs[i].Attempt, q: q}
		}
		for k, err := range run(q, ds) {
			errs[idx[k]] = err
		}
	}
	return errs
}
