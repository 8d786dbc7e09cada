package sqs

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/wire"
)

const (
	receiveMax = 10
	// minVisibility stands for a VisibilityTimeout of 0 in a receive: the
	// shortest lease, so the message is visible again at once.
	minVisibility = time.Millisecond
)

type message struct {
	MessageID              string                    `json:"MessageId"`
	ReceiptHandle          string                    `json:"ReceiptHandle"`
	MD5OfBody              string                    `json:"MD5OfBody"`
	Body                   string                    `json:"Body"`
	Attributes             map[string]string         `json:"Attributes,omitempty"`
	MD5OfMessageAttributes string                    `json:"MD5OfMessageAttributes,omitempty"`
	MessageAttributes      map[string]attributeValue `json:"MessageAttributes,omitempty"`
}

type receiveInput struct {
	QueueUrl                    string   `json:"QueueUrl"`
	AttributeNames              []string `json:"AttributeNames"`
	MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
	MessageAttributeNames       []string `json:"MessageAttributeNames"`
	MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
	VisibilityTimeout           *int     `json:"VisibilityTimeout"`
	WaitTimeSeconds             *int     `json:"WaitTimeSeconds"`
	ReceiveRequestAttemptID     string   `json:"ReceiveRequestAttemptId"`
}

// options turns the input into Ferry receive options, with SQS's defaults.
func (in *receiveInput) options(v queueView) (client.ReceiveOptions, error) {
	opts := client.ReceiveOptions{Max: 1, Wait: time.Duration(v.waitTime()) * time.Second}
	if n := in.MaxNumberOfMessages; n != nil {
		if *n < 1 || *n > receiveMax {
			return opts, fail(ErrInvalidParameterValue, "Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and %d, if provided.", *n, receiveMax)
		}
		opts.Max = *n
	}
	if w := in.WaitTimeSeconds; w != nil {
		if *w < 0 || *w > maxWaitSeconds {
			return opts, fail(ErrInvalidParameterValue, "Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= %d, if provided.", *w, maxWaitSeconds)
		}
		opts.Wait = time.Duration(*w) * time.Second
	}
	if vt := in.VisibilityTimeout; vt != nil {
		if *vt < 0 || *vt > maxVisibilitySeconds {
			return opts, fail(ErrInvalidParameterValue, "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= %d, if provided.", *vt, maxVisibilitySeconds)
		}
		opts.Visibility = max(time.Duration(*vt)*time.Second, minVisibility)
	}
	return opts, nil
}

func (s *Server) receiveMessage(ctx context.Context, r *request) (any, error) {
	var in receiveInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	v, err := s.viewOfURL(ctx, r, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	opts, err := in.options(v)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, opts.Wait+10*time.Second)
	defer cancel()
	revoked := s.watchRevocation(rctx, cancel, r, wire.OpReceive, v.name)
	ds, err := s.cl.Queue(v.name).Receive(rctx, opts)
	if rerr := revoked(); rerr != nil {
		// The caller's key was revoked (or lost receive) while it waited:
		// it gets nothing, and what was leased for it is given back.
		s.release(ctx, ds)
		return nil, rerr
	}
	if err != nil {
		return nil, clientError(err, v.name)
	}
	var out struct {
		Messages []message `json:"Messages,omitempty"`
	}
	sysNames := append(append([]string(nil), in.AttributeNames...), in.MessageSystemAttributeNames...)
	now := time.Now()
	for _, d := range ds {
		m := message{
			MessageID:     d.ID,
			ReceiptHandle: encodeHandle(d.Receipt()),
			MD5OfBody:     md5Hex(string(d.Body)),
			Body:          string(d.Body),
			Attributes:    systemAttributes(v, d, sysNames, now),
		}
		m.MessageAttributes = selectAttributes(headersToAttributes(d.Headers), in.MessageAttributeNames)
		m.MD5OfMessageAttributes = md5OfAttributes(m.MessageAttributes)
		out.Messages = append(out.Messages, m)
	}
	return out, nil
}

// systemAttributes returns the message system attributes asked for.
// ApproximateFirstReceiveTimestamp is exact for a first delivery; for later
// ones Ferry does not keep it and reports the send time.
func systemAttributes(v queueView, d *client.Delivery, names []string, now time.Time) map[string]string {
	if len(names) == 0 {
		return nil
	}
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	first := d.EnqueuedAt
	if d.Attempt == 1 {
		first = now
	}
	all := map[string]string{
		"ApproximateReceiveCount":          strconv.FormatUint(uint64(d.Attempt), 10),
		"SentTimestamp":                    ms(d.EnqueuedAt),
		"ApproximateFirstReceiveTimestamp": ms(first),
		"SenderId":                         DefaultAccountID,
	}
	if d.Group != "" {
		all["MessageGroupId"] = d.Group // also for groups of Ferry producers
	}
	if v.fifo() {
		all["MessageDeduplicationId"] = d.ID
		all["SequenceNumber"] = sequenceNumber(d.Partition, d.Seq)
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			return all
		}
		if val, ok := all[n]; ok {
			out[n] = val
		}
	}
	return out
}

