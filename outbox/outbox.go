// Package outbox is a transactional outbox for Ferry on database/sql.
//
// A service that changes its database and must tell other services about
// it writes the message into an outbox table in the same transaction as
// the change (Enqueue). Either both commit or neither does. A Relay then
// publishes pending rows to Ferry and marks them sent:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	_, _ = tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = $2", amount, id)
//	_ = outbox.Enqueue(ctx, tx, "payments", client.Message{Group: id, Body: event})
//	_ = tx.Commit()
//
//	relay := &outbox.Relay{DB: db, Dialect: outbox.Postgres, Client: c}
//	go relay.Run(ctx)
//
// Every row carries its message id, assigned by Enqueue and sent on every
// attempt, so a relay that publishes a row and dies before marking it sent
// republishes it as a duplicate that Ferry's dedup window absorbs: nothing
// is lost, and nothing is delivered twice unless the relay stays down
// longer than the queue's dedup_window (5 minutes by default) between
// publishing a row and marking it.
//
// Several relays may run against one database at once. On PostgreSQL each
// claims its rows with SELECT ... FOR UPDATE SKIP LOCKED, so relays share
// the work without publishing a row twice. On SQLite, which has one writer
// at a time, a relay takes the write lock first, so relays take turns;
// open the database with a busy timeout (modernc.org/sqlite:
// "file:app.db?_pragma=busy_timeout(10000)") so that they wait for it.
// A relay holds its transaction, and so its rows' locks, while it
// publishes the batch: keep Batch modest.
//
// A row Ferry can never accept (a body over the queue's max_message_bytes,
// an invalid message, headers that no longer decode) is parked: its
// failed column gets the reason and relays skip it from then on, so one bad
// row cannot stall the rows after it. Find them with
// SELECT * FROM ferry_outbox WHERE failed IS NOT NULL. Any other failure (the
// queue does not exist yet, the cluster is unreachable) leaves the row
// pending, to be retried.
//
// Supported databases: PostgreSQL (any database/sql driver using $n
// placeholders, such as pgx's stdlib) and SQLite (modernc.org/sqlite or
// another driver accepting $n). Create the table with CreateTable or the
// DDL it runs.
package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Table is the outbox table's name.
const Table = "ferry_outbox"

// MaxQueueNameBytes bounds a queue name accepted by Enqueue (the broker
// applies its own, stricter rules when the row is published).
const MaxQueueNameBytes = 255

// Errors of this package.
var (
	// ErrInvalidMessage: Enqueue was given an empty queue name or a
	// message it cannot store; nothing was written.
	ErrInvalidMessage = errors.New("outbox: invalid message")
	// ErrUnknownDialect: the Dialect is not Postgres or SQLite.
	ErrUnknownDialect = errors.New("outbox: unknown dialect")
)

// Dialect selects the SQL a Relay and CreateTable use.
type Dialect int

// The supported databases.
const (
	// Postgres is PostgreSQL 9.5 or later (SKIP LOCKED).
	Postgres Dialect = iota + 1
	// SQLite is SQLite 3.
	SQLite
)

// String names the dialect.
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("dialect(%d)", int(d))
}

