package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Relay defaults.
const (
	// DefaultBatch is how many rows a relay publishes per transaction.
	DefaultBatch = 100
	// MaxBatch bounds Relay.Batch.
	MaxBatch = 1000
	// maxFailedBytes bounds the reason kept in a parked row.
	maxFailedBytes = 1024
	// DefaultIdle is how long Run waits before looking again when the
	// outbox had nothing pending.
	DefaultIdle = 200 * time.Millisecond
)

// Relay publishes pending outbox rows to Ferry and marks them sent.
type Relay struct {
	// DB is the database holding the outbox table.
	DB *sql.DB
	// Dialect is DB's database.
	Dialect Dialect
	// Client publishes the rows.
	Client *client.Client
	// Batch is the most rows published per transaction; 0 means
	// DefaultBatch.
	Batch int
	// Idle is Run's pause when nothing was pending; 0 means DefaultIdle.
	Idle time.Duration
	// Logger receives failures Run retries; nil means slog.Default().
	Logger *slog.Logger

	// afterPublish, when set (by tests), runs after a batch was published
	// and before it is marked sent.
	afterPublish func(published int)
}

// Result counts what one RelayOnce did.
type Result struct {
	// Published counts the rows sent and marked sent.
	Published int
	// Duplicates counts those of them Ferry already had (a relay that
	// died after publishing them and before marking them).
	Duplicates int
	// Failed counts the rows whose send failed; they stay pending.
	Failed int
	// Parked counts the rows Ferry can never accept, now marked failed.
	Parked int
}

// row is one pending outbox row.
type row struct {
	id    int64
	queue string
	msg   client.Message
}

// Run relays until ctx is done, pausing Idle when the outbox is empty and
// retrying failures (logged) after Idle. It returns nil when ctx is done,
// or ErrUnknownDialect.
func (r *Relay) Run(ctx context.Context) error {
	if r.Dialect != Postgres && r.Dialect != SQLite {
		return fmt.Errorf("%w: %v", ErrUnknownDialect, r.Dialect)
	}
	idle := r.Idle
	if idle <= 0 {
		idle = DefaultIdle
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	for ctx.Err() == nil {
		res, err := r.RelayOnce(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("outbox: relay failed", "err", err, "published", res.Published, "failed", res.Failed)
		}
		if err == nil && res.Published > 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(idle):
		}
	}
	return nil
}

