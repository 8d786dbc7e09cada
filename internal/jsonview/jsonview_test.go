package jsonview

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/wire"
)

func sampleQueue() wire.QueueInfo {
	return wire.QueueInfo{Name: "orders", Config: wire.QueueConfig{
		Partitions: 2, Replicas: 3, VisibilityTimeout: 30 * time.Second, MaxReceives: 0,
		BackoffBase: time.Second, BackoffMax: 5 * time.Minute, DedupWindow: 0, MaxMessageBytes: 1 << 20,
		MaxDepth: 0, MaxBytes: 1 << 30, Retention: 90 * time.Minute, MaxDead: 500, DeadRetention: 24 * time.Hour,
	}, Partitions: []wire.PartitionInfo{
		{Index: 0, Leader: "n1", LeaderAddr: "10.0.0.1:7101", Replicas: []string{"n1", "n2", "n3"}},
		{Index: 1, Replicas: []string{"n2", "n3", "n1"}},
	}}
}

func sampleStats() wire.QueueStatsResponse {
	return wire.QueueStatsResponse{Queue: "orders", Partitions: []wire.PartitionStats{
		{Partition: 0, Leader: "n1", AppliedIndex: 42, Ready: 3, Eligible: 2, Delayed: 1, InFlight: 4, Dead: 5,
			Bytes: 100, DeadBytes: 50, OldestEligibleAge: int64(1500 * time.Millisecond), Groups: 2, LastSeq: 9,
			Counters: wire.Counters{Sent: 12, Duplicates: 1, Leased: 7, Acked: 3, Nacked: 2, Rejected: 1, Expired: 1,
				DeadLettered: 5, Redriven: 1, DeadDeleted: 1, Purged: 1, RetentionExpired: 1}},
		{Partition: 1, Code: wire.CodeQueueNotFound, Error: "queue orders not found"},
	}}
}

func sampleDeadLetter() DeadLetter {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("east", 3600))
	d := DeadLetter{Partition: 1, Seq: 7, ID: "m1", Group: "g", Headers: map[string]string{"contentType": "x"},
		Bytes: 10, Attempts: 3, FirstEnqueuedAt: Time(at), EnqueuedAt: Time(at), FirstDeliveredAt: Time(at),
		LastDeliveredAt: Time(at), DeadAt: Time(at), Reason: Enum(wire.DeadRetriesExhausted.String()),
		ReasonText: "boom", LastConsumer: "c1",
		History: []Event{{Kind: Enum(wire.EventLeaseExpired.String()), At: Time(at), Attempt: 1, Consumer: "c1", Reason: "r"}}}
	d.SetBody([]byte{0xff, 0xfe})
	return d
}

// everyView renders one value of each view with every field set.
func everyView() map[string]any {
	q := sampleQueue()
	return map[string]any{
		"queue": QueueOf(q),
		"cluster": Cluster{Node: "n1", MetaLeader: "n1", MetaIndex: 3,
			Nodes:  []Node{NodeOf(wire.NodeInfo{ID: "n1", ClientAddr: "a", RaftAddr: "b", HTTPAddr: "c", State: wire.NodeSuspect})},
			Queues: QueuesOf([]wire.QueueInfo{q})},
		"stats": StatsOf(sampleStats()),
		"replica": Replica{Queue: "orders", Partition: 1, Group: "g", Role: Enum("Leader"), Leader: "n1",
			AppliedIndex: 1, Digest: "ab", Ready: 1, InFlight: 1, Delayed: 1, Dead: 1},
		"dead": sampleDeadLetter(),
	}
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// keys collects every object key of a decoded JSON value, with its path;
// the keys of headers (user data) are skipped.
func keys(path string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			out[path+"."+k] = k
			if k != "headers" {
				keys(path+"."+k, sub, out)
			}
		}
	case []any:
		for _, sub := range v {
			keys(path+"[]", sub, out)
		}
	}
}

