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
	rows, err := r.claim(ctx, tx, batch)
	if err != nil || len(rows) == 0 {
		return res, err
	}
	sent, dups, sendErr := r.publish(ctx, rows)
	if r.afterPublish != nil {
		r.afterPublish(len(sent))
	}
	if err := markSent(ctx, tx, sent); err != nil {
		return res, err
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("outbox: commit: %w", err)
	}
	res.Published, res.Duplicates, res.Failed = len(sent), dups, len(rows)-len(sent)
	return res, sendErr
}

// claim locks and reads up to n pending rows.
func (r *Relay) claim(ctx context.Context, tx *sql.Tx, n int) ([]row, error) {
	query := `SELECT id, queue, msg_id, grp, headers, body, delay_ns FROM ` + Table +
		` WHERE sent_ns IS NULL ORDER BY id LIMIT $1`
	switch r.Dialect {
	case Postgres:
		query += ` FOR UPDATE SKIP LOCKED`
	case SQLite:
		// A write first takes the database's write lock for the whole
		// transaction, so a second relay waits here (busy_timeout)
		// instead of reading the same rows.
		if _, err := tx.ExecContext(ctx, `UPDATE `+Table+` SET sent_ns = NULL WHERE id = 0 AND sent_ns IS NULL`); err != nil {
			return nil, fmt.Errorf("outbox: lock: %w", err)
		}
	default:
		return nil, fmt.Errorf("%w: %v", ErrUnknownDialect, r.Dialect)
	}
	rs, err := tx.QueryContext(ctx, query, n)
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var rw row
		var headers string
		var delay int64
		if err := rs.Scan(&rw.id, &rw.queue, &rw.msg.ID, &rw.msg.Group, &headers, &rw.msg.Body, &delay); err != nil {
			return nil, fmt.Errorf("outbox: claim: %w", err)
		}
		if headers != "" {
			if err := json.Unmarshal([]byte(headers), &rw.msg.Headers); err != nil {
				return nil, fmt.Errorf("outbox: row %d: headers: %w", rw.id, err)
			}
		}
		rw.msg.Delay = time.Duration(delay)
		out = append(out, rw)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	return out, nil
}

// publish sends rows, each queue's in one batch in id order, and returns
// the ids of the rows Ferry confirmed, how many of them were duplicates,
// and the failures.
func (r *Relay) publish(ctx context.Context, rows []row) (sent []int64, dups int, err error) {
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
		msgs := make([]client.Message, len(qrows))
		for i, rw := range qrows {
			msgs[i] = rw.msg
		}
		results, serr := r.Client.Queue(name).SendBatch(ctx, msgs)
		var be *client.BatchError
		switch {
		case serr == nil:
		case errors.As(serr, &be) && len(be.Errors) == len(qrows):
		default:
			errs = append(errs, fmt.Errorf("outbox: publish %d rows to %s: %w", len(qrows), name, serr))
			continue
		}
		for i, rw := range qrows {
			if be != nil && be.Errors[i] != nil {
				errs = append(errs, fmt.Errorf("outbox: publish row %d to %s: %w", rw.id, name, be.Errors[i]))
				continue
			}
			sent = append(sent, rw.id)
			if results[i].Duplicate {
				dups++
			}
		}
	}
	return sent, dups, errors.Join(errs...)
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
