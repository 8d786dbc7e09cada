package outbox

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
)

// The relay helper process: the test binary re-run with these variables
// set runs one relay that stops dead after publishing its first batch
// (before marking it sent), announcing "published N" on stdout, and waits
// to be killed.
const (
	helperEnv       = "FERRY_OUTBOX_RELAY_HELPER"
	helperDriverEnv = "FERRY_OUTBOX_DRIVER"
	helperDSNEnv    = "FERRY_OUTBOX_DSN"
	helperSeedsEnv  = "FERRY_OUTBOX_SEEDS"
	helperBatchEnv  = "FERRY_OUTBOX_BATCH"
)

// relayHelper is the helper process's main; it returns an exit status.
func relayHelper() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "relay helper:", err); return 1 }
	d := Postgres
	if os.Getenv(helperDriverEnv) == "sqlite" {
		d = SQLite
	}
	batch, err := strconv.Atoi(os.Getenv(helperBatchEnv))
	if err != nil {
		return fail(err)
	}
	db, err := sql.Open(os.Getenv(helperDriverEnv), os.Getenv(helperDSNEnv))
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, strings.Split(os.Getenv(helperSeedsEnv), ","))
	if err != nil {
		return fail(err)
	}
	r := &Relay{DB: db, Dialect: d, Client: c, Batch: batch, afterPublish: func(n int) {
		fmt.Printf("published %d\n", n)
		select {} // mid-batch: published, not marked; wait for SIGKILL
	}}
	_, err = r.RelayOnce(ctx)
	return fail(fmt.Errorf("RelayOnce returned: %v", err))
}

// TestOutbox_RelayKilledMidBatchLosesAndDuplicatesNothing kills (SIGKILL)
// a relay process after it published a batch and before it marked the
// rows sent, then lets another relay finish: every row must arrive exactly
// once, the killed batch absorbed by Ferry's dedup.
func TestOutbox_RelayKilledMidBatchLosesAndDuplicatesNothing(t *testing.T) {
	const n, batch = 250, 100
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	eachDB(t, func(t *testing.T, tdb testDB) {
		queue := "crash-" + tdb.dialect.String()
		q := fc.CreateQueue(queue, client.Partitions(2))
		enqueueN(t, tdb.db, queue, "c", n)

		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=1", helperDriverEnv+"="+tdb.driver, helperDSNEnv+"="+tdb.dsn,
			helperSeedsEnv+"="+strings.Join(fc.Addrs(), ","), helperBatchEnv+"="+strconv.Itoa(batch))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line := make(chan string, 1)
		go func() {
			s := bufio.NewScanner(out)
			s.Scan()
			line <- s.Text()
		}()
		select {
		case l := <-line:
			if l != fmt.Sprintf("published %d", batch) {
				t.Fatalf("helper said %q", l)
			}
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("relay helper published nothing")
		}
		if err := cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if p := pending(t, tdb.db); p != n {
			t.Fatalf("%d rows pending after the kill, want all %d (the batch was never marked)", p, n)
		}

		r := &Relay{DB: tdb.db, Dialect: tdb.dialect, Client: fc.Client(), Batch: batch}
		var total Result
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for {
			res, err := r.RelayOnce(ctx)
			if err != nil {
				t.Fatalf("RelayOnce after the kill: %v", err)
			}
			if res.Published == 0 {
				break
			}
			total.Published += res.Published
			total.Duplicates += res.Duplicates
		}
		if total.Published != n || total.Duplicates != batch {
			t.Fatalf("second relay published %d rows, %d already in Ferry; want %d and %d", total.Published, total.Duplicates, n, batch)
		}
		exactlyOnce(t, drain(t, q, n), "c", n)
	})
}