// selectAttributes keeps the attributes named: "All" or ".*" for every
// one, "prefix.*" for those starting with prefix.
func selectAttributes(attrs map[string]attributeValue, names []string) map[string]attributeValue {
	out := map[string]attributeValue{}
	for _, n := range names {
		for k, a := range attrs {
			p, wild := strings.CutSuffix(n, ".*")
			if n == "All" || n == ".*" || k == n || wild && strings.HasPrefix(k, p+".") {
				out[k] = a
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

type handleInput struct {
	QueueUrl          string `json:"QueueUrl"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

type handleEntry struct {
	ID                string `json:"Id"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

// deleteError maps an ack failure: a message already gone is deleted; a
// newer delivery makes the handle stale.
func deleteError(err error, queue string) error {
	switch {
	case err == nil, errors.Is(err, client.ErrMessageNotFound):
		return nil
	case errors.Is(err, client.ErrLeaseLost), errors.Is(err, client.ErrInvalidArgument):
		return fail(ErrReceiptHandleIsInvalid, "the receipt handle has expired: the message was received again since")
	}
	return clientError(err, queue)
}

// visibilityError maps an extend or release failure.
func visibilityError(err error, queue string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, client.ErrMessageNotFound), errors.Is(err, client.ErrLeaseLost):
		return fail(ErrMessageNotInflight, "the message is not in flight under this receipt handle")
	case errors.Is(err, client.ErrInvalidArgument):
		return fail(ErrReceiptHandleIsInvalid, "%v", err)
	}
	return clientError(err, queue)
}

func (s *Server) deleteMessage(ctx context.Context, r *request) (any, error) {
	var in handleInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	errs, err := s.settle(ctx, r, in.QueueUrl, []handleEntry{{ReceiptHandle: in.ReceiptHandle}}, false)
	if err != nil {
		return nil, err
	}
	return nil, errs[0]
}

func (s *Server) changeMessageVisibility(ctx context.Context, r *request) (any, error) {
	var in handleInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if in.VisibilityTimeout == nil {
		return nil, fail(ErrMissingParameter, "the request must contain the parameter VisibilityTimeout")
	}
	errs, err := s.settle(ctx, r, in.QueueUrl, []handleEntry{{ReceiptHandle: in.ReceiptHandle, VisibilityTimeout: in.VisibilityTimeout}}, true)
	if err != nil {
		return nil, err
	}
	return nil, errs[0]
}

func (s *Server) deleteMessageBatch(ctx context.Context, r *request) (any, error) {
	return s.settleBatch(ctx, r, false)
}

func (s *Server) changeMessageVisibilityBatch(ctx context.Context, r *request) (any, error) {
	return s.settleBatch(ctx, r, true)
}

func (s *Server) settleBatch(ctx context.Context, r *request, visibility bool) (any, error) {
	var in struct {
		QueueUrl string        `json:"QueueUrl"`
		Entries  []handleEntry `json:"Entries"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.ID
	}
	if err := checkBatch(ids); err != nil {
		return nil, err
	}
	errs, err := s.settle(ctx, r, in.QueueUrl, in.Entries, visibility)
	if err != nil {
		return nil, err
	}
	type ok struct {
		ID string `json:"Id"`
	}
	var out struct {
		Successful []ok         `json:"Successful"`
		Failed     []batchError `json:"Failed"`
	}
	out.Successful, out.Failed = []ok{}, []batchError{}
	for i, e := range in.Entries {
		if errs[i] != nil {
			out.Failed = append(out.Failed, entryError(e.ID, errs[i]))
		} else {
			out.Successful = append(out.Successful, ok{e.ID})
		}
	}
	return out, nil
}

// settle deletes (visibility false) or changes the visibility of the
// deliveries the entries name; one error per entry. The error returned
// alone concerns the whole request.
func (s *Server) settle(ctx context.Context, r *request, queueURL string, entries []handleEntry, visibility bool) ([]error, error) {
	name, err := r.queueOfURL(queueURL)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(entries))
	byTimeout := map[int][]int{} // visibility seconds (-1: delete) -> entries
	for i, e := range entries {
		if _, err := decodeHandle(name, e.ReceiptHandle); err != nil {
			errs[i] = err
			continue
		}
		t := -1
		if visibility {
			if e.VisibilityTimeout == nil || *e.VisibilityTimeout < 0 || *e.VisibilityTimeout > maxVisibilitySeconds {
				errs[i] = fail(ErrInvalidParameterValue, "VisibilityTimeout must be 0..%d", maxVisibilitySeconds)
				continue
			}
			t = *e.VisibilityTimeout
		}
		byTimeout[t] = append(byTimeout[t], i)
	}
	for t, idx := range byTimeout {
		rs := make([]client.Receipt, len(idx))
		for j, i := range idx {
			rs[j], _ = decodeHandle(name, entries[i].ReceiptHandle)
		}
		var res []error
		switch {
		case t < 0:
			res = s.cl.AckReceipts(ctx, rs)
		case t == 0:
			res = s.cl.NackReceipts(ctx, rs, client.NackOptions{Immediate: true, Reason: "visibility timeout set to 0"})
		default:
			res = s.cl.ExtendReceipts(ctx, rs, time.Duration(t)*time.Second)
		}
		for j, i := range idx {
			if t < 0 {
				errs[i] = deleteError(res[j], name)
			} else {
				errs[i] = visibilityError(res[j], name)
			}
		}
	}
	for _, e := range errs {
		if errors.Is(e, ErrQueueDoesNotExist) {
			return nil, e
		}
	}
	return errs, nil
}
