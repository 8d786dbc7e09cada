package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/node"
)

// startNode starts a one-node cluster and waits until it serves /readyz.
func startNode(t *testing.T) *node.Node {
	t.Helper()
	nd := ferrytest.Start(t, ferrytest.Options{}).Nodes()[0]
	testwait.UntilNil(t, waitTimeout, "node ready", func() error {
		resp, err := http.Get("http://" + nd.HTTPAddr() + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
	return nd
}

// waitTimeout bounds every polled condition in the tests.
const waitTimeout = 20 * time.Second

// stdoutMu serializes the tests that take over os.Stdout.
var stdoutMu sync.Mutex

// runCLI runs the ferry command with args against addr and returns what
// it printed.
func runCLI(addr string, args ...string) ([]byte, error) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	root := newRoot()
	root.SetArgs(append([]string{"-s", addr, "--timeout", "10s", "--insecure"}, args...))
	runErr := root.ExecuteContext(context.Background())
	os.Stdout = saved
	w.Close()
	out := <-done
	r.Close()
	return out, runErr
}

// cliJSON runs the command with --json, retrying while it fails (the
// cluster may still be settling), and decodes its output.
func cliJSON(t *testing.T, addr string, args ...string) any {
	t.Helper()
	var out any
	testwait.UntilNil(t, waitTimeout, fmt.Sprint("ferry ", args), func() error {
		b, err := runCLI(addr, append([]string{"--json"}, args...)...)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &out)
	})
	return out
}

func httpJSON(t *testing.T, nd *node.Node, path string) any {
	t.Helper()
	resp, err := http.Get("http://" + nd.HTTPAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return out
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkSnakeCase fails on any object key of v that is not snake_case;
// header maps (user data) are not looked into.
func checkSnakeCase(t *testing.T, what string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if !snakeCase.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", what, k)
			}
			if k != "headers" {
				checkSnakeCase(t, what+"."+k, sub)
			}
		}
	case []any:
		for _, sub := range v {
			checkSnakeCase(t, what+"[]", sub)
		}
	}
}

// byKey finds the object of list whose key equals want.
func byKey(t *testing.T, list any, key string, want any) map[string]any {
	t.Helper()
	items, _ := list.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m[key] == want {
			return m
		}
	}
	t.Fatalf("no %s = %v in %v", key, want, list)
	return nil
}

// sameKeys fails unless a and b hold equal values under every key of keys.
func sameKeys(t *testing.T, what string, a, b map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := a[k]; !ok {
			t.Errorf("%s: CLI output has no %q: %v", what, k, a)
		}
		if !reflect.DeepEqual(a[k], b[k]) {
			t.Errorf("%s: %s is %#v in the CLI, %#v over HTTP", what, k, a[k], b[k])
		}
	}
}