// Execer is what Enqueue writes through: a *sql.Tx (the point of an
// outbox), or a *sql.DB or *sql.Conn.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// CreateTable creates the outbox table and its index of pending rows if
// they do not exist.
func CreateTable(ctx context.Context, db Execer, d Dialect) error {
	var idCol, bodyType string
	switch d {
	case Postgres:
		idCol, bodyType = "id BIGSERIAL PRIMARY KEY", "BYTEA"
	case SQLite:
		idCol, bodyType = "id INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB"
	default:
		return fmt.Errorf("%w: %v", ErrUnknownDialect, d)
	}
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ` + Table + ` (
	` + idCol + `,
	queue      TEXT NOT NULL,
	msg_id     TEXT NOT NULL,
	grp        TEXT NOT NULL DEFAULT '',
	headers    TEXT NOT NULL DEFAULT '',
	body       ` + bodyType + ` NOT NULL,
	delay_ns   BIGINT NOT NULL DEFAULT 0,
	priority   INTEGER NOT NULL DEFAULT 0,
	deliver_at_ns BIGINT NOT NULL DEFAULT 0,
	created_ns BIGINT NOT NULL,
	sent_ns    BIGINT,
	failed     TEXT
)`,
		`CREATE INDEX IF NOT EXISTS ` + Table + `_pending ON ` + Table + ` (id) WHERE sent_ns IS NULL AND failed IS NULL`,
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("outbox: create table: %w", err)
		}
	}
	return addLaterColumns(ctx, db, d)
}

// laterColumns are the columns added after the table's first version,
// with their definitions; CreateTable adds them to an older table.
var laterColumns = [][2]string{
	{"priority", "INTEGER NOT NULL DEFAULT 0"},
	{"deliver_at_ns", "BIGINT NOT NULL DEFAULT 0"},
}

// addLaterColumns adds the laterColumns an older outbox table lacks.
func addLaterColumns(ctx context.Context, db Execer, d Dialect) error {
	for _, c := range laterColumns {
		stmt := `ALTER TABLE ` + Table + ` ADD COLUMN IF NOT EXISTS ` + c[0] + ` ` + c[1]
		if d == SQLite { // no IF NOT EXISTS: a duplicate column is the one error to ignore
			stmt = `ALTER TABLE ` + Table + ` ADD COLUMN ` + c[0] + ` ` + c[1]
		}
		_, err := db.ExecContext(ctx, stmt)
		if err != nil && !(d == SQLite && strings.Contains(err.Error(), "duplicate column")) {
			return fmt.Errorf("outbox: add column %s: %w", c[0], err)
		}
	}
	return nil
}

// Enqueue writes m, to be published to queue, into the outbox through tx,
// and returns the message id it will be published with: m.ID, or a fresh
// random id when m.ID is empty. The row becomes visible to relays when tx
// commits and disappears with it if tx rolls back. m.Delay counts from
// publication, not from Enqueue; m.DeliverAt and m.Priority are published
// as given.
func Enqueue(ctx context.Context, tx Execer, queue string, m client.Message) (string, error) {
	if queue == "" || len(queue) > MaxQueueNameBytes {
		return "", fmt.Errorf("%w: queue name of %d bytes", ErrInvalidMessage, len(queue))
	}
	if m.Delay < 0 {
		return "", fmt.Errorf("%w: negative delay %v", ErrInvalidMessage, m.Delay)
	}
	if m.Delay > 0 && !m.DeliverAt.IsZero() {
		return "", fmt.Errorf("%w: both a delay (%v) and a delivery time (%v)", ErrInvalidMessage, m.Delay, m.DeliverAt)
	}
	if m.Priority > client.MaxPriority {
		return "", fmt.Errorf("%w: priority %d above %d", ErrInvalidMessage, m.Priority, client.MaxPriority)
	}
	deliverAt := int64(0)
	if !m.DeliverAt.IsZero() {
		deliverAt = m.DeliverAt.UnixNano()
	}
	id := m.ID
	if id == "" {
		id = newID()
	}
	headers := ""
	if len(m.Headers) > 0 {
		b, err := json.Marshal(m.Headers)
		if err != nil {
			return "", fmt.Errorf("%w: headers: %v", ErrInvalidMessage, err)
		}
		headers = string(b)
	}
	body := m.Body
	if body == nil {
		body = []byte{}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO `+Table+` (queue, msg_id, grp, headers, body, delay_ns, priority, deliver_at_ns, created_ns)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, queue, id, m.Group, headers, body, int64(m.Delay), int(m.Priority), deliverAt,
		time.Now().UnixNano())
	if err != nil {
		return "", fmt.Errorf("outbox: enqueue: %w", err)
	}
	return id, nil
}

// newID returns a random message id: "ob-" and 32 hex digits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return "ob-" + hex.EncodeToString(b[:])
}

// Prune deletes rows marked sent before olderThan ago, at most limit of
// them, and returns how many it deleted. Run it now and then: sent rows
// are kept until pruned, for inspection.
func Prune(ctx context.Context, db *sql.DB, olderThan time.Duration, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%w: prune limit %d", ErrInvalidMessage, limit)
	}
	res, err := db.ExecContext(ctx, `DELETE FROM `+Table+` WHERE id IN (SELECT id FROM `+Table+
		` WHERE sent_ns IS NOT NULL AND sent_ns < $1 ORDER BY id LIMIT $2)`,
		time.Now().Add(-olderThan).UnixNano(), limit)
	if err != nil {
		return 0, fmt.Errorf("outbox: prune: %w", err)
	}
	return res.RowsAffected()
}
