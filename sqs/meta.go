package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ferrymq/ferry/client"
)

// MetaQueue is the Ferry queue that holds the SQS attributes of every
// queue created or changed through this API. Its name is not a valid SQS
// queue name, so no SQS queue can collide with it; ListQueues hides it.
//
// Each record is a dead letter of MetaQueue whose group is the SQS queue's
// name and whose body is the JSON of a queueMeta; the newest version wins.
// Dead letters are used because they can be read (PeekDeadLetters by
// group), deleted one by one and never expire or get redelivered.
const MetaQueue = "sqs.meta"

// Bounds of the metadata records.
const (
	metaRecordBytesMax = 64 << 10
	metaVersionsMax    = 64 // versions of one queue read at once
	metaSettleTimeout  = 5 * time.Second
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
	var newest *queueMeta
	var newestRef client.LetterRef
	var old []client.LetterRef
	for _, l := range letters {
		var q queueMeta
		if json.Unmarshal(l.Body, &q) != nil || q.Name != name {
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
	return newest, old, nil
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
		meta.Version = prev.Version + 1
	}
	body, err := json.Marshal(meta)
	if err != nil || len(body) > metaRecordBytesMax {
		return fail(ErrInvalidParameterValue, "queue attributes and tags of %s take more than %d bytes", meta.Name, metaRecordBytesMax)
	}
	id := meta.Name + "@" + strconv.FormatInt(meta.Version, 36)
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