// RelayOnce publishes one batch of pending rows in id order, in one
// transaction that claims the rows, publishes them (each queue's rows in
// one SendBatch), marks the sent ones and commits. Rows whose send failed
// stay pending; the error then reports them.
func (r *Relay) RelayOnce(ctx context.Context) (Result, error) {
	var res Result
	batch := r.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	batch = min(batch, MaxBatch)
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("outbox: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, parked, err := r.claim(ctx, tx, batch)
	if err != nil || len(rows)+len(parked) == 0 {
		return res, err
	}
	sent, dups, sendErr := r.publish(ctx, rows, parked)
	if r.afterPublish != nil {
		r.afterPublish(len(sent))
	}
	if err := markSent(ctx, tx, sent); err != nil {
		return res, err
	}
	if err := markParked(ctx, tx, parked); err != nil {
		return res, err
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("outbox: commit: %w", err)
	}
	res.Published, res.Duplicates, res.Parked = len(sent), dups, len(parked)
	res.Failed = len(rows) - len(sent) - countParkedIn(rows, parked)
	return res, sendErr
}

// countParkedIn counts the rows that publish parked.
func countParkedIn(rows []row, parked map[int64]string) int {
	n := 0
	for _, rw := range rows {
		if _, ok := parked[rw.id]; ok {
			n++
		}
	}
	return n
}

// permanent reports whether Ferry will never accept the message, however
// often it is sent.
func permanent(err error) bool {
	return errors.Is(err, client.ErrMessageTooLarge) || errors.Is(err, client.ErrInvalidArgument)
}

// claim locks and reads up to n pending rows; rows that do not decode
// are returned apart, with the reason to park them.
func (r *Relay) claim(ctx context.Context, tx *sql.Tx, n int) ([]row, map[int64]string, error) {
	query := `SELECT id, queue, msg_id, grp, headers, body, delay_ns, priority, deliver_at_ns FROM ` + Table +
		` WHERE sent_ns IS NULL AND failed IS NULL ORDER BY id LIMIT $1`
	switch r.Dialect {
	case Postgres:
		query += ` FOR UPDATE SKIP LOCKED`
	case SQLite:
		// A write first takes the database's write lock for the whole
		// transaction, so a second relay waits here (busy_timeout)
		// instead of reading the same rows.
		if _, err := tx.ExecContext(ctx, `UPDATE `+Table+` SET sent_ns = NULL WHERE id = 0 AND sent_ns IS NULL`); err != nil {
			return nil, nil, fmt.Errorf("outbox: lock: %w", err)
		}
	default:
		return nil, nil, fmt.Errorf("%w: %v", ErrUnknownDialect, r.Dialect)
	}
	rs, err := tx.QueryContext(ctx, query, n)
	if err != nil {
		return nil, nil, fmt.Errorf("outbox: claim: %w", err)
	}
	defer rs.Close()
	var out []row
	parked := map[int64]string{}
	for rs.Next() {
		var rw row
		var headers string
		var delay, priority, deliverAt int64
		if err := rs.Scan(&rw.id, &rw.queue, &rw.msg.ID, &rw.msg.Group, &headers, &rw.msg.Body, &delay, &priority, &deliverAt); err != nil {
			return nil, nil, fmt.Errorf("outbox: claim: %w", err)
		}
		if headers != "" {
			if err := json.Unmarshal([]byte(headers), &rw.msg.Headers); err != nil {
				parked[rw.id] = "headers: " + err.Error()
				continue
			}
		}
		if priority < 0 || priority > int64(client.MaxPriority) {
			parked[rw.id] = fmt.Sprintf("priority %d outside 0..%d", priority, client.MaxPriority)
			continue
		}
		rw.msg.Delay, rw.msg.Priority = time.Duration(delay), client.Priority(priority)
		if deliverAt != 0 {
			rw.msg.DeliverAt = time.Unix(0, deliverAt)
		}
		out = append(out, rw)
	}
	if err := rs.Err(); err != nil {
		return nil, nil, fmt.Errorf("outbox: claim: %w", err)
	}
	return out, parked, nil
}

// publish sends rows, each queue's in one batch in id order, and returns
// the ids of the rows Ferry confirmed, how many of them were duplicates,
// and the failures. Rows Ferry can never accept are added to parked.
func (r *Relay) publish(ctx context.Context, rows []row, parked map[int64]string) (sent []int64, dups int, err error) {
	var order []string
	byQueue := map[string][]row{}
	for _, rw := range rows {
		if _, ok := byQueue[rw.queue]; !ok {
			order = append(order, rw.queue)
		}
		byQueue[rw.queue] = append(byQueue[rw.queue], rw)
	}
	var errs []error
	for _, name := range order {
		qrows := byQueue[name]
		results, itemErrs, serr := r.sendQueue(ctx, name, qrows)
		if serr != nil {
			errs = append(errs, fmt.Errorf("outbox: publish %d rows to %s: %w", len(qrows), name, serr))
			continue
		}
		for i, rw := range qrows {
			switch e := itemErrs[i]; {
			case e != nil && permanent(e):
				parked[rw.id] = e.Error()
			case e != nil:
				errs = append(errs, fmt.Errorf("outbox: publish row %d to %s: %w", rw.id, name, e))
			default:
				sent = append(sent, rw.id)
				if results[i].Duplicate {
					dups++
				}
			}
		}
	}
	return sent, dups, errors.Join(errs...)
}

// sendQueue sends one queue's rows in one batch and returns one error per
// row, or an error for them all. When the batch as a whole is refused as
// invalid, the rows are sent one by one so that only the bad ones fail.
func (r *Relay) sendQueue(ctx context.Context, name string, qrows []row) ([]client.SendResult, []error, error) {
	q := r.Client.Queue(name)
	msgs := make([]client.Message, len(qrows))
	for i, rw := range qrows {
		msgs[i] = rw.msg
	}
	results, err := q.SendBatch(ctx, msgs)
	var be *client.BatchError
	switch {
	case err == nil:
		return results, make([]error, len(qrows)), nil
	case errors.As(err, &be) && len(be.Errors) == len(qrows):
		return results, be.Errors, nil
	case !permanent(err):
		return nil, nil, err
	}
	results = make([]client.SendResult, len(qrows))
	errs := make([]error, len(qrows))
	for i, m := range msgs {
		results[i], errs[i] = q.Send(ctx, m)
	}
	return results, errs, nil
}

// markParked records why each parked row can never be published.
func markParked(ctx context.Context, tx *sql.Tx, parked map[int64]string) error {
	for id, reason := range parked {
		if len(reason) > maxFailedBytes {
			reason = reason[:maxFailedBytes]
		}
		if _, err := tx.ExecContext(ctx, `UPDATE `+Table+` SET failed = $1 WHERE id = $2`, reason, id); err != nil {
			return fmt.Errorf("outbox: park row %d: %w", id, err)
		}
	}
	return nil
}

// markSent stamps the rows with ids as sent.
func markSent(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.FormatInt(id, 10)
	}
	_, err := tx.ExecContext(ctx, `UPDATE `+Table+` SET sent_ns = $1 WHERE id IN (`+strings.Join(list, ",")+`)`,
		time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("outbox: mark sent: %w", err)
	}
	return nil
}
