package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
)

// MetaQueue is the Ferry queue that holds the SQS attributes of every
// queue created or changed through this API. Its name is not a valid SQS
// queue name, so no SQS queue can collide with it; ListQueues hides it.
// It is reserved (auth.Reserved): no token reaches it, on this API or the
// client port, and only the endpoint's own connection (a node
// certificate, the cluster's internal identity) reads and writes it.
//
// Each record is a dead letter of MetaQueue whose group is the SQS queue's
// name and whose body is the JSON of a queueMeta; the newest version wins.
// Dead letters are used because they can be read (PeekDeadLetters by
// group), deleted one by one and never expire or get redelivered.
const MetaQueue = auth.SQSMetaQueue

// Bounds of the metadata records.
const (
	metaRecordBytesMax = 64 << 10
	metaVersionsMax    = 64 // versions of one queue read at once
	metaSettleTimeout  = 5 * time.Second
	// metaAheadMax is how far past this node's clock a record's version
	// (the unix nanoseconds of its write) or times may lie: the nodes'
	// clocks differ by far less; a record beyond it is forged and ignored,
	// so a version can never be pushed to where the next one overflows.
	metaAheadMax = 24 * time.Hour
)

// queueMeta is what SQS knows of a queue that Ferry's configuration does
// not hold.
type queueMeta struct {
	Name     string            `json:"name"`
	Version  int64             `json:"version"`
	Created  int64             `json:"created"`  // unix seconds
	Modified int64             `json:"modified"` // unix seconds
	Attrs    map[string]string `json:"attrs,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`
}

type metaEntry struct {
	meta    *queueMeta // nil: no record
	fetched time.Time
}

// metaStore reads and writes queue records, with a short per-node cache.
type metaStore struct {
	cl  *client.Client
	ttl time.Duration

	mu      sync.Mutex
	cache   map[string]metaEntry
	created bool // MetaQueue is known to exist
}

func newMetaStore(cl *client.Client, ttl time.Duration) *metaStore {
	return &metaStore{cl: cl, ttl: ttl, cache: map[string]metaEntry{}}
}

// get returns the record of queue name, or nil when it has none.
func (m *metaStore) get(ctx context.Context, name string) (*queueMeta, error) {
	m.mu.Lock()
	e, ok := m.cache[name]
	m.mu.Unlock()
	if ok && time.Since(e.fetched) < m.ttl {
		return e.meta, nil
	}
	newest, _, err := m.read(ctx, name)
	if err != nil {
		return nil, err
	}
	m.remember(name, newest)
	return newest, nil
}

func (m *metaStore) remember(name string, meta *queueMeta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.cache) > 4096 {
		clear(m.cache)
	}
	m.cache[name] = metaEntry{meta: meta, fetched: time.Now()}
}