func TestCLI_JSONMatchesHTTP(t *testing.T) {
	nd := startNode(t)
	addr := nd.ClientAddr()
	created := cliJSON(t, addr, "queue", "create", "orders", "--partitions", "2", "--max-receives", "0",
		"--dedup-window", "0", "--max-depth", "0", "--retention", "90m", "--visibility", "45s",
		"--max-dead", "500", "--dead-retention", "24h", "--dedup-max-ids", "0")
	// Queue config: the same values for limits, durations and no-limit.
	cliQueue := byKey(t, cliJSON(t, addr, "queue", "ls"), "name", "orders")
	httpQueue := byKey(t, httpJSON(t, nd, "/v1/queues"), "name", "orders")
	if !reflect.DeepEqual(created, cliQueue) {
		t.Errorf("queue create printed %v, queue ls %v", created, cliQueue)
	}
	cfg := cliQueue["config"].(map[string]any)
	want := map[string]any{"partitions": 2.0, "replicas": 1.0, "visibility_timeout": "45s", "max_receives": 0.0,
		"backoff_base": "1s", "backoff_max": "5m0s", "dedup_window": "0s", "max_message_bytes": float64(1 << 20),
		"max_depth": 0.0, "max_bytes": 0.0, "retention": "1h30m0s",
		"max_dead": 500.0, "max_dead_bytes": float64(1 << 30), "dead_retention": "24h0m0s", "dedup_max_ids": 0.0,
		"max_in_flight": 0.0, "max_delivery_rate": 0.0, "fair_groups": 0.0}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("CLI config %v, want %v", cfg, want)
	}
	if !reflect.DeepEqual(cfg, httpQueue["config"]) {
		t.Errorf("config differs: CLI %v, HTTP %v", cfg, httpQueue["config"])
	}

	// The table says what the zeros mean.
	table, err := runCLI(addr, "queue", "ls")
	if err != nil || !bytes.Contains(table, []byte("unlimited")) || !bytes.Contains(table, []byte("off")) {
		t.Errorf("queue ls table (%v):\n%s", err, table)
	}

	// Nodes: the same keys, values and state names.
	cliCluster := cliJSON(t, addr, "cluster", "status").(map[string]any)
	httpCluster := httpJSON(t, nd, "/v1/cluster").(map[string]any)
	cn, hn := byKey(t, cliCluster["nodes"], "id", "n1"), byKey(t, httpCluster["nodes"], "id", "n1")
	sameKeys(t, "node n1", cn, hn, "id", "state", "client_addr", "raft_addr", "http_addr")
	if cn["state"] != "alive" {
		t.Errorf("node state %v, want \"alive\"", cn["state"])
	}
	sameKeys(t, "cluster queue", byKey(t, cliCluster["queues"], "name", "orders"),
		byKey(t, httpCluster["queues"], "name", "orders"), "name", "config")

	// Figures: stats and /v1/replicas agree on what they share.
	checkFigures(t, nd, addr)
	sent := cliJSON(t, addr, "send", "orders", "json-keys", "-H", "k=v")
	peeked := cliJSON(t, addr, "peek", "orders", "--max", "5")
	received := cliJSON(t, addr, "recv", "orders", "--max", "5")
	checkSnakeCase(t, "send", sent)
	checkSnakeCase(t, "peek", peeked)
	checkSnakeCase(t, "recv", received)
	checkPeekMatchesHTTP(t, nd, addr)
	if list, _ := received.([]any); len(list) == 0 {
		t.Errorf("recv --json printed %v", received)
	} else if d := list[0].(map[string]any); d["receipt"] == nil || d["enqueued_at"] == nil {
		t.Errorf("recv --json entry %v lacks receipt or enqueued_at", d)
	}
	for what, v := range map[string]any{"queue create": created, "cluster status": cliCluster, "GET /v1/cluster": httpCluster,
		"GET /v1/queues": httpJSON(t, nd, "/v1/queues"), "GET /v1/replicas": httpJSON(t, nd, "/v1/replicas")} {
		checkSnakeCase(t, what, v)
	}
}

// checkFigures sends to and dead-letters from "orders", then compares the
// per-partition figures of `ferry queue stats` with /v1/replicas.
func checkFigures(t *testing.T, nd *node.Node, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := c.Queue("orders")
	if _, err := q.SendBatch(ctx, []client.Message{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: time.Second})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %d", err, len(ds))
	}
	if err := ds[0].Reject(ctx, "bad input"); err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	testwait.UntilNil(t, waitTimeout, "stats and replicas agree", func() error {
		st = cliJSON(t, addr, "queue", "stats", "orders").(map[string]any)
		reps := httpJSON(t, nd, "/v1/replicas")
		for _, p := range st["partitions"].([]any) {
			cp := p.(map[string]any)
			hp := byKey(t, reps, "partition", cp["partition"])
			for _, k := range []string{"ready", "in_flight", "delayed", "dead"} {
				if !reflect.DeepEqual(cp[k], hp[k]) {
					return fmt.Errorf("partition %v %s: CLI %v, HTTP %v", cp["partition"], k, cp[k], hp[k])
				}
			}
			if hp["role"] != "leader" {
				return fmt.Errorf("replica role %v, want \"leader\"", hp["role"])
			}
		}
		return nil
	})
	total := st["total"].(map[string]any)
	if total["ready"] != 2.0 || total["dead"] != 1.0 {
		t.Errorf("stats total %v", total)
	}
	if _, ok := total["oldest_eligible_age"].(string); !ok {
		t.Errorf("oldest_eligible_age %#v is not a duration string", total["oldest_eligible_age"])
	}
	checkSnakeCase(t, "queue stats", st)
	checkDeadLetterJSON(t, addr)
}

