package sqs

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// letterOf is a dead letter of MetaQueue holding record q under id.
func letterOf(seq uint64, id string, q queueMeta) client.DeadLetter {
	body, _ := json.Marshal(q)
	return client.DeadLetter{Seq: seq, ID: id, Group: q.Name, Body: body}
}

// TestMetaRecord_ForgedFieldsIgnored: a record whose any field is out of
// what this API writes (future or overflowing version, id not matching
// its version, another queue's name, unknown or invalid attributes, bad
// times or tags) is ignored and pruned; the valid record stays the newest.
func TestMetaRecord_ForgedFieldsIgnored(t *testing.T) {
	now := time.Now()
	good := queueMeta{Name: "jobs", Version: now.UnixNano(), Created: now.Unix(), Modified: now.Unix(),
		Attrs: map[string]string{attrDelaySeconds: "5"}, Tags: map[string]string{"team": "a"}}
	if err := good.check("jobs", recordID("jobs", good.Version), now); err != nil {
		t.Fatalf("a record this API writes: %v", err)
	}
	forged := map[string]func(q *queueMeta) string{
		"version MaxInt64": func(q *queueMeta) string { q.Version = math.MaxInt64; return "" },
		"version a day and more ahead": func(q *queueMeta) string {
			q.Version = now.Add(25 * time.Hour).UnixNano()
			return ""
		},
		"version zero":          func(q *queueMeta) string { q.Version = 0; return "" },
		"id of another version": func(q *queueMeta) string { return recordID("jobs", q.Version-1) },
		"another queue's name":  func(q *queueMeta) string { q.Name = "other"; return recordID("other", q.Version) },
		"unknown attribute": func(q *queueMeta) string {
			q.Attrs = map[string]string{"VisibilityTimeout": "1"}
			return ""
		},
		"delay out of range": func(q *queueMeta) string { q.Attrs = map[string]string{attrDelaySeconds: "901"}; return "" },
		"size below SQS's":   func(q *queueMeta) string { q.Attrs = map[string]string{attrMaximumMessageSize: "10"}; return "" },
		"bad redrive policy": func(q *queueMeta) string {
			q.Attrs = map[string]string{attrRedrivePolicy: `{"maxReceiveCount":0}`}
			return ""
		},
		"dedup on a standard queue": func(q *queueMeta) string {
			q.Attrs = map[string]string{attrContentBasedDedup: "true"}
			return ""
		},
		"created in the far future": func(q *queueMeta) string { q.Created = math.MaxInt64; return "" },
		"negative modified":         func(q *queueMeta) string { q.Modified = -1; return "" },
		"oversized tag":             func(q *queueMeta) string { q.Tags = map[string]string{"k": strings.Repeat("v", 257)}; return "" },
	}
	for name, forge := range forged {
		q := good
		q.Attrs, q.Tags = map[string]string{attrDelaySeconds: "5"}, map[string]string{"team": "a"}
		id := forge(&q)
		if id == "" {
			id = recordID(q.Name, q.Version)
		}
		letters := []client.DeadLetter{letterOf(1, recordID("jobs", good.Version), good), letterOf(2, id, q)}
		newest, old := newestRecord("jobs", letters, now)
		if newest == nil || newest.Version != good.Version || newest.Attrs[attrDelaySeconds] != "5" {
			t.Errorf("%s: newest record %+v, want the valid one", name, newest)
		}
		if len(old) != 1 || old[0].Seq != 2 {
			t.Errorf("%s: pruned %+v, want the forged record", name, old)
		}
	}
	notJSON := client.DeadLetter{Seq: 3, ID: "jobs@1", Group: "jobs", Body: []byte("{")}
	if newest, old := newestRecord("jobs", []client.DeadLetter{notJSON}, now); newest != nil || len(old) != 1 {
		t.Fatalf("a letter that is not JSON: %+v %+v", newest, old)
	}
}