// read returns the newest record of name and the references of the older
// ones.
func (m *metaStore) read(ctx context.Context, name string) (*queueMeta, []client.LetterRef, error) {
	letters, err := m.cl.PeekDeadLetters(ctx, MetaQueue, client.DeadFilter{Group: name, Limit: metaVersionsMax})
	if errors.Is(err, client.ErrQueueNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	newest, old := newestRecord(name, letters, time.Now())
	return newest, old, nil
}

// newestRecord picks among the dead letters of MetaQueue read for queue
// name its newest valid record (nil when none), and returns the
// references of the others: older versions, and letters that are not
// records this API wrote (check), which are ignored.
func newestRecord(name string, letters []client.DeadLetter, now time.Time) (*queueMeta, []client.LetterRef) {
	var newest *queueMeta
	var newestRef client.LetterRef
	var old []client.LetterRef
	for _, l := range letters {
		var q queueMeta
		if json.Unmarshal(l.Body, &q) != nil || q.check(name, l.ID, now) != nil {
			old = append(old, l.Ref())
			continue
		}
		switch {
		case newest == nil:
			newest, newestRef = &q, l.Ref()
		case q.Version > newest.Version:
			old = append(old, newestRef)
			newest, newestRef = &q, l.Ref()
		default:
			old = append(old, l.Ref())
		}
	}
	return newest, old
}

// put stores meta as the newest record of its queue and deletes the older
// ones. A nil Attrs and Tags are stored as they are.
func (m *metaStore) put(ctx context.Context, meta *queueMeta) error {
	if err := m.ensureQueue(ctx); err != nil {
		return err
	}
	prev, _, err := m.read(ctx, meta.Name)
	if err != nil {
		return err
	}
	meta.Version = time.Now().UnixNano()
	if prev != nil && meta.Version <= prev.Version {
		if prev.Version == math.MaxInt64 { // read never returns such a record; refuse rather than wrap
			return fail(ErrInternalFailure, "queue record of %s: version at its limit", meta.Name)
		}
		meta.Version = prev.Version + 1
	}
	id := recordID(meta.Name, meta.Version)
	if err := meta.check(meta.Name, id, time.Now()); err != nil {
		return fail(ErrInvalidParameterValue, "queue attributes and tags of %s: %v", meta.Name, err)
	}
	body, err := json.Marshal(meta)
	if err != nil || len(body) > metaRecordBytesMax {
		return fail(ErrInvalidParameterValue, "queue attributes and tags of %s take more than %d bytes", meta.Name, metaRecordBytesMax)
	}
	q := m.cl.Queue(MetaQueue)
	if _, err := q.Send(ctx, client.Message{ID: id, Group: meta.Name, Body: body}); err != nil {
		return err
	}
	if err := m.settle(ctx, id); err != nil {
		return err
	}
	m.remember(meta.Name, meta)
	m.prune(ctx, meta.Name)
	return nil
}

// settle turns sent records into dead letters until the one with id is
// one (this node's or another's reject).
func (m *metaStore) settle(ctx context.Context, id string) error {
	q := m.cl.Queue(MetaQueue)
	ctx, cancel := context.WithTimeout(ctx, metaSettleTimeout)
	defer cancel()
	for {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 100, Visibility: 10 * time.Second, Wait: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		found := false
		for i, err := range q.RejectBatch(ctx, ds, "sqs queue record") {
			if err != nil {
				return err
			}
			found = found || ds[i].ID == id
		}
		if found {
			return nil
		}
		letters, err := m.cl.DeadLetters(ctx, MetaQueue, client.DeadFilter{Group: groupOf(id), Limit: metaVersionsMax})
		if err != nil {
			return err
		}
		for _, l := range letters {
			if l.ID == id {
				return nil
			}
		}
	}
}

// recordID is the message id of a queue's record of a version.
func recordID(name string, version int64) string {
	return name + "@" + strconv.FormatInt(version, 36)
}

// check validates every field of a record read back for queue name from
// a dead letter of id: the record of that queue under the id of its
// version, a version and times not in the future (beyond metaAheadMax),
// attributes this API stores with values SetQueueAttributes accepts, and
// tags within SQS's bounds.
func (q *queueMeta) check(name, id string, now time.Time) error {
	ahead := now.Add(metaAheadMax)
	switch {
	case q.Name != name || !validQueueName(name):
		return fmt.Errorf("record of %q read for %q", truncate(q.Name, 96), name)
	case q.Version <= 0 || q.Version > ahead.UnixNano():
		return fmt.Errorf("version %d out of range", q.Version)
	case id != recordID(name, q.Version):
		return fmt.Errorf("record id %q does not match its version", truncate(id, 128))
	case q.Created < 0 || q.Created > ahead.Unix() || q.Modified < 0 || q.Modified > ahead.Unix():
		return fmt.Errorf("times %d, %d out of range", q.Created, q.Modified)
	}
	for k := range q.Attrs {
		if !storedAttrs[k] {
			return fmt.Errorf("attribute %q is not one the record holds", truncate(k, 64))
		}
	}
	if _, err := parseAttributes(name, q.Attrs, false); err != nil {
		return err
	}
	return checkTags(q.Tags)
}

// Bounds of queue tags, as SQS's.
const (
	tagKeyBytesMax   = 128
	tagValueBytesMax = 256
)

// checkTags checks a queue's tags: at most tagsMax, keys of 1..128 bytes,
// values of at most 256, valid UTF-8 text.
func checkTags(tags map[string]string) error {
	if len(tags) > tagsMax {
		return fail(ErrInvalidParameterValue, "more than %d tags", tagsMax)
	}
	for k, v := range tags {
		if k == "" || len(k) > tagKeyBytesMax || len(v) > tagValueBytesMax || !validText(k) || !validText(v) {
			return fail(ErrInvalidParameterValue, "tag %q: keys of 1..%d and values of at most %d valid characters", truncate(k, 64), tagKeyBytesMax, tagValueBytesMax)
		}
	}
	return nil
}

func groupOf(id string) string {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '@' {
			return id[:i]
		}
	}
	return id
}

// prune deletes records older than the newest; failures are left for the
// next write.
func (m *metaStore) prune(ctx context.Context, name string) {
	_, old, err := m.read(ctx, name)
	if err != nil || len(old) == 0 {
		return
	}
	_, _ = m.cl.DeleteDeadLetters(ctx, MetaQueue, client.DeadFilter{Group: name, Letters: old})
}

// drop deletes every record of name.
func (m *metaStore) drop(ctx context.Context, name string) error {
	m.mu.Lock()
	delete(m.cache, name)
	m.mu.Unlock()
	_, err := m.cl.DeleteDeadLetters(ctx, MetaQueue, client.DeadFilter{Group: name})
	if errors.Is(err, client.ErrQueueNotFound) {
		return nil
	}
	return err
}

// ensureQueue creates MetaQueue when it does not exist yet.
func (m *metaStore) ensureQueue(ctx context.Context) error {
	m.mu.Lock()
	done := m.created
	m.mu.Unlock()
	if done {
		return nil
	}
	err := m.cl.CreateQueue(ctx, MetaQueue, client.MaxDead(0), client.MaxDeadBytes(0), client.DeadRetention(0),
		client.MaxReceives(1), client.VisibilityTimeout(10*time.Second), client.Retention(0))
	if err != nil && !errors.Is(err, client.ErrQueueExists) {
		return fmt.Errorf("creating %s: %w", MetaQueue, err)
	}
	m.mu.Lock()
	m.created = true
	m.mu.Unlock()
	return nil
}