// checkDeadLetterJSON looks at the rejected message through `dlq peek`.
func checkDeadLetterJSON(t *testing.T, addr string) {
	t.Helper()
	letters := cliJSON(t, addr, "dlq", "peek", "orders").([]any)
	if len(letters) != 1 {
		t.Fatalf("dlq peek: %v", letters)
	}
	d := letters[0].(map[string]any)
	if d["reason"] != "rejected" || d["reason_text"] != "bad input" || d["attempts"] != 1.0 {
		t.Errorf("dead letter %v", d)
	}
	if b := d["body"]; b != "a" && b != "b" && b != "c" {
		t.Errorf("dead letter body %#v", b)
	}
	for _, k := range []string{"dead_at", "enqueued_at", "first_delivered_at"} {
		s, _ := d[k].(string)
		if at, err := time.Parse(time.RFC3339Nano, s); err != nil || at.Location() != time.UTC || !bytes.HasSuffix([]byte(s), []byte("Z")) {
			t.Errorf("%s = %#v: want RFC 3339 UTC (%v)", k, d[k], err)
		}
	}
	checkSnakeCase(t, "dlq peek", letters)
	checkSnakeCase(t, "dlq ls", cliJSON(t, addr, "dlq", "ls", "orders"))
}

// The --reason flag takes the names the JSON output uses as well.
func TestCLI_DeadReasonTakesJSONNames(t *testing.T) {
	for in, want := range map[string]client.DeadReason{
		"rejected": client.DeadRejected, "exhausted": client.DeadRetriesExhausted,
		"retries_exhausted": client.DeadRetriesExhausted, "expired": client.DeadLeaseExpired,
		"lease_expired": client.DeadLeaseExpired,
	} {
		f := deadFlags{reason: in}
		if got, err := f.filter(); err != nil || got.Reason != want {
			t.Errorf("--reason %s: %v, %v", in, got.Reason, err)
		}
	}
	if _, err := (&deadFlags{reason: "lease expired"}).filter(); err == nil {
		t.Error("--reason \"lease expired\" was accepted")
	}
}

// checkPeekMatchesHTTP compares `ferry peek --state all --json` with GET
// /v1/queues/orders/messages?state=all: the same messages, in the same
// order, with the same keys and states.
func checkPeekMatchesHTTP(t *testing.T, nd *node.Node, addr string) {
	t.Helper()
	cli := cliJSON(t, addr, "peek", "orders", "--state", "all", "--max", "100").([]any)
	web := httpJSON(t, nd, "/v1/queues/orders/messages?state=all&max=100").([]any)
	if len(cli) == 0 || len(cli) != len(web) {
		t.Fatalf("peek: %d messages from the CLI, %d over HTTP", len(cli), len(web))
	}
	for i := range cli {
		c, h := cli[i].(map[string]any), web[i].(map[string]any)
		sameKeys(t, "peeked message", c, h, "partition", "seq", "id", "state", "enqueued_at", "attempts", "priority", "body")
		if c["id"] != h["id"] || c["state"] != h["state"] || c["consumer"] != h["consumer"] {
			t.Errorf("peeked message %d: CLI %v, HTTP %v", i, c, h)
		}
	}
	checkSnakeCase(t, "peek --state all", cli)
}
