package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(relayHelper())
	}
	code := m.Run()
	if pg != nil {
		pg.stop()
	}
	os.Exit(code)
}

// testDB is one empty outbox database of a dialect.
type testDB struct {
	db      *sql.DB
	dialect Dialect
	driver  string
	dsn     string
	path    string // SQLite's file
}

// eachDB runs f against a fresh SQLite and a fresh PostgreSQL database.
func eachDB(t *testing.T, f func(t *testing.T, tdb testDB)) {
	t.Run("sqlite", func(t *testing.T) { f(t, openDB(t, SQLite)) })
	t.Run("postgres", func(t *testing.T) { f(t, openDB(t, Postgres)) })
}

func openDB(t *testing.T, d Dialect) testDB {
	t.Helper()
	ctx := context.Background()
	tdb := testDB{dialect: d}
	switch d {
	case SQLite:
		tdb.driver = "sqlite"
		tdb.path = t.TempDir() + "/outbox.db"
		tdb.dsn = "file:" + tdb.path + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)"
	case Postgres:
		s, err := startPostgres()
		if s == nil && err == nil {
			t.Skip(pgMissed)
		}
		if err != nil {
			t.Fatalf("start postgres: %v", err)
		}
		tdb.driver = "pgx"
		if tdb.dsn, err = s.newDatabase(ctx); err != nil {
			t.Fatalf("create database: %v", err)
		}
	}
	db, err := sql.Open(tdb.driver, tdb.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := CreateTable(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	if err := CreateTable(ctx, db, d); err != nil {
		t.Fatalf("CreateTable twice: %v", err)
	}
	tdb.db = db
	return tdb
}

// enqueueN commits n messages to queue, ids prefix-0..n-1, in
// transactions of up to 50.
func enqueueN(t *testing.T, db *sql.DB, queue, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 50 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := start; i < min(n, start+50); i++ {
			if _, err := Enqueue(ctx, tx, queue, client.Message{ID: fmt.Sprintf("%s-%d", prefix, i), Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// drain receives and acks everything in queue until want messages came
// and a further short poll finds nothing; it returns the count per id.
func drain(t *testing.T, q *client.Queue, want int) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[string]int{}
	total := 0
	for {
		wait := 2 * time.Second
		if total >= want {
			wait = 300 * time.Millisecond
		}
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 100, Wait: wait})
		if err != nil {
			t.Fatalf("Receive after %d of %d: %v", total, want, err)
		}
		if len(ds) == 0 && total >= want {
			return seen
		}
		for _, d := range ds {
			seen[d.ID]++
			total++
		}
		for i, err := range q.AckBatch(ctx, ds) {
			if err != nil {
				t.Fatalf("ack %s: %v", ds[i].ID, err)
			}
		}
	}
}

// exactlyOnce fails t unless seen holds prefix-0..n-1 once each.
func exactlyOnce(t *testing.T, seen map[string]int, prefix string, n int) {
	t.Helper()
	if len(seen) != n {
		t.Errorf("%d distinct messages arrived, want %d", len(seen), n)
	}
	for i := range n {
		if id := fmt.Sprintf("%s-%d", prefix, i); seen[id] != 1 {
			t.Errorf("message %s arrived %d times", id, seen[id])
		}
	}
}

func pending(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM ` + Table + ` WHERE sent_ns IS NULL AND failed IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOutbox_CommittedRowsArriveRolledBackDoNot(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{})
	q := fc.CreateQueue("events")
	eachDB(t, func(t *testing.T, tdb testDB) {
		ctx := context.Background()
		tx, err := tdb.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := Enqueue(ctx, tx, "events", client.Message{Group: "acct-1", Headers: map[string]string{"kind": "debit"}, Body: []byte{0, 1, 2}})
		if err != nil || id == "" {
			t.Fatalf("Enqueue: %q %v", id, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx, _ = tdb.db.BeginTx(ctx, nil)
		if _, err := Enqueue(ctx, tx, "events", client.Message{ID: "rolled-back"}); err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback()
		if _, err := Enqueue(ctx, tdb.db, "", client.Message{}); !errors.Is(err, ErrInvalidMessage) {
			t.Fatalf("Enqueue to no queue: %v", err)
		}

		r := &Relay{DB: tdb.db, Dialect: tdb.dialect, Client: fc.Client()}
		res, err := r.RelayOnce(ctx)
		if err != nil || res != (Result{Published: 1}) {
			t.Fatalf("RelayOnce: %+v %v", res, err)
		}
		if res, err := r.RelayOnce(ctx); err != nil || res != (Result{}) {
			t.Fatalf("second RelayOnce: %+v %v", res, err)
		}
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 10, Wait: 5 * time.Second})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Receive: %d %v", len(ds), err)
		}
		d := ds[0]
		if d.ID != id || d.Group != "acct-1" || d.Headers["kind"] != "debit" || string(d.Body) != "\x00\x01\x02" {
			t.Fatalf("delivery %+v, want the enqueued message %s", d, id)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := Prune(ctx, tdb.db, 0, 100); err != nil || n != 1 {
			t.Fatalf("Prune: %d %v", n, err)
		}
	})
}

func TestOutbox_ConcurrentRelaysPublishEachRowOnce(t *testing.T) {
	const n, relays = 600, 3
	fc := ferrytest.Start(t, ferrytest.Options{})
	eachDB(t, func(t *testing.T, tdb testDB) {
		queue := "conc-" + tdb.dialect.String()
		q := fc.CreateQueue(queue, client.Partitions(2))
		enqueueN(t, tdb.db, queue, "m", n)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var mu sync.Mutex
		var total Result
		var wg sync.WaitGroup
		for range relays {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := &Relay{DB: tdb.db, Dialect: tdb.dialect, Client: fc.Dial(), Batch: 25}
				for ctx.Err() == nil {
					res, err := r.RelayOnce(ctx)
					if err != nil {
						t.Errorf("RelayOnce: %v", err)
						return
					}
					mu.Lock()
					total.Published += res.Published
					total.Duplicates += res.Duplicates
					mu.Unlock()
					if res.Published == 0 {
						return
					}
				}
			}()
		}
		wg.Wait()
		if total.Published != n || total.Duplicates != 0 {
			t.Fatalf("relays published %d rows (%d duplicates), want %d and none twice", total.Published, total.Duplicates, n)
		}
		if p := pending(t, tdb.db); p != 0 {
			t.Fatalf("%d rows still pending", p)
		}
		exactlyOnce(t, drain(t, q, n), "m", n)
	})
}

// TestOutbox_SQLiteLockStepExcludesOtherWriters proves the step that makes
// SQLite relays take turns: after it, another connection cannot write.
func TestOutbox_SQLiteLockStepExcludesOtherWriters(t *testing.T) {
	tdb := openDB(t, SQLite)
	ctx := context.Background()
	tx, err := tdb.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	r := &Relay{DB: tdb.db, Dialect: SQLite}
	if _, _, err := r.claim(ctx, tx, 1); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+tdb.path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := Enqueue(ctx, other, "q", client.Message{ID: "x"}); err == nil {
		t.Fatal("a second writer got in while a relay held the claim")
	}
}

// TestOutbox_UnacceptableRowIsParkedOthersFlow puts a row Ferry refuses
// (a body over the queue's max_message_bytes) between good ones: the good
// ones are published, the bad one is parked with the reason and not tried
// again.
func TestOutbox_UnacceptableRowIsParkedOthersFlow(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{})
	eachDB(t, func(t *testing.T, tdb testDB) {
		queue := "park-" + tdb.dialect.String()
		q := fc.CreateQueue(queue, client.MaxMessageBytes(1024))
		ctx := context.Background()
		enqueueN(t, tdb.db, queue, "p", 2)
		if _, err := Enqueue(ctx, tdb.db, queue, client.Message{ID: "huge", Body: make([]byte, 4096)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tdb.db.ExecContext(ctx, `INSERT INTO `+Table+` (queue, msg_id, headers, body, created_ns) VALUES ($1, 'garbled', '{not json', $2, 0)`,
			queue, []byte{}); err != nil {
			t.Fatal(err)
		}
		enqueueN(t, tdb.db, queue, "q", 2)
		r := &Relay{DB: tdb.db, Dialect: tdb.dialect, Client: fc.Client()}
		res, err := r.RelayOnce(ctx)
		if err != nil || res != (Result{Published: 4, Parked: 2}) {
			t.Fatalf("RelayOnce: %+v %v; want 4 published, 2 parked", res, err)
		}
		if res, err := r.RelayOnce(ctx); err != nil || res != (Result{}) {
			t.Fatalf("second RelayOnce: %+v %v; want nothing left", res, err)
		}
		var reason string
		if err := tdb.db.QueryRowContext(ctx, `SELECT failed FROM `+Table+` WHERE msg_id = 'huge'`).Scan(&reason); err != nil {
			t.Fatal(err)
		}
		if reason == "" {
			t.Fatal("parked row has no reason")
		}
		seen := drain(t, q, 4)
		exactlyOnce(t, map[string]int{"p-0": seen["p-0"], "p-1": seen["p-1"]}, "p", 2)
		exactlyOnce(t, map[string]int{"q-0": seen["q-0"], "q-1": seen["q-1"]}, "q", 2)
		if len(seen) != 4 {
			t.Fatalf("arrived %v", seen)
		}
	})
}

// TestOutbox_PriorityAndDeliveryTimeArrive checks that a row's priority and
// delivery time are published as enqueued, and that an invalid priority or
// both a delay and a delivery time are refused at Enqueue.
func TestOutbox_PriorityAndDeliveryTimeArrive(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{})
	q := fc.CreateQueue("prio")
	eachDB(t, func(t *testing.T, tdb testDB) {
		ctx := context.Background()
		pre := t.Name()[strings.LastIndex(t.Name(), "/")+1:] + "-" // ids differ between databases
		due := time.Now().Add(400 * time.Millisecond)
		if _, err := Enqueue(ctx, tdb.db, "prio", client.Message{ID: pre + "later", Priority: 9, DeliverAt: due}); err != nil {
			t.Fatal(err)
		}
		if _, err := Enqueue(ctx, tdb.db, "prio", client.Message{ID: pre + "low", Priority: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := Enqueue(ctx, tdb.db, "prio", client.Message{ID: pre + "high", Priority: 7}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []client.Message{{Priority: client.MaxPriority + 1}, {Delay: time.Second, DeliverAt: due}} {
			if _, err := Enqueue(ctx, tdb.db, "prio", bad); !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("Enqueue %+v: %v, want ErrInvalidMessage", bad, err)
			}
		}
		r := &Relay{DB: tdb.db, Dialect: tdb.dialect, Client: fc.Client()}
		if res, err := r.RelayOnce(ctx); err != nil || res != (Result{Published: 3}) {
			t.Fatalf("RelayOnce: %+v %v", res, err)
		}
		var got []string
		for len(got) < 3 {
			ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 5 * time.Second})
			if err != nil || len(ds) != 1 {
				t.Fatalf("Receive: %d %v", len(ds), err)
			}
			d := ds[0]
			got = append(got, fmt.Sprintf("%s/%d", strings.TrimPrefix(d.ID, pre), d.Priority))
			if d.ID == pre+"later" && time.Now().Before(due) {
				t.Fatalf("%s delivered before its delivery time", d.ID)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(got) != "[high/7 low/1 later/9]" {
			t.Fatalf("deliveries %v, want high before low, later at its time", got)
		}
	})
}

// TestOutbox_CreateTableAddsLaterColumns checks that CreateTable brings a
// table of the first version (no priority or delivery time) up to date,
// keeping its rows.
func TestOutbox_CreateTableAddsLaterColumns(t *testing.T) {
	eachDB(t, func(t *testing.T, tdb testDB) {
		ctx := context.Background()
		for _, c := range laterColumns {
			if _, err := tdb.db.ExecContext(ctx, `ALTER TABLE `+Table+` DROP COLUMN `+c[0]); err != nil {
				t.Fatalf("drop %s: %v", c[0], err)
			}
		}
		if _, err := tdb.db.ExecContext(ctx, `INSERT INTO `+Table+` (queue, msg_id, body, created_ns) VALUES ('q', 'old', $1, 1)`, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := CreateTable(ctx, tdb.db, tdb.dialect); err != nil {
			t.Fatalf("CreateTable on the old table: %v", err)
		}
		var prio, at int64
		if err := tdb.db.QueryRowContext(ctx, `SELECT priority, deliver_at_ns FROM `+Table+` WHERE msg_id = 'old'`).Scan(&prio, &at); err != nil || prio != 0 || at != 0 {
			t.Fatalf("old row: priority %d, deliver_at %d, %v", prio, at, err)
		}
	})
}