// decode marshals v and decodes it as generic JSON.
func decode(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestJSONView_KeysAreSnakeCase(t *testing.T) {
	for name, v := range everyView() {
		found := map[string]string{}
		keys(name, decode(t, v), found)
		if len(found) < 5 {
			t.Fatalf("%s: only %d keys: %v", name, len(found), found)
		}
		for path, k := range found {
			if !snakeCase.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", path, k)
			}
		}
	}
}

func TestJSONView_QueueConfigValues(t *testing.T) {
	got := decode(t, QueueOf(sampleQueue())).(map[string]any)["config"].(map[string]any)
	want := map[string]any{
		"partitions": 2.0, "replicas": 3.0, "visibility_timeout": "30s", "max_receives": 0.0,
		"backoff_base": "1s", "backoff_max": "5m0s", "dedup_window": "0s", "max_message_bytes": float64(1 << 20),
		"max_depth": 0.0, "max_bytes": float64(1 << 30), "retention": "1h30m0s",
		"max_dead": 500.0, "max_dead_bytes": 0.0, "dead_retention": "24h0m0s", "dedup_max_ids": 0.0,
		"max_in_flight": 0.0, "max_delivery_rate": 0.0, "fair_groups": 0.0,
	}
	if len(got) != len(want) {
		t.Fatalf("config has keys %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("config %s = %#v, want %#v", k, got[k], w)
		}
	}
	// The view reads back into the same values.
	var back Queue
	b, _ := json.Marshal(QueueOf(sampleQueue()))
	if err := json.Unmarshal(b, &back); err != nil || back.Config != ConfigOf(sampleQueue().Config) {
		t.Fatalf("read back %+v, %v", back.Config, err)
	}
}

func TestJSONView_EnumsTimesAndEmptyLists(t *testing.T) {
	st := decode(t, StatsOf(sampleStats())).(map[string]any)
	parts := st["partitions"].([]any)
	p0, p1 := parts[0].(map[string]any), parts[1].(map[string]any)
	if p0["oldest_eligible_age"] != "1.5s" || p0["in_flight"] != 4.0 || p0["error"] != nil {
		t.Fatalf("partition 0 = %v", p0)
	}
	if e := p1["error"].(map[string]any); e["code"] != "queue_not_found" || e["message"] != "queue orders not found" {
		t.Fatalf("partition 1 error = %v", e)
	}
	if total := st["total"].(map[string]any); total["ready"] != 3.0 || total["counters"].(map[string]any)["sent"] != 12.0 {
		t.Fatalf("total = %v", total)
	}
	d := decode(t, sampleDeadLetter()).(map[string]any)
	if d["reason"] != "retries_exhausted" || d["dead_at"] != "2026-01-02T02:04:05.0000006Z" || d["body"] != nil || d["body_base64"] != "//4=" {
		t.Fatalf("dead letter = %v", d)
	}
	if ev := d["history"].([]any)[0].(map[string]any); ev["kind"] != "lease_expired" {
		t.Fatalf("event = %v", ev)
	}
	if n := decode(t, NodeOf(wire.NodeInfo{ID: "n1", State: wire.NodeAlive})).(map[string]any); n["state"] != "alive" {
		t.Fatalf("node = %v", n)
	}
	empty := decode(t, ClusterOf(nil, nil)).(map[string]any)
	if _, ok := empty["nodes"].([]any); !ok {
		t.Fatalf("empty cluster nodes = %#v, want []", empty["nodes"])
	}
	if _, ok := empty["node"]; ok {
		t.Fatalf("the CLI's cluster view has a node key: %v", empty)
	}
	if UnixTime(0) != "" || Time(time.Time{}) != "" {
		t.Fatal("the zero time is not left out")
	}
}

