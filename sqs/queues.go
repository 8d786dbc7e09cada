package sqs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/wire"
)

const (
	queueNameBytesMax = 80
	listQueuesMax     = 1000
	tagsMax           = 50
)

// validQueueName reports whether name is a valid SQS queue name: 1..80
// bytes of alphanumerics, hyphens and underscores, with ".fifo" at the
// end of FIFO queues.
func validQueueName(name string) bool {
	if len(name) == 0 || len(name) > queueNameBytesMax {
		return false
	}
	base := strings.TrimSuffix(name, ".fifo")
	if base == "" {
		return false
	}
	for i := 0; i < len(base); i++ {
		c := base[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// queueURL is the URL of queue name as seen through host.
func (s *Server) queueURL(r *request, name string) string {
	scheme := "http"
	if r.tls {
		scheme = "https"
	}
	return scheme + "://" + r.host + "/" + s.cfg.AccountID + "/" + name
}

func (s *Server) arn(name string) string {
	return "arn:aws:sqs:" + s.cfg.Region + ":" + s.cfg.AccountID + ":" + name
}

// nameOfURL returns the queue name a QueueUrl (or bare name) ends in.
func nameOfURL(u string) (string, error) {
	if u == "" {
		return "", fail(ErrMissingParameter, "the request must contain the parameter QueueUrl")
	}
	name := u[strings.LastIndexByte(u, '/')+1:]
	if auth.Reserved(name) || len(name) == 0 || len(name) > queueNameBytesMax {
		return "", fail(ErrQueueDoesNotExist, "the specified queue does not exist")
	}
	return name, nil
}

func nameOfARN(arn string) string { return arn[strings.LastIndexByte(arn, ':')+1:] }

// catalogWait bounds how long view waits for a queue the cluster knows
// to appear in the listing of the node that answers ListQueues.
const catalogWait = 2 * time.Second

// view loads a queue's config and record. A queue missing from the
// listing is looked up once more the way clients route to it (a node whose
// catalog lags waits for it), so a queue just created through another
// node is found.
func (s *Server) view(ctx context.Context, name string) (queueView, error) {
	if auth.Reserved(name) {
		return queueView{}, fail(ErrQueueDoesNotExist, "the specified queue does not exist")
	}
	v, err := s.quickView(ctx, name)
	if !errors.Is(err, ErrQueueDoesNotExist) {
		return v, err
	}
	if _, err := s.cl.QueueStats(ctx, name); err != nil {
		return queueView{}, clientError(err, name)
	}
	deadline := time.Now().Add(catalogWait)
	for {
		select {
		case <-ctx.Done():
			return queueView{}, clientError(ctx.Err(), name)
		case <-time.After(50 * time.Millisecond):
		}
		v, err = s.quickView(ctx, name)
		if !errors.Is(err, ErrQueueDoesNotExist) || time.Now().After(deadline) {
			return v, err
		}
	}
}

// quickView is view from one listing: a queue the answering node does not
// list yet is QueueDoesNotExist.
func (s *Server) quickView(ctx context.Context, name string) (queueView, error) {
	qs, err := s.cl.ListQueues(ctx, name)
	if err != nil {
		return queueView{}, clientError(err, name)
	}
	i := slices.IndexFunc(qs, func(q client.QueueInfo) bool { return q.Name == name })
	if i < 0 {
		return queueView{}, fail(ErrQueueDoesNotExist, "the specified queue %s does not exist", name)
	}
	meta, err := s.meta.get(ctx, name)
	if err != nil {
		return queueView{}, clientError(err, name)
	}
	if meta == nil {
		meta = &queueMeta{Name: name}
	}
	return queueView{name: name, cfg: qs[i].Config, meta: meta}, nil
}

// viewOfURL is view of the queue a QueueUrl names, which must be one
// the request was authorized on.
func (s *Server) viewOfURL(ctx context.Context, r *request, u string) (queueView, error) {
	name, err := r.queueOfURL(u)
	if err != nil {
		return queueView{}, err
	}
	return s.view(ctx, name)
}

// queueOfURL returns the queue a QueueUrl names, which must be one the
// request was authorized on.
func (r *request) queueOfURL(u string) (string, error) {
	name, err := nameOfURL(u)
	if err != nil {
		return "", err
	}
	return r.queue(name)
}

type queueURLOutput struct {
	QueueUrl string `json:"QueueUrl"`
}

func (s *Server) createQueue(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueName  string            `json:"QueueName"`
		Attributes map[string]string `json:"Attributes"`
		Tags       map[string]string `json:"tags"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if !validQueueName(in.QueueName) {
		return nil, fail(ErrInvalidParameterValue, "queue name %q: 1..80 alphanumerics, hyphens and underscores, plus .fifo for FIFO queues", truncate(in.QueueName, 96))
	}
	if _, err := r.queue(in.QueueName); err != nil {
		return nil, err
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	ch, err := parseAttributes(in.QueueName, in.Attributes, true)
	if err != nil {
		return nil, err
	}
	if err := s.checkRedriveTarget(ctx, r, ch); err != nil {
		return nil, err
	}
	out := queueURLOutput{QueueUrl: s.queueURL(r, in.QueueName)}
	if v, err := s.quickView(ctx, in.QueueName); err == nil {
		return out, s.sameAttributes(v, in.Attributes)
	} else if !errors.Is(err, ErrQueueDoesNotExist) {
		return nil, err
	}
	// A record while this node does not list the queue: the queue may
	// exist already (this node's catalog lags), so do not overwrite the
	// record before making sure. A record without a queue is a leftover of
	// a create that failed half-way, and is replaced.
	if prev, _, err := s.meta.read(ctx, in.QueueName); err != nil {
		return nil, clientError(err, in.QueueName)
	} else if prev != nil {
		if v, err := s.view(ctx, in.QueueName); err == nil {
			return out, s.sameAttributes(v, in.Attributes)
		} else if !errors.Is(err, ErrQueueDoesNotExist) {
			return nil, err
		}
	}
	now := time.Now().Unix()
	meta := &queueMeta{Name: in.QueueName, Created: now, Modified: now, Attrs: map[string]string{}, Tags: in.Tags}
	for k, v := range ch.stored {
		if v != "" {
			meta.Attrs[k] = v
		}
	}
	if err := s.meta.put(ctx, meta); err != nil {
		return nil, clientError(err, in.QueueName)
	}
	err = s.cl.CreateQueue(ctx, in.QueueName, append(createSettings(), ch.settings...)...)
	if errors.Is(err, client.ErrQueueExists) {
		v, verr := s.view(ctx, in.QueueName)
		if verr != nil {
			return nil, verr
		}
		return out, s.sameAttributes(v, in.Attributes)
	}
	if err != nil {
		_ = s.meta.drop(ctx, in.QueueName) // no queue: its record goes too
		return nil, clientError(err, in.QueueName)
	}
	return out, nil
}

// checkRedriveTarget refuses a RedrivePolicy among the changes whose
// deadLetterTargetArn is not the ARN, on this endpoint, of an existing
// queue: InvalidParameterValue, as SQS answers. A queue the caller may not
// see gets the same answer as a missing one. The target is checked when
// the policy is set; a target deleted later leaves the policy as it is.
func (s *Server) checkRedriveTarget(ctx context.Context, r *request, ch attrChange) error {
	policy := ch.stored[attrRedrivePolicy]
	if policy == "" {
		return nil
	}
	var p redrivePolicy
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		return fail(ErrInvalidAttributeValue, "RedrivePolicy is not JSON: %v", err)
	}
	name := nameOfARN(p.DeadLetterTargetArn)
	missing := fail(ErrInvalidParameterValue, "Value %s for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.", truncate(policy, 200))
	if p.DeadLetterTargetArn != s.arn(name) || !validQueueName(name) || !r.may(wire.OpQueueStats, name) {
		return missing
	}
	if _, err := s.view(ctx, name); errors.Is(err, ErrQueueDoesNotExist) {
		return missing
	} else if err != nil {
		return err
	}
	return nil
}

// sameAttributes answers a CreateQueue of an existing queue: success when
// every attribute given has its current value.
func (s *Server) sameAttributes(v queueView, attrs map[string]string) error {
	have := v.attributes(s.arn(v.name))
	for k, val := range attrs {
		if k == attrFifoQueue && val == "false" && !v.fifo() {
			continue
		}
		if have[k] != val {
			return fail(ErrQueueNameExists, "a queue named %s already exists with a different value for %s", v.name, k)
		}
	}
	return nil
}

func (s *Server) getQueueURL(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueName string `json:"QueueName"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if in.QueueName == "" {
		return nil, fail(ErrMissingParameter, "the request must contain the parameter QueueName")
	}
	if _, err := s.viewOfURL(ctx, r, in.QueueName); err != nil { // a bare name is a URL's last segment
		return nil, err
	}
	return queueURLOutput{QueueUrl: s.queueURL(r, in.QueueName)}, nil
}

func (s *Server) listQueues(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueNamePrefix string `json:"QueueNamePrefix"`
		MaxResults      *int   `json:"MaxResults"`
		NextToken       string `json:"NextToken"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	limit := listQueuesMax
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > listQueuesMax {
			return nil, fail(ErrInvalidParameterValue, "MaxResults %d (want 1..%d)", *in.MaxResults, listQueuesMax)
		}
		limit = *in.MaxResults
	}
	after := ""
	if in.NextToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		if err != nil {
			return nil, fail(ErrInvalidParameterValue, "NextToken is not one this server issued")
		}
		after = string(b)
	}
	qs, err := s.cl.ListQueues(ctx, in.QueueNamePrefix)
	if err != nil {
		return nil, clientError(err, "")
	}
	var out struct {
		QueueUrls []string `json:"QueueUrls,omitempty"`
		NextToken string   `json:"NextToken,omitempty"`
	}
	for _, q := range qs {
		if auth.Reserved(q.Name) || q.Name <= after || (r.tok != nil && !r.tok.Sees(q.Name)) {
			continue
		}
		if len(out.QueueUrls) == limit {
			if in.MaxResults != nil {
				out.NextToken = base64.RawURLEncoding.EncodeToString([]byte(lastSegment(out.QueueUrls[limit-1])))
			}
			break
		}
		out.QueueUrls = append(out.QueueUrls, s.queueURL(r, q.Name))
	}
	return out, nil
}

func lastSegment(u string) string { return u[strings.LastIndexByte(u, '/')+1:] }

func (s *Server) getQueueAttributes(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueUrl       string   `json:"QueueUrl"`
		AttributeNames []string `json:"AttributeNames"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	v, err := s.viewOfURL(ctx, r, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	all := v.attributes(s.arn(v.name))
	st, err := s.cl.QueueStats(ctx, v.name)
	if err != nil {
		return nil, clientError(err, v.name)
	}
	t := st.Total()
	all["ApproximateNumberOfMessages"] = itoa64(t.Ready)
	all["ApproximateNumberOfMessagesNotVisible"] = itoa64(t.InFlight)
	all["ApproximateNumberOfMessagesDelayed"] = itoa64(t.Delayed)
	var out struct {
		Attributes map[string]string `json:"Attributes,omitempty"`
	}
	out.Attributes = map[string]string{}
	for _, n := range in.AttributeNames {
		if n == "All" {
			out.Attributes = all
			break
		}
		val, ok := all[n]
		if !ok && !knownAttribute(n) {
			return nil, fail(ErrInvalidAttributeName, "unknown attribute %s", truncate(n, 64))
		}
		if ok {
			out.Attributes[n] = val
		}
	}
	return out, nil
}

func knownAttribute(n string) bool {
	return storedAttrs[n] || n == attrFifoQueue || n == "Policy" || strings.HasPrefix(n, "Approximate")
}

func (s *Server) setQueueAttributes(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueUrl   string            `json:"QueueUrl"`
		Attributes map[string]string `json:"Attributes"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	v, err := s.viewOfURL(ctx, r, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	ch, err := parseAttributes(v.name, in.Attributes, false)
	if err != nil {
		return nil, err
	}
	if err := s.checkRedriveTarget(ctx, r, ch); err != nil {
		return nil, err
	}
	if len(ch.settings) > 0 {
		if err := s.cl.UpdateQueue(ctx, v.name, ch.settings...); err != nil {
			return nil, clientError(err, v.name)
		}
	}
	if len(ch.stored) > 0 {
		return nil, s.updateMeta(ctx, v, func(m *queueMeta) {
			for k, val := range ch.stored {
				if val == "" {
					delete(m.Attrs, k)
				} else {
					m.Attrs[k] = val
				}
			}
		})
	}
	return nil, nil
}

// updateMeta writes a changed copy of the queue's record.
func (s *Server) updateMeta(ctx context.Context, v queueView, change func(*queueMeta)) error {
	m := *v.meta
	m.Attrs, m.Tags = map[string]string{}, map[string]string{}
	for k, val := range v.meta.Attrs {
		m.Attrs[k] = val
	}
	for k, val := range v.meta.Tags {
		m.Tags[k] = val
	}
	change(&m)
	m.Modified = time.Now().Unix()
	if err := checkTags(m.Tags); err != nil {
		return err
	}
	if err := s.meta.put(ctx, &m); err != nil {
		return clientError(err, v.name)
	}
	return nil
}

type queueURLInput struct {
	QueueUrl string `json:"QueueUrl"`
}

func (s *Server) deleteQueue(ctx context.Context, r *request) (any, error) {
	var in queueURLInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	name, err := r.queueOfURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := s.cl.DeleteQueue(ctx, name); err != nil {
		return nil, clientError(err, name)
	}
	return nil, clientError0(s.meta.drop(ctx, name), name)
}

func clientError0(err error, name string) error {
	if err == nil {
		return nil
	}
	return clientError(err, name)
}

func (s *Server) purgeQueue(ctx context.Context, r *request) (any, error) {
	var in queueURLInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	name, err := r.queueOfURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	// SQS deletes the messages in flight too: their later DeleteMessage
	// is a no-op, ChangeMessageVisibility answers MessageNotInflight.
	_, err = s.cl.Purge(ctx, name, client.IncludeLeased())
	return nil, clientError0(err, name)
}

func (s *Server) tagQueue(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueUrl string            `json:"QueueUrl"`
		Tags     map[string]string `json:"Tags"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	v, err := s.viewOfURL(ctx, r, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return nil, s.updateMeta(ctx, v, func(m *queueMeta) {
		for k, val := range in.Tags {
			m.Tags[k] = val
		}
	})
}

func (s *Server) untagQueue(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueUrl string   `json:"QueueUrl"`
		TagKeys  []string `json:"TagKeys"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	v, err := s.viewOfURL(ctx, r, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return nil, s.updateMeta(ctx, v, func(m *queueMeta) {
		for _, k := range in.TagKeys {
			delete(m.Tags, k)
		}
	})
}

func (s *Server) listQueueTags(ctx context.Context, r *request) (any, error) {
	var in queueURLInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	v, err := s.viewOfURL(ctx, r, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	var out struct {
		Tags map[string]string `json:"Tags,omitempty"`
	}
	out.Tags = v.meta.Tags
	return out, nil
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
