package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

// testScheduleCLI sends a message a year ahead and one at a set time,
// then adds, lists (table, --json and the admin port) and removes a
// schedule every second.
func testScheduleCLI(t *testing.T, cl *cluster) {
	s := cl.addrs
	cl.createQueue(t, "timed")
	at := time.Now().Add(300 * 24 * time.Hour).UTC().Format(time.RFC3339)
	if r := ferry(t, s, "send", "timed", "--id", "far", "--at", at, "x"); r.code != 0 {
		t.Fatalf("send --at: exit %d, %s", r.code, r.stderr)
	}
	if r := ferry(t, s, "send", "timed", "--id", "later", "--delay", "72h", "x"); r.code != 0 {
		t.Fatalf("send --delay 72h: exit %d, %s", r.code, r.stderr)
	}
	if r := ferry(t, s, "send", "timed", "--delay", "8785h", "x"); r.code == 0 || !strings.Contains(r.stderr, "--delay") {
		t.Fatalf("send --delay 8785h: exit %d, %s", r.code, r.stderr)
	}
	if r := ferry(t, s, "send", "timed", "--at", "tomorrow", "x"); r.code == 0 || !strings.Contains(r.stderr, "RFC 3339") {
		t.Fatalf("send --at tomorrow: exit %d, %s", r.code, r.stderr)
	}
	if st := cl.stats(t, "timed"); st.Delayed != 2 {
		t.Fatalf("%d delayed, want 2", st.Delayed)
	}
	if r := ferry(t, s, "msg", "find", "timed", "far"); r.code != 0 || !strings.Contains(r.stdout, "delayed") {
		t.Fatalf("msg find far: exit %d, %q", r.code, r.stdout)
	}

	if r := ferry(t, s, "schedule", "add", "timed", "beat", "--every", "1s", "--cron", "* * * * *"); r.code == 0 {
		t.Fatal("add with both --every and --cron succeeded")
	}
	if r := ferry(t, s, "schedule", "add", "timed", "bad", "--cron", "61 * * * *"); r.code == 0 || !strings.Contains(r.stderr, "minute") {
		t.Fatalf("add with a bad cron: exit %d, %s", r.code, r.stderr)
	}
	r := ferry(t, s, "schedule", "add", "timed", "beat", "--every", "1s", "--body", "tick", "--priority", "2")
	if r.code != 0 || !strings.Contains(r.stdout, "schedule beat on timed") {
		t.Fatalf("add: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := ferry(t, s, "schedule", "add", "timed", "report", "--cron", "0 9 * * 1-5", "--json"); r.code != 0 ||
		!strings.Contains(r.stdout, `"cron": "0 9 * * 1-5"`) {
		t.Fatalf("add --cron --json: exit %d, %q", r.code, r.stdout)
	}
	testwait.Until(t, 20*time.Second, "two ticks of beat", func() bool {
		var list []map[string]any
		r := ferry(t, s, "schedule", "ls", "timed", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &list) == nil && len(list) == 2 &&
			list[0]["name"] == "beat" && list[0]["fired"].(float64) >= 2
	})
	if r := ferry(t, s, "schedule", "ls", "timed"); r.code != 0 || !strings.Contains(r.stdout, "every 1s") ||
		!strings.Contains(r.stdout, "0 9 * * 1-5") {
		t.Fatalf("ls: exit %d, %q", r.code, r.stdout)
	}
	resp, err := http.Get("http://" + cl.HTTPAddrs()[0] + "/v1/queues/timed/schedules")
	if err != nil {
		t.Fatal(err)
	}
	var hs []map[string]any
	err = json.NewDecoder(resp.Body).Decode(&hs)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(hs) != 2 || hs[0]["every"] != "1s" || hs[0]["body"] != "tick" {
		t.Fatalf("GET schedules: %s %v %v", resp.Status, hs, err)
	}
	for _, name := range []string{"beat", "report"} {
		if r := ferry(t, s, "schedule", "rm", "timed", name); r.code != 0 {
			t.Fatalf("rm %s: exit %d, %s", name, r.code, r.stderr)
		}
	}
	if r := ferry(t, s, "schedule", "rm", "timed", "beat"); r.code == 0 || !strings.Contains(r.stderr, "no schedule beat") {
		t.Fatalf("rm again: exit %d, %s", r.code, r.stderr)
	}
	if r := ferry(t, s, "schedule", "ls", "timed", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("ls after rm: exit %d, %q", r.code, r.stdout)
	}
}