func TestJSONView_EveryEnumNameIsSnakeCase(t *testing.T) {
	var names []string
	for s := wire.NodeUnknown; s <= wire.NodeLeft; s++ {
		names = append(names, s.String())
	}
	for r := wire.DeadAny; r <= wire.DeadLeaseExpired; r++ {
		names = append(names, r.String())
	}
	for k := wire.EventNacked; k <= wire.EventRedriven; k++ {
		names = append(names, k.String())
	}
	for c := wire.Code(1); c.Known(); c++ {
		names = append(names, c.String())
	}
	names = append(names, "Leader", "Follower", "Candidate", "Shutdown")
	for _, n := range names {
		if e := Enum(n); !snakeCase.MatchString(e) || strings.Contains(e, " ") {
			t.Errorf("enum %q renders as %q", n, e)
		}
	}
}

func TestJSONView_DurationRejectsNumbers(t *testing.T) {
	var d Duration
	if err := json.Unmarshal([]byte(`30000000000`), &d); err == nil {
		t.Fatal("a number of nanoseconds was accepted as a duration")
	}
	if err := json.Unmarshal([]byte(`"2m"`), &d); err != nil || time.Duration(d) != 2*time.Minute {
		t.Fatalf("\"2m\" = %v, %v", time.Duration(d), err)
	}
}

// TestQueueConfig_JSONUnchanged pins the JSON of a config, recorded before
// the view was derived from the wire's fields; settings added since are
// appended (max_in_flight, max_delivery_rate, fair_groups).
func TestQueueConfig_JSONUnchanged(t *testing.T) {
	const recorded = `{"partitions":2,"replicas":3,"visibility_timeout":"45s","max_receives":7,"backoff_base":"2s","backoff_max":"1h0m0s","dedup_window":"1m0s","max_message_bytes":4096,"max_depth":100,"max_bytes":1048576,"retention":"1h30m0s","max_dead":50,"max_dead_bytes":33554432,"dead_retention":"48h0m0s","dedup_max_ids":5000,"max_in_flight":0,"max_delivery_rate":0,"fair_groups":0}`
	w := wire.QueueConfig{Partitions: 2, Replicas: 3, VisibilityTimeout: 45 * time.Second, MaxReceives: 7,
		BackoffBase: 2 * time.Second, BackoffMax: time.Hour, DedupWindow: time.Minute, MaxMessageBytes: 4096,
		MaxDepth: 100, MaxBytes: 1 << 20, Retention: 90 * time.Minute, MaxDead: 50, MaxDeadBytes: 1 << 25,
		DeadRetention: 48 * time.Hour, DedupMaxIDs: 5000}
	b, err := json.Marshal(ConfigOf(w))
	if err != nil || string(b) != recorded {
		t.Fatalf("JSON changed (%v):\n got %s\nwant %s", err, b, recorded)
	}
	var back QueueConfig
	if err := json.Unmarshal([]byte(recorded), &back); err != nil || back.QueueConfig != w {
		t.Fatalf("read back %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"retention":"soon"}`), &back); err == nil {
		t.Fatal("a bad duration was accepted")
	}
}

// A peeked message renders its state, holder and deadline; a body that
// is not UTF-8 comes as body_base64; a bulk delete's result lists an
// empty sample as [] rather than null.
func TestPeekedMessageAndMatched(t *testing.T) {
	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	m := PeekedMessageOf(client.PeekedMessage{ID: "a", Body: []byte{0xff}, EnqueuedAt: at, State: "leased",
		VisibleAt: at.Add(time.Minute), Consumer: "w1"}, at.Add(1500*time.Millisecond))
	b, _ := json.Marshal(m)
	for _, want := range []string{`"state":"leased"`, `"consumer":"w1"`, `"visible_at":"2026-12-06T05:01:00Z"`, `"body":""`,
		`"body_base64":"/w=="`, `"age":"1.5s"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("peeked message %s lacks %s", b, want)
		}
	}
	b, _ = json.Marshal(MessagesMatchedOf(client.DeleteMatchingResult{Matched: 2}, true))
	if string(b) != `{"dry_run":true,"matched":2,"deleted":0,"sample":[]}` {
		t.Errorf("matched %s", b)
	}
}
