package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestBenchQueues_CreatesCarriesTrafficAndDeletes(t *testing.T) {
	cl := startCluster(t)
	cl.createQueue(t, "few-00002") // already there: kept, not counted
	r := ferry(t, cl.addrs, "bench", "queues", "--count", "5", "--prefix", "few-", "--workers", "3",
		"--traffic", "100ms", "--duration", "1500ms")
	if r.code != 0 {
		t.Fatalf("bench queues: exit %d, stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "4 created, 1 already there") {
		t.Fatalf("output %q: want 4 created and 1 already there", r.stdout)
	}
	var sent, acked, failed, queues int
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "traffic:") {
			if _, err := fmt.Sscanf(line, "traffic: %d sent, %d acked, %d failed calls in 1.5s over %d queues", &sent, &acked, &failed, &queues); err != nil {
				t.Fatalf("traffic line %q: %v", line, err)
			}
		}
	}
	// 5 queues x one send per 100 ms for 1.5 s: about 75, every one
	// consumed but those still in flight at the end.
	if queues != 5 || sent < 25 || acked < sent-10 || failed != 0 {
		t.Fatalf("traffic: %d sent, %d acked, %d failed over %d queues", sent, acked, failed, queues)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qs, err := cl.c.ListQueues(ctx, "few-")
	if err != nil || len(qs) != 5 {
		t.Fatalf("ListQueues(few-) = %d queues, %v; want 5", len(qs), err)
	}
	r = ferry(t, cl.addrs, "bench", "queues", "--count", "3", "--prefix", "each-", "--send-each")
	if r.code != 0 || !strings.Contains(r.stdout, "sends: 3 confirmed, 0 failed, one per queue") {
		t.Fatalf("bench queues --send-each: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for i := 1; i <= 3; i++ {
		st, err := cl.c.QueueStats(ctx, fmt.Sprintf("each-%05d", i))
		if err != nil || st.Total().Ready != 1 {
			t.Fatalf("each-%05d after --send-each: %+v, %v; want one message ready", i, st, err)
		}
	}
	if r := ferry(t, cl.addrs, "bench", "queues", "--count", "5", "--prefix", "few-", "--delete"); r.code != 0 {
		t.Fatalf("bench queues --delete: exit %d, stderr %q", r.code, r.stderr)
	}
	for i := 1; i <= 5; i++ {
		queueGone(t, cl, fmt.Sprintf("few-%05d", i))
	}
	if r := ferry(t, cl.addrs, "bench", "queues", "--count", "0"); r.code == 0 || !strings.Contains(r.stderr, "--count") {
		t.Fatalf("--count 0: exit %d, stderr %q; want a failure naming --count", r.code, r.stderr)
	}
}
