package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// peek shows leased messages with their holder when asked and filters by
// group, header and age; msg rm-matching refuses without --yes or
// --dry-run, counts on a dry run without deleting, and deletes exactly the
// matching messages; purge --include-leased deletes leased messages too.
func TestCLI_PeekFiltersRmMatchingAndPurgeLeased(t *testing.T) {
	cl := startCluster(t)
	s := cl.addrs
	cl.createQueue(t, "inspect")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := cl.c.Queue("inspect")
	var msgs []client.Message
	for _, g := range []string{"a", "a", "b", "b", "b"} {
		msgs = append(msgs, client.Message{Group: g, Body: []byte("body-" + g), Headers: map[string]string{"tenant": g}})
	}
	if _, err := q.SendBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	held, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Visibility: time.Minute})
	if err != nil || len(held) != 1 || held[0].Group != "a" {
		t.Fatalf("receive: %v, %v", held, err)
	}

	checkPeekFlags(t, s)

	if r := ferry(t, s, "msg", "rm-matching", "inspect", "--group", "b"); r.code == 0 || !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("rm-matching without --yes: exit %d, %q", r.code, r.stderr)
	}
	rm := func(args ...string) map[string]any {
		t.Helper()
		r := ferry(t, s, append([]string{"msg", "rm-matching", "inspect", "--json"}, args...)...)
		var out map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
			t.Fatalf("rm-matching %v: exit %d, %q", args, r.code, r.stdout)
		}
		return out
	}
	if got := rm("--group", "b", "--state", "all", "--dry-run"); got["matched"] != float64(3) || got["deleted"] != float64(0) ||
		got["dry_run"] != true || len(got["sample"].([]any)) != 3 {
		t.Fatalf("dry run: %v", got)
	}
	if st := cl.stats(t, "inspect"); st.Ready != 4 || st.InFlight != 1 {
		t.Fatalf("after a dry run: %+v", st)
	}
	if got := rm("--group", "b", "--yes"); got["matched"] != float64(3) || got["deleted"] != float64(3) {
		t.Fatalf("rm-matching group b: %v", got)
	}
	if st := cl.stats(t, "inspect"); st.Ready != 1 || st.InFlight != 1 {
		t.Fatalf("after deleting group b: %+v", st)
	}

	if r := ferry(t, s, "queue", "purge", "inspect", "--include-leased", "--yes", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"purged": 2`) {
		t.Fatalf("purge --include-leased: exit %d, %q", r.code, r.stdout)
	}
	if err := held[0].Ack(ctx); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("ack after the purge: %v", err)
	}
	if st := cl.stats(t, "inspect"); st.Ready+st.InFlight+st.Delayed != 0 {
		t.Fatalf("after purge --include-leased: %+v", st)
	}
}

// checkPeekFlags runs peek on queue "inspect" (four ready messages and
// one leased, of groups a and b) with each filter flag.
func checkPeekFlags(t *testing.T, s []string) {
	t.Helper()
	peek := func(args ...string) []map[string]any {
		t.Helper()
		r := ferry(t, s, append([]string{"peek", "inspect", "--json", "--max", "100"}, args...)...)
		var out []map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
			t.Fatalf("peek %v: exit %d, %q", args, r.code, r.stdout)
		}
		return out
	}
	if got := peek(); len(got) != 4 {
		t.Fatalf("default peek: %d messages, want the 4 ready", len(got))
	}
	leased := peek("--state", "leased")
	if len(leased) != 1 || leased[0]["state"] != "leased" || leased[0]["consumer"] == "" || leased[0]["visible_at"] == nil {
		t.Fatalf("leased peek: %v", leased)
	}
	if got := peek("--state", "all", "--header", "tenant=b"); len(got) != 3 {
		t.Fatalf("tenant b: %d", len(got))
	}
	if got := peek("--state", "ready,leased", "--group", "a", "--older-than", "1h"); len(got) != 0 {
		t.Fatalf("older than an hour: %v", got)
	}
	if r := ferry(t, s, "peek", "inspect", "--state", "leased"); r.code != 0 || !strings.Contains(r.stdout, "held by") {
		t.Fatalf("peek table of leased: exit %d, %q", r.code, r.stdout)
	}
	for _, args := range [][]string{{"--state", "dead"}, {"--header", "novalue"}, {"--older-than", "-1m"}} {
		if r := ferry(t, s, append([]string{"peek", "inspect"}, args...)...); r.code == 0 {
			t.Fatalf("peek %v exited 0", args)
		}
	}
}
